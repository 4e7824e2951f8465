"""A person's path through benchdb in a real browser: filter, pick, compare,
see the charts drawn, save a link, open it elsewhere, see the same thing."""

from __future__ import annotations

import json
import urllib.request

import pytest
from django.core.management import call_command

from benchdb.results.models import Run
from benchdb.web import present

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Counts the canvas pixels that are not transparent: a chart that drew paints some.
PAINTED = """(canvas) => {
  const c = canvas.getContext('2d');
  const data = c.getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) n++;
  return n;
}"""


def test_filter_select_compare_save_and_share(live_server, browser, screenshot):
    call_command("load_reference")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + "/")
    screenshot(page, "home")
    page.click("text=By cache mode >> xpath=.. >> a:text('writeback')")
    assert "cache_mode=writeback" in page.url
    # Widen the filter to the five modes of seed 001 with the facet checkboxes.
    # Each tick applies at once (no button) and shows as a removable chip.
    for mode in ("none", "writethrough", "directsync", "unsafe"):
        with page.expect_navigation():
            page.check(f"input[name=cache_mode][value={mode}]")
        assert page.locator(f"a.chip:has-text('Cache mode: {mode}')").count() == 1
    assert page.locator("#filters button.apply").is_hidden()
    assert "5 runs" in page.inner_text("#pick")
    screenshot(page, "browse")
    boxes = page.locator("input[name=runs]")
    assert boxes.count() == 5
    for i in range(5):
        boxes.nth(i).check()
    page.click("#compare-button")
    page.wait_for_selector(".charts canvas")
    canvases = page.locator(".charts canvas")
    assert canvases.count() >= 1
    assert canvases.first.evaluate(PAINTED) > 1000
    screenshot(page, "compare")
    # The numbers on the page are the API's.
    ids = page.url.split("runs=")[1]
    with urllib.request.urlopen(f"{live_server.url}/api/v1/compare/?runs={ids}") as r:
        api = json.load(r)
    shown = {
        row.get_attribute("data-run"): float(row.get_attribute("data-mean"))
        for row in page.locator("table.delta tbody tr").all()
    }
    for entry in api["tests"][0]["metrics"][0]["runs"]:
        assert shown[str(entry["run"])] == entry["mean"]
    # The figure drawn and tabulated is the API's gmean (its interval's centre).
    plotted = {
        row.get_attribute("data-run"): float(row.get_attribute("data-gmean"))
        for row in page.locator("table.delta tbody tr").all()
    }
    for entry in api["tests"][0]["metrics"][0]["runs"]:
        assert plotted[str(entry["run"])] == entry["gmean"]
    # Against unsafe everything differs; against none, most is noise.
    none_id = next(
        row.get_attribute("data-run")
        for row in page.locator("table.delta tbody tr").all()
        if "cache=none" in row.inner_text()
    )
    page.click(f"a[href$='&ref={none_id}']")
    page.wait_for_selector(".charts canvas")
    verdicts = page.inner_text("main")
    assert "cannot tell" in verdicts and "faster by" in verdicts
    # Save, then open the link in a fresh context (no cookies, no history).
    page.click("#save-comparison")
    page.wait_for_url("**/c/*")
    link = page.url
    before = page.locator("table.delta").all_inner_texts()
    other = browser.new_context().new_page()
    other.goto(link)
    other.wait_for_selector(".charts canvas")
    assert other.locator("table.delta").all_inner_texts() == before
    assert other.locator(".charts canvas").first.evaluate(PAINTED) > 1000
    screenshot(other, "shared")


def test_cache_mode_report_and_run_page(live_server, browser, screenshot):
    call_command("load_reference")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + "/reports/cache-modes/")
    # "One system, mode by mode" is folded under the answer: open it.
    page.click("#one-system > summary")
    page.wait_for_selector(".charts canvas")
    text = page.inner_text("main")
    for mode in ("none", "writethrough", "writeback", "directsync", "unsafe"):
        assert f"cache={mode}" in text
    assert page.locator(".charts canvas").first.evaluate(PAINTED) > 1000
    screenshot(page, "cache-modes")
    page.click("#differences a:has-text('cache=unsafe')")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector(".charts canvas")
    main = page.inner_text("main")
    assert "Provenance" in main
    # The five dd rates (bytes / seconds) average 1,144.9 MB/s; the page shows
    # their geometric mean, the centre of the interval drawn with it.
    run = Run.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    result = run.results.get()
    figure = result.stats["directions"][result.stats["main_direction"]]["bw_bytes"]
    assert round(figure["mean"] / 1e6, 1) == 1144.9
    assert present.human(figure["gmean"], "bw_bytes") in main
    assert "921.9 MB/s" in main  # a repeat: 1073741824 B / 1.16476 s
    screenshot(page, "run")
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.goto(live_server.url + "/runs/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 400
    screenshot(phone, "browse-phone")
