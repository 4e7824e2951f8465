"""A comparison a person can read, on a desktop and on a phone.

Six runs, one per cache mode and a second cache=none, whose tests differ
1000x (4 KiB random reads at depth 1 and 32, sequential transfers, latency):
at 1366 and 390 px every bar's figure is written whole inside its chart, the
page never scrolls sideways, the answer's cells (figure, verdict, safety) are
inside the screen's width, the phone page is at most ``SCREENS`` screens tall
until a group is opened; the unsafe run, the fastest, is never "better"; an
interval too wide to mean anything says "too noisy to estimate".  The
existing checks too: no console error, no overflow, a CSP header.
"""

from __future__ import annotations

import pytest

from benchdb.results import reports, stats
from benchdb.results.models import Measurement, Result, Run
from tests.browser.test_every_page import OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}
# The phone page, every group but the first folded, is at most this many
# screens (844 px) tall.
SCREENS = 4

# test id -> (group, title, metric, typical value): 1000x apart within a group.
TESTS = {
    "fio-rand-read-4k-q1t1": ("fio-random", "Random read 4 KiB Q1T1", "iops", 200.0),
    "fio-rand-read-4k-q32t1": (
        "fio-random",
        "Random read 4 KiB Q32T1",
        "iops",
        200_000.0,
    ),
    "fio-rand-write-4k-q1t1": (
        "fio-random",
        "Random write 4 KiB Q1T1",
        "iops",
        150.0,
    ),
    "fio-seq-read-1m-q8t1": (
        "fio-seq",
        "Sequential read 1 MiB Q8T1",
        "bw_bytes",
        2.0e9,
    ),
    "fio-seq-write-1m-q8t1": (
        "fio-seq",
        "Sequential write 1 MiB Q8T1",
        "bw_bytes",
        2.0e6,
    ),
    "ioping-4k": ("ioping", "ioping 4 KiB", "lat_mean_ns", 80_000.0),
}
# cache mode -> speed factor against cache=none (unsafe: much faster).
MODES = [
    ("none", 1.0),
    ("writethrough", 0.6),
    ("writeback", 1.05),
    ("directsync", 0.5),
    ("unsafe", 3.0),
    ("none", 1.01),
]
NOISY_TEST = "fio-rand-write-4k-q1t1"
NOISY_RUN = 3  # directsync: repeats 1000x apart


def stored_result(run: Run, test_id: str, title: str, group: str, values) -> Result:
    """A fio result of ``run`` read in one direction: each metric's repeats
    (``values``: metric -> list) with their statistics."""
    return Result.objects.create(
        run=run,
        test_id=test_id,
        title=title,
        group=group,
        tool="fio",
        comparability_key=f"k|{test_id}",
        stats={
            "main_direction": "read",
            "directions": {"read": {m: stats.summarize(v) for m, v in values.items()}},
            "values": {"read": values},
        },
        repeat_count=max(len(v) for v in values.values()),
    )


def _run(mode: str, factor: float, index: int) -> Run:
    run = Run.objects.create(
        suite_id="s",
        suite_version="1",
        role="guest",
        cache_mode=mode,
        title=f"vm {mode} {index}",
    )
    for test_id, (group, title, metric, typical) in TESTS.items():
        better = metric != "lat_mean_ns"
        centre = typical * (factor if better else 1 / factor)
        values = [centre * k for k in (0.98, 1.0, 1.02, 0.99, 1.01)]
        if index == NOISY_RUN and test_id == NOISY_TEST:
            values = [centre / 30, centre, centre * 30]
        result = stored_result(run, test_id, title, group, {metric: values})
        Measurement.objects.bulk_create(
            Measurement(result=result, repeat=i, direction="read", **{metric: v})
            for i, v in enumerate(values)
        )
    return run


@pytest.fixture
def six_runs():
    return [_run(mode, factor, i) for i, (mode, factor) in enumerate(MODES)]


# Every bar's figure as the chart wrote it (charts.js keeps what it drew in
# chart.$labels), against the canvas's own box.
LABELS = """(canvas) => {
  const chart = Chart.getChart(canvas);
  const bars = chart.data.datasets.reduce(
    (n, ds) => n + ds.data.filter((v) => v !== null && v !== undefined).length, 0);
  return {bars, width: canvas.clientWidth, labels: chart.$labels};
}"""


