"""The set-based report answers agree with a count made by hand."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from benchdb.results import reads, summaries
from benchdb.results.filters import RunFilterSet
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q1t1"


@pytest.fixture
def sweep(fio):
    """Three guests that differ only in cache mode, paired with one host."""
    host = store_bundle(make_bundle(fio, role="host", pair_id="p1", speed="slow"))
    guests = {
        mode: store_bundle(
            make_bundle(
                fio,
                pair_id="p1",
                tags={"cache_mode": mode, "platform": "proxmox"},
            )
        )
        for mode in ("none", "writeback", "unsafe")
    }
    other = store_bundle(make_bundle(fio, tags={"cache_mode": "none"}))
    for run in (host, other, *guests.values()):
        run.refresh_from_db()
    return host, guests, other


def test_facet_counts_match_a_count_per_facet(sweep):
    params = QueryDict("cache_mode=none&platform=proxmox")
    facets = {f["name"]: f for f in reads.facet_counts(params)}
    listed = Run.objects.listed()
    # The chosen facet counts as if it were not chosen (platform=proxmox only).
    cache = {o["value"]: o["n"] for o in facets["cache_mode"]["options"]}
    expected_cache: dict = {}
    without = RunFilterSet(QueryDict("platform=proxmox"), queryset=listed).qs
    for mode in without.values_list("cache_mode", flat=True):
        expected_cache[mode] = expected_cache.get(mode, 0) + 1
    assert cache == expected_cache
    assert {"none", "writeback", "unsafe"} <= set(cache)
    assert {o["value"] for o in facets["cache_mode"]["options"] if o["checked"]} == {
        "none"
    }
    for name, facet in facets.items():
        if name in params:
            continue
        path = summaries.FACET_PATHS[name]
        expected = {}
        for value in (
            RunFilterSet(params, queryset=listed)
            .qs.values_list(path, flat=True)
            .order_by()
        ):
            if value is not None:
                expected[value] = expected.get(value, 0) + 1
        assert {o["value"]: o["n"] for o in facet["options"]} == expected, name


def test_cache_mode_groups_come_from_sql_a_page_at_a_time(sweep):
    _host, guests, _other = sweep
    report = reads.cache_mode_report(None)
    assert report["group_count"] == 1
    group = report["group"]
    assert group["modes"] == ["none", "writeback", "unsafe"]
    assert [r.pk for r in group["runs"]] == [
        guests[m].pk for m in ("none", "writeback", "unsafe")
    ]
    again = summaries.cache_mode_group(Run.objects.listed(), group["key"])
    assert again["key"] == group["key"]
    other = f"{guests['none'].pk}-{sweep[2].pk}"  # same mode twice
    assert summaries.cache_mode_group(Run.objects.listed(), other) is None
    assert summaries.cache_mode_group(Run.objects.listed(), "x-1") is None
    assert reads.cache_mode_report(None, page=2)["groups"] == []


def test_overhead_summary_is_the_ratio_of_the_pairs(sweep):
    host, guests, _other = sweep
    report = reads.overhead_report()
    row = next(t for t in report["summary"] if t["test_id"] == READ)
    h = host.results.get(test_id=READ).iops_mean
    ratios = sorted(g.results.get(test_id=READ).iops_mean / h for g in guests.values())
    assert row["metric"] == "iops" and row["pairs"] == 3
    assert row["main"]["median"] == pytest.approx(ratios[1])
    assert row["main"]["q1"] == pytest.approx((ratios[0] + ratios[1]) / 2)
    assert report["page"].paginator.count == 3
    assert {r["guest"].pk for r in report["rows"]} == {g.pk for g in guests.values()}


def test_compare_reads_the_repeat_values_ingest_stored(fio):
    from benchdb.results import metrics
    from benchdb.results.models import Result

    run = store_bundle(
        make_bundle(
            fio, tests=(READ, "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync")
        )
    )
    ids = list(run.results.values_list("pk", flat=True))
    measured = metrics.measured_values(ids)
    assert set(measured) == set(ids)
    assert metrics.repeat_values(ids) == measured
    # Rows stored before the values were kept fall back to the measurements.
    Result.objects.filter(pk=ids[0]).update(stats={"main_direction": "read"})
    assert metrics.repeat_values(ids) == measured
