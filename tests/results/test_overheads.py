"""Every guest/host overhead carries its interval, wherever it is computed."""

from __future__ import annotations

import numpy as np
import pytest

from benchdb.results import metrics, overheads, reads, stats, summaries
from benchdb.results.models import Measurement, Result, Run

pytestmark = pytest.mark.django_db

TEST = "fio-rand-read-4k-q1t1"
GUEST = [610.0, 640.0, 625.0, 600.0]
HOST = [1000.0, 1010.0, 990.0, 1005.0]


def _run(role: str, iops: list, **fields) -> tuple[Run, Result]:
    run = Run.objects.create(suite_id="s", suite_version="1", role=role, **fields)
    res = Result.objects.create(
        run=run,
        test_id=TEST,
        tool="fio",
        comparability_key=f"k|{TEST}",
        stats={
            "main_direction": "read",
            "directions": {"read": {"iops": stats.summarize(iops)}},
            # As ingest stores them (metrics.repeat_values reads these).
            "values": {"read": {"iops": list(iops)}},
        },
        iops_mean=sum(iops) / len(iops),
    )
    Measurement.objects.bulk_create(
        Measurement(result=res, repeat=i, direction="read", iops=v)
        for i, v in enumerate(iops)
    )
    return run, res


@pytest.fixture
def pair():
    host, host_res = _run("host", HOST)
    guest, guest_res = _run("guest", GUEST, baseline=host, cache_mode="none")
    return guest, guest_res, host_res


def test_the_overhead_is_the_stats_answer(pair):
    _guest, g, h = pair
    [interval] = overheads.pair_overheads([(g.pk, h.pk, "read", "iops")])
    assert interval == stats.overhead(GUEST, HOST, higher_is_better=True)
    assert 0 < interval["low"] < interval["ratio"] < interval["high"] < 1
    assert interval["slower"] is True


def test_many_pairs_at_once_are_each_the_stats_answer(pair):
    """Every pair's overhead computed together, read from the stored values
    of the main metrics, from the measurements for a result stored without
    them, and from every stored value for another metric: each the scalar
    ``stats.overhead`` of its own values."""
    _guest, g, h = pair
    host2, h2 = _run("host", [2000.0, 2100.0, 1900.0])
    _guest2, g2 = _run("guest", [500.0, 510.0, 490.0], baseline=host2)
    # An older result: no stored values, its measurements instead.
    h2.stats.pop("values")
    Result.objects.filter(pk=h2.pk).update(stats=h2.stats)
    g.stats["values"]["read"]["runtime_s"] = [1.0, 1.1, 0.9, 1.0]
    h.stats["values"]["read"]["runtime_s"] = [2.0, 2.1, 1.9, 2.2]
    for res in (g, h):
        Result.objects.filter(pk=res.pk).update(stats=res.stats)
    pairs = [
        (g.pk, h.pk, "read", "iops"),
        (g2.pk, h2.pk, "read", "iops"),
        (g.pk, h2.pk, "read", "iops"),
        (g.pk, h.pk, "write", "iops"),  # no such direction: no figures
    ]
    assert overheads.pair_overheads(pairs) == [
        stats.overhead(GUEST, HOST, True),
        stats.overhead([500.0, 510.0, 490.0], [2000.0, 2100.0, 1900.0], True),
        stats.overhead(GUEST, [2000.0, 2100.0, 1900.0], True),
        stats.overhead([], [], True),
    ]
    [runtime] = overheads.pair_overheads([(g.pk, h.pk, "read", "runtime_s")])
    assert runtime == stats.overhead(
        [1.0, 1.1, 0.9, 1.0],
        [2.0, 2.1, 1.9, 2.2],
        metrics.higher_is_better("runtime_s"),
    )


def test_overhead_pairs_and_the_report_rows_carry_it(pair, django_assert_num_queries):
    guest, g, h = pair
    guest = Run.objects.select_related("baseline").get(pk=guest.pk)
    with django_assert_num_queries(2):
        [page] = summaries.overhead_pairs([guest])
    [row] = page["tests"]
    assert row["interval"] == stats.overhead(GUEST, HOST, True)
    assert "_pair" not in row
    [report_row] = reads.overhead_rows()
    assert report_row["interval"]["text"] == row["interval"]["text"]
    by_result = overheads.result_overheads([g], {h.comparability_key: h})
    assert by_result[g.pk]["iops"]["ratio"] == pytest.approx(row["interval"]["ratio"])


def test_the_report_summary_gives_the_median_with_its_interval():
    hosts = []
    ratios = []
    for i in range(8):
        host, _ = _run("host", [1000.0 + i, 1001.0 + i, 999.0 + i])
        guest_iops = [700.0 + 10 * i, 705.0 + 10 * i, 695.0 + 10 * i]
        _run("guest", guest_iops, baseline=host)
        hosts.append(host)
        ratios.append((sum(guest_iops) / 3) / (1000.0 + i))
    listed = Run.objects.listed()
    [row] = summaries.overhead_summary(listed.filter(role="guest"), listed)
    main = row["main"]
    assert row["pairs"] == main["n"] == 8
    assert main["median"] == pytest.approx(float(np.median(ratios)))
    low, high = stats.median_order_interval(sorted(ratios))
    assert (main["ci95_low"], main["ci95_high"]) == pytest.approx((low, high))
    assert main["ci95_low"] < main["median"] < main["ci95_high"]
