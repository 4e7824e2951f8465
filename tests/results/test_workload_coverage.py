"""``reports.workload_coverage`` counts what a count of each run, system
and mode one by one counts: runs per test and cache mode, systems per test,
and systems measured in every cache mode, for both questions and several
setups of a generated community (some runs hidden, private, suspect,
unpaired or without hardware; a system with two guests in one mode)."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from benchdb.results import population, reports
from benchdb.results.models import Result, Run
from tests.results.test_answer_store import generate

pytestmark = pytest.mark.django_db


def counted(question: str, setup: dict) -> dict:
    """The coverage, one run at a time in Python."""
    runs = population.filter_runs({**setup, "role": "guest"})
    if question == "cache":
        runs = runs.exclude(cache_mode="unknown")
    else:
        runs = runs.filter(baseline__in=population.population_runs())
    of_run = {r.pk: r for r in runs.only("id", "cache_mode", "hardware_id")}
    out: dict[str, dict] = {}
    systems, modes = defaultdict(set), defaultdict(set)
    for result in Result.objects.filter(run_id__in=of_run).only("run_id", "test_id"):
        run = of_run[result.run_id]
        entry = out.setdefault(
            result.test_id, {"runs": 0, "modes": {}, "systems": 0, "complete": 0}
        )
        entry["runs"] += 1
        entry["modes"][run.cache_mode] = entry["modes"].get(run.cache_mode, 0) + 1
        if run.hardware_id is not None:
            systems[result.test_id].add(run.hardware_id)
            if run.cache_mode in reports.CACHE_MODES:
                modes[result.test_id, run.hardware_id].add(run.cache_mode)
    every = set(reports.CACHE_MODES)
    for test_id, entry in out.items():
        entry["systems"] = len(systems[test_id])
        entry["complete"] = sum(
            1 for (t, _hw), seen in modes.items() if t == test_id and seen == every
        )
    return out


def test_coverage_counts_every_run_system_and_mode_once():
    generate(systems=40)
    # A second guest in one mode on a system measured in every mode: its
    # runs count twice, the system and its modes once.
    twin = Run.objects.filter(role="guest", cache_mode="none", hidden=False).first()
    results = list(twin.results.all())
    twin.pk, twin.uuid = None, uuid.uuid4()
    twin.save()
    for result in results:
        result.pk, result.run = None, twin
    Result.objects.bulk_create(results)
    found = 0
    for question in ("cache", "overhead"):
        for setup in ({}, {"storage_backend": "lvm"}, {"platform": "proxmox"}):
            expected = counted(question, setup)
            assert reports.workload_coverage(question, setup) == expected
            found += sum(e["complete"] for e in expected.values())
    assert found  # some systems were measured in every mode
