"""Stored summaries are recomputed with the log-scale statistics (0003)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.management import call_command

from benchdb.results import stats
from benchdb.results.models import Result

pytestmark = pytest.mark.django_db

migration = importlib.import_module("benchdb.results.migrations.0003_stats_log_scale")


def test_old_raw_scale_intervals_are_replaced():
    call_command("load_reference")
    res = Result.objects.get(run__cache_mode="unsafe", test_id__startswith="dd-")
    fresh = res.stats["directions"]["write"]["bw_bytes"]
    # What the old Student-t on raw values stored could go below zero.
    old = dict(fresh, ci95_low=-1616.0, ci95_high=3511.0)
    old.pop("gmean"), old.pop("note")
    res.stats["directions"]["write"]["bw_bytes"] = old
    res.save(update_fields=["stats"])
    migration.recompute(apps, None)
    res.refresh_from_db()
    again = res.stats["directions"]["write"]["bw_bytes"]
    assert again == fresh
    assert 0 < again["ci95_low"] < again["gmean"] < again["ci95_high"]
    assert res.stats["main_direction"] == "write"
    # No stored summary anywhere has an interval below zero or on n < 3.
    for r in Result.objects.all():
        for metrics in r.stats["directions"].values():
            for metric, s in metrics.items():
                if stats.is_percentile(metric):
                    assert s["mean"] is None and s["min"] == min(s["values"])
                if s["ci95_low"] is not None:
                    assert s["ci95_low"] > 0 and s["n"] >= stats.MIN_REPEATS
                else:
                    assert s["n"] < stats.MIN_REPEATS or s["note"]
