""" "How does my run compare with similar hardware?" in Chromium at 1366 and
390 px: from the home page, signed in, My runs then the run (two clicks),
and its rank and percentile are on the first screen with nothing wider than
the viewport; an agent run compared with a published one shows the test
they share; a comparison with nothing shared offers no Save."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from benchdb.results.models import Result, Run
from tests.browser.test_owner_flow import PASSWORD, Watched, sign_in
from tests.web.test_run_standing import READ, run_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [1366, 390]


def on_first_screen(w: Watched, locator) -> None:
    """Visible, inside the screen's width and above its fold."""
    w.in_view_width(locator)
    box = locator.bounding_box()
    height = w.page.viewport_size["height"]
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (w.width, box)


def context_of(browser, width: int):
    return browser.new_context(
        viewport={"width": width, "height": 844 if width < 500 else 900}
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_my_runs_rank_within_two_clicks(live_server, browser, screenshot, width):
    ana = User.objects.create_user("ana", password=PASSWORD)
    runs = [run_of(READ, title=f"peer {i}") for i in range(3)]
    mine = run_of(READ, title="ana's guest", owner=ana)
    for run, iops in zip([*runs, mine], (1000.0, 2000.0, 4000.0, 3000.0), strict=True):
        Result.objects.filter(run=run, test_id=READ).update(iops_mean=iops)
    w = Watched(context_of(browser, width), width)
    page = w.page
    sign_in(page, live_server.url, "ana")
    # Two clicks: My runs, then the run.
    page.click("#my-runs-link")
    page.locator(f"#run-{mine.pk} .my-run-title a").click()
    assert page.url.endswith(mine.get_absolute_url())
    cell = page.locator(f'#standing dd[data-rank-test="{READ}"]')
    on_first_screen(w, cell.locator(".rank"))
    on_first_screen(w, cell.locator(".among"))
    assert "better than 67%" in cell.inner_text()
    assert "3 other runs" in cell.inner_text()
    w.in_view_width(cell.locator("a.nearest"))
    w.check("run page")
    screenshot(page, f"rank-run-{width}")
    cell.locator("a.nearest").click()
    assert f"runs={mine.pk}," in page.url
    w.check("compare with the nearest")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_agent_run_against_published_ones(live_server, browser, width):
    call_command("load_reference")
    agent = run_of("dd-write-1m-fdatasync", "fio-rand-read-4k-q32t1")
    dd_seed = Run.objects.filter(
        source="published", results__test_id="dd-write-1g-zero-fdatasync"
    ).first()
    fio_seed = Run.objects.filter(
        source="published", results__test_id="fio-randread-4k-q16t8"
    ).first()
    w = Watched(context_of(browser, width), width)
    page = w.page
    page.goto(f"{live_server.url}/compare/?runs={agent.pk},{dd_seed.pk}")
    group = page.locator("details.group").first
    assert "dd" in group.locator(":scope > summary").inner_text().lower()
    w.in_view_width(group.locator(":scope > summary"))
    assert page.locator("#save-comparison").count() == 1
    w.check("shared")
    page.goto(f"{live_server.url}/compare/?runs={agent.pk},{fio_seed.pk}")
    w.in_view_width(page.locator("#nothing-shared"))
    assert page.locator("#save-comparison").count() == 0
    assert page.locator("#copy-markdown").count() == 0
    w.check("nothing shared")
