"""A plotted figure and its whisker are about the same quantity (the geometric
mean), and the browse list's overhead carries its interval."""

from __future__ import annotations

import pytest

from benchdb.results import compare, stats
from benchdb.results.models import Measurement, Result, Run
from benchdb.web import present

# Skewed repeats: one slow-to-fast outlier pulls the arithmetic mean (145)
# above the geometric mean's 95% interval (about 88…143).
SKEWED = [100.0] * 19 + [1000.0]
TEST = "fio-rand-read-4k-q32t1"


def test_skewed_data_arithmetic_mean_is_outside_the_interval():
    s = stats.summarize(SKEWED)
    assert not s["ci95_low"] <= s["mean"] <= s["ci95_high"]
    assert s["ci95_low"] < s["gmean"] < s["ci95_high"]


def _comparison(values_by_run: dict) -> dict:
    entries = [compare._entry(rid, v, False) for rid, v in values_by_run.items()]
    return {
        "reference": next(iter(values_by_run)),
        "runs": [{"id": rid} for rid in values_by_run],
        "tests": [
            {
                "group": "fio-4k",
                "title": "Random read 4 KiB Q32T1",
                "test_id": TEST,
                "main_metric": "iops",
                "metrics": [{"metric": "iops", "runs": entries}],
            }
        ],
    }


def test_compare_bars_plot_the_centre_of_their_whisker():
    data = _comparison({1: SKEWED, 2: [50.0, 60.0, 55.0]})
    [group] = present.chart_groups(data, {1: "a", 2: "b"})
    [chart] = group["bars"]
    summary = stats.summarize(SKEWED)
    ds = chart["datasets"][0]
    scale = present.metric_scale("iops")
    value, low, high = ds["values"][0], ds["low"][0], ds["high"][0]
    assert value == pytest.approx(summary["gmean"] / scale)
    assert low < value < high
    assert not low <= summary["mean"] / scale <= high
    # The table shows the same figure the bar is drawn at.
    row = group["rows"][0]
    assert row["cells"]["mean"] == present.human(summary["gmean"], "iops")


def test_zero_repeat_falls_back_to_the_arithmetic_mean_and_says_so():
    data = _comparison({1: [0.0, 10.0, 20.0]})
    [group] = present.chart_groups(data, {1: "a"})
    ds = group["bars"][0]["datasets"][0]
    assert ds["values"][0] == pytest.approx(10.0 / present.metric_scale("iops"))
    assert ds["low"][0] is None
    assert group["rows"][0]["cells"]["mean"].endswith("(arithmetic mean)")


def test_run_page_bars_and_headlines_use_the_geometric_mean():
    summary = stats.summarize(SKEWED)
    ds = present._bar_dataset("x", [summary], "iops", 1.0)
    assert ds["values"] == [pytest.approx(summary["gmean"])]
    assert ds["low"][0] < ds["values"][0] < ds["high"][0]

    class R:
        test_id = "fio-rand-read-4k-q32t1"

    [h] = present.headlines(
        [{"result": R(), "metric": "iops", "summary": summary, "overhead": None}]
    )
    assert h["mean"] == summary["gmean"]


def _run(role: str, iops: list, **fields) -> Run:
    run = Run.objects.create(suite_id="s", suite_version="1", role=role, **fields)
    res = Result.objects.create(
        run=run,
        test_id=TEST,
        tool="fio",
        comparability_key=f"k|{TEST}",
        stats={
            "main_direction": "read",
            "directions": {"read": {"iops": stats.summarize(iops)}},
            "values": {"read": {"iops": list(iops)}},
        },
        # The run's figure, as ingest stores it (migration 0023).
        iops_mean=stats.centre(stats.summarize(iops)),
    )
    Measurement.objects.bulk_create(
        Measurement(result=res, repeat=i, direction="read", iops=v)
        for i, v in enumerate(iops)
    )
    return run


@pytest.mark.django_db
def test_browse_overhead_column_shows_the_interval_or_na(client):
    host = _run("host", [1000.0, 1010.0, 990.0, 1005.0])
    _run("guest", [610.0, 640.0, 625.0, 600.0], baseline=host, title="paired4")
    short_host = _run("host", [1000.0, 1010.0])
    _run("guest", [610.0, 640.0], baseline=short_host, title="paired2")
    page = client.get("/runs/?role=guest").content.decode()
    answer = stats.overhead(
        [610.0, 640.0, 625.0, 600.0], [1000.0, 1010.0, 990.0, 1005.0], True
    )
    low, high = (answer["low"] - 1) * 100, (answer["high"] - 1) * 100
    expected = f"{answer['percent']:+.1f}% ({low:+.1f}…{high:+.1f}%)"
    assert expected in page
    # Two repeats a side: no interval, so no figure that looks certain.
    assert f"n/a ({present.NOT_ENOUGH_SHORT})" in page
    short = stats.overhead([610.0, 640.0], [1000.0, 1010.0], True)
    assert short["low"] is None
    assert f"{short['percent']:+.1f}%" not in page


@pytest.mark.django_db
def test_overhead_report_rows_show_the_ratio_their_interval_is_for():
    from benchdb.results import reads

    guest, host = [610.0, 640.0, 625.0, 900.0], [1000.0, 1010.0, 990.0, 1005.0]
    base = _run("host", host)
    _run("guest", guest, baseline=base)
    [row] = reads.overhead_rows()
    answer = stats.overhead(guest, host, True)
    assert row["overhead"] == pytest.approx(answer["percent"])
    assert row["guest_mean"] == pytest.approx(stats.summarize(guest)["gmean"])
    assert row["interval"]["low"] < row["overhead"] / 100 + 1 < row["interval"]["high"]
    # Not the ratio of arithmetic means, which differs on these skewed repeats.
    arithmetic = (sum(guest) / sum(host) - 1) * 100
    assert abs(arithmetic - row["overhead"]) > 0.5
