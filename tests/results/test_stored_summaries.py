"""Stored summaries carry log-scale statistics; migration 0003, which once
recomputed older ones with the code of its time, imports no live code: it
does nothing on a database without results (every fresh one) and stops,
naming the release to migrate with, on one that still holds results from
before it."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.management import call_command

from benchdb.results import stats
from benchdb.results.models import Result

pytestmark = pytest.mark.django_db

migration = importlib.import_module("benchdb.results.migrations.0003_stats_log_scale")


def test_migration_0003_does_nothing_without_results_and_stops_with_them():
    assert not Result.objects.exists()
    migration.recompute(apps, None)
    call_command("load_reference")
    with pytest.raises(RuntimeError, match=migration.RELEASE):
        migration.recompute(apps, None)


def test_no_stored_summary_has_an_interval_below_zero_or_on_two_repeats():
    call_command("load_reference")
    res = Result.objects.get(run__cache_mode="unsafe", test_id__startswith="dd-")
    fresh = res.stats["directions"]["write"]["bw_bytes"]
    assert 0 < fresh["ci95_low"] < fresh["gmean"] < fresh["ci95_high"]
    assert res.stats["main_direction"] == "write"
    for r in Result.objects.all():
        for metrics in r.stats["directions"].values():
            for metric, s in metrics.items():
                if stats.is_percentile(metric):
                    assert s["mean"] is None and s["min"] == min(s["values"])
                if s["ci95_low"] is not None:
                    assert s["ci95_low"] > 0 and s["n"] >= stats.MIN_REPEATS
                else:
                    assert s["n"] < stats.MIN_REPEATS or s["note"]
