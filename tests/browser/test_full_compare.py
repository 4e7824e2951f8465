"""Two full-profile runs compared: the page a person can read.

The bundles are two real ``benchdb-agent run --profile full`` runs on this
project's CI machine (tests/samples/bundles/README.md), stored through the
project's own ingest.  Checked: the page's budget (bytes transferred, time to
first byte), every group's chart drawn and table fetched once opened, the
queue-depth curves in numeric depth order, nothing wider than a phone, and the
figures equal the API's; and the same for ten runs.
"""

from __future__ import annotations

import copy
import gzip
import json
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.browser.test_every_page import OVERFLOW, PAINTED

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
BUDGET_BYTES = 300_000
BUDGET_TTFB_S = 0.5


def store(name: str) -> int:
    from benchdb.results.ingest import store_bundle

    with gzip.open(BUNDLES / name, "rt") as handle:
        bundle = json.load(handle)
    bundle = copy.deepcopy(bundle)
    bundle["bundle_id"] = str(uuid.uuid4())
    return store_bundle(bundle).pk


def open_everything(page) -> None:
    """Open every group and every table; wait for the fetched tables."""
    groups = page.locator("details.group")
    for i in range(groups.count()):
        group = groups.nth(i)
        if not group.evaluate("d => d.open"):
            group.locator("> summary").click()
    boxes = page.locator("details.table-box")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        if not box.evaluate("d => d.open"):
            box.locator("> summary").click()
    page.wait_for_function(
        "n => document.querySelectorAll('table.delta').length === n", arg=groups.count()
    )
    assert page.locator(".table-slot").count() == 0
    page.wait_for_timeout(300)


def check_page(browser, screenshot, url: str, name: str, width: int) -> tuple:
    """Within budget at load; every group's charts and table once opened;
    nothing wider than the screen; no console error."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    sizes = []

    def count(response, sizes=sizes):
        # Bytes on the wire (compressed where the server compresses).
        sizes.append(response.request.sizes()["responseBodySize"])

    page.on("response", count)
    errors = []
    page.on("console", lambda m, e=errors: m.type == "error" and e.append(m.text))
    page.on("pageerror", lambda exc, e=errors: e.append(str(exc)))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    assert sum(sizes) < BUDGET_BYTES, sizes
    print(f"{width} px: {sum(sizes)} bytes transferred in {len(sizes)} responses")
    groups = page.locator("details.group")
    assert groups.count() >= 5
    open_everything(page)
    canvases = page.locator(".charts canvas")
    assert canvases.count() >= groups.count()
    for canvas in canvases.all():
        canvas.scroll_into_view_if_needed()
        assert canvas.evaluate(PAINTED) > 200
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout
    assert not errors, errors
    screenshot(page, f"{name}-{width}")
    if width == 1366:
        for group in ("group-fio-random", "group-fio-iodepth-sweep"):
            page.locator(f"#{group} .charts").screenshot(
                path=str(screenshot.folder / f"{name}-{group}.png")
            )
    return page, context


def test_two_full_runs_compare_within_budget(live_server, browser, screenshot):
    ids = [store("full-none.json.gz"), store("full-writeback.json.gz")]
    url = f"{live_server.url}/compare/?runs={ids[0]},{ids[1]}"
    # Time to first byte on the server as a client sees it (warm: second call).
    for _ in range(2):
        start = time.perf_counter()
        with urllib.request.urlopen(url) as response:
            response.read(1)
            ttfb = time.perf_counter() - start
            response.read()
    assert ttfb < BUDGET_TTFB_S, ttfb
    print(f"compare of two full runs: first byte after {ttfb * 1000:.0f} ms")
    with urllib.request.urlopen(
        f"{live_server.url}/api/v1/compare/?runs={ids[0]},{ids[1]}"
    ) as r:
        api = json.load(r)
    for width in (1366, 390):
        page, context = check_page(browser, screenshot, url, "compare-full", width)
        if width == 1366:
            # The tables fetched when opened hold the API's figures.
            shown = {
                (
                    row.get_attribute("data-test"),
                    row.get_attribute("data-metric"),
                    row.get_attribute("data-run"),
                ): row.get_attribute("data-mean")
                for row in page.locator("table.delta tbody tr").all()
            }
            for test in api["tests"]:
                for m in test["metrics"]:
                    for e in m["runs"]:
                        key = (test["test_id"], m["metric"], str(e["run"]))
                        assert shown[key] == repr(e["mean"])
        context.close()
    # The sweep: depths in numeric order, IOPS and latency, one line per run.
    data = json.loads(
        urllib.request.urlopen(url)
        .read()
        .decode()
        .split('id="chart-data"')[1]
        .split(">", 1)[1]
        .split("</script>")[0]
    )
    sweep = next(g for g in data if g["slug"] == "group-fio-iodepth-sweep")
    assert len(sweep["lines"]) == 4  # two families x (figure, latency)
    for chart in sweep["lines"]:
        assert len(chart["series"]) == 2
        for series in chart["series"]:
            depths = [p["x"] for p in series["points"]]
            assert depths == sorted(depths) and depths[0] == 1 and len(depths) >= 6
            for p in series["points"]:
                assert p["low"] is None or 0 <= p["low"] <= p["y"] <= p["high"]


def test_ten_full_runs_compare_within_budget(live_server, browser, screenshot):
    """Ten runs, the most a comparison takes but two: the page carries the
    charts, each group's table comes when it is opened."""
    ids = [store(f"full-{mode}.json.gz") for mode in ("none", "writeback") * 5]
    url = f"{live_server.url}/compare/?runs={','.join(map(str, ids))}"
    for width in (1366, 390):
        page, context = check_page(browser, screenshot, url, "compare-ten", width)
        rows = page.locator("table.delta tbody tr")
        assert {r.get_attribute("data-run") for r in rows.all()} == set(map(str, ids))
        context.close()
