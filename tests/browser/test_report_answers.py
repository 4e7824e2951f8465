"""A newcomer's two questions in Chromium at 1366 and 390 px, on the
reference data and a realistic mix of agent, imported and published runs
(tests/web/report_mix.py): from the home page, in two clicks, the answer's
figure, interval, verdict and data-safety line are inside the first screen
(their boxes within the screen's width and height), with no console error
and nothing wider than the viewport.

"I run Proxmox on a SATA SSD. Which cache mode?": the home page's question,
then the report's link to that setup.  "How much does a VM lose against
bare metal?": the home page's question; its chart is drawn and a guest
faster than its host is explained."""

from __future__ import annotations

import pytest

from benchdb.results import reports
from tests.browser.test_every_page import PAINTED
from tests.browser.test_owner_flow import Watched
from tests.web.report_mix import SWEPT, load_mix

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEIGHT = {1366: 768, 390: 844}


def in_first_screen(watched: Watched, locator) -> None:
    """Visible, inside the screen's width and inside the first screen."""
    watched.in_view_width(locator)
    box = locator.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT[watched.width], (
        watched.width,
        box,
    )


def from_home(live_server, browser, width: int, question: str, report: str):
    """The reference mix loaded, the home page opened at ``width`` and its
    ``question`` clicked (click 1): (context, Watched, page) on ``report``."""
    load_mix()
    context = browser.new_context(viewport={"width": width, "height": HEIGHT[width]})
    w = Watched(context, width)
    page = w.page
    page.goto(live_server.url + "/")
    with page.expect_navigation():
        page.click(f"a.question:has-text('{question}')")  # click 1
    w.check(report)
    return context, w, page


@pytest.mark.parametrize("width", [1366, 390])
def test_which_cache_mode_in_two_clicks(live_server, browser, screenshot, width):
    context, w, page = from_home(
        live_server, browser, width, "Which cache mode", "cache-mode report"
    )
    with page.expect_navigation():
        page.click(".setup-links a:has-text('Proxmox VE on SATA/SAS SSD')")  # click 2
    w.check("the setup's answer")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, f"answer-cache-mode-{width}")
    assert (
        page.locator("select[name=workload] option:checked").get_attribute("value")
        == SWEPT
    )
    # The answer: the fastest mode that keeps flushed data, its figure, its
    # interval and verdict, and the data-safety line, in the first screen.
    answer = page.locator("#cache-answer")
    in_first_screen(w, answer)
    said = answer.inner_text()
    assert said.startswith("cache=writeback: +") and "95% interval" in said
    assert "faster over 3 paired systems" in said
    assert "flushed data is kept" in said and reports.UNSAFE_FASTER in said
    row = page.locator("#cache-answers tr[data-mode=writeback]")
    cells = ("td.figure", "td.interval", "td.verdict", "td.safety")
    for cell in cells:  # the table's row too, without a sideways scroll
        w.in_view_width(row.locator(cell))
    assert "flushed data is kept" in row.locator("td.safety").inner_text()
    unsafe = page.locator("#cache-answers tr[data-mode=unsafe] td.verdict")
    assert reports.UNSAFE_FASTER in unsafe.inner_text()
    assert "no data for this setup yet" not in page.inner_text("main")
    context.close()


@pytest.mark.parametrize("width", [1366, 390])
def test_how_much_a_vm_loses_in_one_click(live_server, browser, screenshot, width):
    context, w, page = from_home(
        live_server, browser, width, "How much do I lose", "overhead report"
    )
    screenshot(page, f"answer-overhead-{width}")
    answer = page.locator("#overhead-answer")
    in_first_screen(w, answer)
    said = answer.inner_text()
    assert "× host" in said and "system" in said
    canvas = page.locator(".charts[data-group=overhead] canvas")
    canvas.scroll_into_view_if_needed()
    assert canvas.evaluate(PAINTED) > 200
    w.in_view_width(canvas)
    # A guest faster than its host, filtered to its setup: marked, explained.
    with page.expect_navigation():
        page.select_option("select[name=platform]", "libvirt")
    w.check("libvirt")
    with page.expect_navigation():
        page.select_option("select[name=workload]", "fio-seq-read-1m-q8t1")
    w.check("a guest faster than its host")
    assert "†" in page.locator("#overhead-answer").inner_text()
    note = page.locator("#above-host-note")
    w.in_view_width(note)
    assert "page cache" in note.inner_text()
    context.close()
