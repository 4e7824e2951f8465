"""On a phone the run page's test groups fold (the first stays open, each
other one a tap away; on a desktop the first groups open as before), and a
comparison's queue-depth curves print each point's figure as the bar charts
do, whole inside the chart.  No console error, nothing sideways."""

from __future__ import annotations

import pytest

from benchdb.results.models import Run
from tests.browser.test_every_page import OVERFLOW
from tests.browser.test_readable_compare import DESKTOP, PHONE, _open, stored_result

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# test id -> (group, title, {metric: typical value})
TESTS = {
    "fio-rand-read-4k-q1t1": (
        "fio-random",
        "Random read 4 KiB Q1T1",
        {"iops": 9_000.0},
    ),
    "fio-seq-read-1m-q8t1": (
        "fio-seq",
        "Sequential read 1 MiB Q8T1",
        {"bw_bytes": 2.0e9},
    ),
    "ioping-4k": ("ioping", "ioping 4 KiB", {"lat_mean_ns": 80_000.0}),
    **{
        f"fio-sweep-rand-read-4k-q{d}t1": (
            "fio-iodepth-sweep",
            f"Random read 4 KiB Q{d}T1",
            {"iops": 9_000.0 * d**0.8, "lat_mean_ns": 110_000.0 * d**0.2},
        )
        for d in (1, 2, 4, 8, 16, 32)
    },
}
NOISY = "fio-sweep-rand-read-4k-q4t1"  # repeats 900x apart

# Each curve's points as drawn (not the bands' edges), and what charts.js
# wrote where (chart.$labels), against the canvas's own box.
POINTS = """(canvas) => {
  const chart = Chart.getChart(canvas);
  const points = chart.data.datasets.filter((ds) => ds.texts).reduce(
    (n, ds) => n + ds.data.filter((v) => v !== null && v !== undefined).length, 0);
  return {points, width: canvas.clientWidth, labels: chart.$labels};
}"""


def _run(mode: str, factor: float) -> Run:
    run = Run.objects.create(
        suite_id="s", suite_version="1", role="guest", cache_mode=mode, title=mode
    )
    for test_id, (group, title, figures) in TESTS.items():
        repeats = {}
        for metric, typical in figures.items():
            values = [typical * factor * k for k in (0.98, 1.0, 1.02)]
            if test_id == NOISY and metric == "iops" and mode == "none":
                values = [typical / 30, typical, typical * 30]
            repeats[metric] = values
        stored_result(run, test_id, title, group, repeats)
    return run


@pytest.fixture
def sweep_run() -> Run:
    return _run("none", 1.0)


GROUPS_OPEN = "() => [...document.querySelectorAll('details.group')].map(d => d.open)"


def test_a_phone_folds_the_run_pages_groups(live_server, browser, sweep_run):
    url = f"{live_server.url}{sweep_run.get_absolute_url()}"
    context, page, problems = _open(browser, url, PHONE)
    assert page.evaluate(GROUPS_OPEN) == [True, False, False, False]
    sweep = page.locator("details#group-fio-iodepth-sweep")
    assert sweep.locator("canvas").count() == 0  # drawn when opened
    sweep.locator("> summary").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#group-fio-iodepth-sweep canvas').length"
    )
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout
    assert not problems, problems
    context.close()


def test_a_comparisons_curves_print_each_points_figure(live_server, browser):
    runs = [_run("none", 1.0), _run("writeback", 1.2)]
    ids = ",".join(str(r.pk) for r in runs)
    context, page, problems = _open(
        browser, f"{live_server.url}/compare/?runs={ids}", PHONE
    )
    sweep = page.locator("details#group-fio-iodepth-sweep")
    sweep.locator("> summary").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#group-fio-iodepth-sweep canvas').length >= 2"
    )
    texts = []
    for canvas in sweep.locator("canvas").all():
        canvas.scroll_into_view_if_needed()
        drawn = canvas.evaluate(POINTS)
        assert drawn["points"] == 12 and len(drawn["labels"]) == 12
        for label in drawn["labels"]:
            assert 0 <= label["left"] and label["right"] <= drawn["width"], label
        texts += [label["text"] for label in drawn["labels"]]
    assert sum(t.endswith("(noisy)") for t in texts) == 1
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"] and not layout["out"], layout
    assert not problems, problems
    context.close()


def test_a_desktop_opens_the_first_groups(live_server, browser, sweep_run):
    url = f"{live_server.url}{sweep_run.get_absolute_url()}"
    context, page, problems = _open(browser, url, DESKTOP)
    assert page.evaluate(GROUPS_OPEN) == [True, True, False, False]
    assert not problems, problems
    context.close()
