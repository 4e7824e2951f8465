"""``Result.main_values``: what a comparison reads of a result, written from
its statistics by a trigger (migration 0013) on every insert and update, in
every way rows reach the table."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection, transaction

from benchdb.results import compare, metrics, stats
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Result, Run
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

TEST = "fio-rand-read-4k-q1t1"


def expected(stats_doc: dict) -> list:
    """The stats' main direction and the compared metrics' values in it."""
    direction = stats_doc.get("main_direction")
    values = stats_doc.get("values")
    if not isinstance(values, dict):
        return [direction, None]
    in_direction = values.get(direction) or {}
    return [direction, [in_direction.get(m) for m in metrics.MAIN_METRICS]]


def test_the_trigger_cuts_the_metrics_a_comparison_reads():
    migration = importlib.import_module(
        "benchdb.results.migrations.0013_result_main_values"
    )
    assert migration.METRICS == tuple(metrics.MAIN_METRICS)


def test_ingested_results_carry_their_main_values(fio):
    tests = (TEST, "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync")
    store_bundle(make_bundle(fio, tests=tests))
    store_bundle(make_bundle(fio, role="host", speed="slow"))
    results = list(Result.objects.all())
    assert len(results) == 4
    for res in results:
        assert res.main_values == expected(res.stats), res.test_id
        assert res.main_values[1] is not None
    dd = next(r for r in results if r.test_id.startswith("dd-"))
    # dd measures no IOPS and no latency percentile: null, never invented.
    assert dd.main_values[0] == "write"
    assert dd.main_values[1][0] is None and dd.main_values[1][1]


def _result(stats_doc: dict) -> Result:
    run = Run.objects.create(suite_id="s", suite_version="1", role="guest")
    return Result.objects.create(
        run=run, test_id=TEST, tool="fio", comparability_key="k", stats=stats_doc
    )


def test_updates_and_results_without_values_are_cut_again():
    iops = [10.0, 12.0, 11.0]
    doc = {
        "main_direction": "read",
        "directions": {"read": {"iops": stats.summarize(iops)}},
    }
    res = _result(doc)
    res.refresh_from_db()
    assert res.main_values == ["read", None]
    # Values added later (an update through the ORM, any column list).
    res.stats = {**doc, "values": {"read": {"iops": iops}, "write": {"iops": [1]}}}
    res.save()
    res.refresh_from_db()
    assert res.main_values == ["read", [iops, None, None, None]]
    # Whatever a writer puts in the column itself is replaced.
    Result.objects.filter(pk=res.pk).update(main_values=["write", [[1.0]]])
    res.refresh_from_db()
    assert res.main_values == ["read", [iops, None, None, None]]
    # Not even an object of statistics.
    Result.objects.filter(pk=res.pk).update(stats=[])
    res.refresh_from_db()
    assert res.main_values == [None, None]


def test_an_update_of_other_columns_leaves_them_alone():
    """Only an update naming ``stats`` or ``main_values`` cuts them again
    (migration 0015): seen on a row whose column was left stale on purpose."""
    iops = [10.0, 12.0, 11.0]
    doc = {"main_direction": "read", "values": {"read": {"iops": iops}}}
    res = _result(doc)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending events
        cursor.execute(
            "ALTER TABLE results_result DISABLE TRIGGER results_result_main_values"
        )
        cursor.execute(
            "UPDATE results_result SET main_values = '[\"stale\", null]'::jsonb "
            "WHERE id = %s",
            [res.pk],
        )
        cursor.execute(
            "ALTER TABLE results_result "
            "ENABLE ALWAYS TRIGGER results_result_main_values"
        )
    Result.objects.filter(pk=res.pk).update(overhead={"baseline": 1}, iops_mean=11)
    res.refresh_from_db()
    assert res.main_values == ["stale", None]
    res.save()  # every column, stats among them
    res.refresh_from_db()
    assert res.main_values == ["read", [iops, None, None, None]]


def test_a_bulk_load_with_triggers_off_still_writes_them(fio):
    """``session_replication_role = replica`` (a restore, bench/data.py)
    turns ordinary triggers off; this one is ENABLE ALWAYS."""
    run = store_bundle(make_bundle(fio))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(
            "UPDATE results_result SET main_values = NULL WHERE run_id = %s", [run.pk]
        )
    [res] = Result.objects.filter(run=run)
    assert res.main_values == expected(res.stats)


def test_a_comparison_reads_the_values_ingest_stored(fio):
    """The comparison's figures are those of the statistics' own values,
    and the fallback to the measurements stays for results stored without
    them."""
    a = store_bundle(make_bundle(fio))
    b = store_bundle(make_bundle(fio, speed="slow"))
    data = compare.build_comparison([a, b])
    [test] = data["tests"]
    iops = next(m for m in test["metrics"] if m["metric"] == "iops")
    for entry in iops["runs"]:
        res = Result.objects.get(run_id=entry["run"], test_id=TEST)
        assert entry["values"] == res.stats["values"][res.main_values[0]]["iops"]
    # Without stored values: the same figures, from the measurements.
    for res in Result.objects.filter(run__in=[a, b]):
        doc = dict(res.stats)
        doc.pop("values")
        Result.objects.filter(pk=res.pk).update(stats=doc)
    again = compare.build_comparison([a, b])
    assert again == data