def _open(browser, url: str, viewport: dict):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    problems = []
    page.on(
        "console",
        lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    assert response.status == 200
    assert "script-src 'self'" in response.headers.get("content-security-policy", "")
    return context, page, problems


def _inside(page, selector: str, width: int) -> int:
    """How many of the selector's visible boxes there are; each inside the
    screen's width."""
    boxes = [b for b in (e.bounding_box() for e in page.locator(selector).all()) if b]
    for box in boxes:
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (selector, box)
    return len(boxes)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366", "390"])
def test_six_runs_read_on_a_desktop_and_a_phone(
    live_server, browser, screenshot, six_runs, viewport
):
    ids = ",".join(str(r.pk) for r in six_runs)
    unsafe = str(six_runs[4].pk)
    url = f"{live_server.url}/compare/?runs={ids}&ref={six_runs[0].pk}"
    context, page, problems = _open(browser, url, viewport)
    width = viewport["width"]
    screenshot(page, f"readable-compare-{width}")

    # Folded: only the first group is open, and the phone page is short.
    groups = page.locator("details.group")
    assert groups.count() == 3
    assert [g.evaluate("d => d.open") for g in groups.all()] == [True, False, False]
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"{width} px: the page is {height} px tall ({height / 844:.1f} screens)")
    if width == PHONE["width"]:
        assert height <= SCREENS * PHONE["height"], height

    # Open everything: every bar's figure whole inside its chart.
    for group in groups.all():
        if not group.evaluate("d => d.open"):
            group.locator("> summary").click()
        box = group.locator("details.table-box")
        if not box.evaluate("d => d.open"):
            box.locator("> summary").click()
    page.wait_for_timeout(300)
    canvases = page.locator(".charts canvas")
    assert canvases.count() >= 3
    for canvas in canvases.all():
        canvas.scroll_into_view_if_needed()
        drawn = canvas.evaluate(LABELS)
        assert drawn["bars"] > 0 and drawn["bars"] % 6 == 0
        assert len(drawn["labels"]) == drawn["bars"]
        for label in drawn["labels"]:
            assert label["text"].strip()
            assert 0 <= label["left"] and label["right"] <= drawn["width"], label
    assert _inside(page, ".charts canvas", width) >= 3

    # Nothing sideways: no scroll, nothing sticking out.
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"], layout
    assert not layout["out"], layout
    # The answer's cells, and the safety of the modes, within the screen.
    assert _inside(page, "table.delta td.figure", width) == 6 * len(TESTS)
    # Every run's verdict against the reference (the reference's own cell
    # is empty, and folded away on a phone).
    assert _inside(page, "table.delta td.verdict", width) >= 5 * len(TESTS)
    assert _inside(page, "table.safety td", width) >= 3

    # The unsafe run, the fastest, is never "better", nor green.
    rows = page.locator(f'table.delta tr[data-run="{unsafe}"]')
    assert rows.count() == len(TESTS)
    for row in rows.all():
        text = row.inner_text()
        assert "better" not in text and "▲" not in text
        assert reports.UNSAFE_FASTER in text
        colour = row.locator(".mk").evaluate("e => getComputedStyle(e).color")
        assert colour != "rgb(43, 138, 62)"
        assert "safety-unsafe" in row.get_attribute("class")
    charts = page.evaluate(
        "JSON.parse(document.getElementById('chart-data').textContent)"
    )
    for group in charts:
        for chart in group["bars"]:
            for ds in chart["datasets"]:
                if ds["unsafe"]:
                    assert not any(m.startswith("▲") for m in ds["marks"])

    # The interval 1000x wide says so, with its repeats, and no bounds.
    noisy = page.locator(
        f'table.delta tr[data-run="{six_runs[NOISY_RUN].pk}"][data-test="{NOISY_TEST}"]'
    )
    cell = noisy.locator("td.interval")
    assert cell.inner_text() == "too noisy to estimate (3 repeats)"
    assert "too noisy to estimate" in noisy.locator("td.verdict").inner_text()
    assert not problems, problems
    screenshot(page, f"readable-compare-open-{width}")
    for group in ("group-fio-random",):
        page.locator(f"#{group}").screenshot(
            path=str(screenshot.folder / f"readable-compare-{group}-{width}.png")
        )
    context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366", "390"])
def test_the_cache_mode_report_on_a_phone(live_server, browser, viewport):
    """The report's answer table: every cell inside the screen (cards on a
    phone), unsafe's verdict never green, whatever the data chooses."""
    from django.core.management import call_command

    call_command("load_reference")
    url = f"{live_server.url}/reports/cache-modes/"
    context, page, problems = _open(browser, url, viewport)
    width = viewport["width"]
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"], layout
    assert not layout["out"], layout
    if page.locator("table.answers").count():
        assert _inside(page, "table.answers td", width) >= 5
        for cell in page.locator("table.answers tr.safety-unsafe td.verdict").all():
            colour = cell.evaluate("e => getComputedStyle(e).color")
            assert colour != "rgb(43, 138, 62)"
            assert "better" not in cell.inner_text()
    assert not problems, problems
    context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366", "390"])
def test_a_run_alone_on_a_log_axis(live_server, browser, six_runs, viewport):
    """The run page: one run's tests 1000x apart share a log axis, every
    bar's figure whole inside its chart, nothing sideways."""
    url = f"{live_server.url}{six_runs[0].get_absolute_url()}"
    context, page, problems = _open(browser, url, viewport)
    canvases = page.locator(".charts canvas")
    assert canvases.count() >= 1
    for canvas in canvases.all():
        canvas.scroll_into_view_if_needed()
        drawn = canvas.evaluate(LABELS)
        assert drawn["bars"] > 0 and len(drawn["labels"]) == drawn["bars"]
        for label in drawn["labels"]:
            assert 0 <= label["left"] and label["right"] <= drawn["width"], label
        scale = canvas.evaluate("c => Chart.getChart(c).scales.x.type")
        assert scale == "logarithmic"
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout
    assert not problems, problems
    context.close()
