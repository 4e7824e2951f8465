"""``bench --ingest`` leaves the bench database as it found it: the runs and
submissions it made are deleted, so a later ``--reuse`` times the same runs
(``pick_context`` takes the newest guests)."""

from __future__ import annotations

import copy
import gzip
import json
import uuid
from pathlib import Path

import pytest

from bench import ingest as bench_ingest
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Measurement, Result, Run, Submission

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def store(name: str) -> Run:
    with gzip.open(BUNDLES / name, "rt") as handle:
        bundle = copy.deepcopy(json.load(handle))
    bundle["bundle_id"] = str(uuid.uuid4())
    return store_bundle(bundle)


def test_the_runs_and_submissions_made_after_the_mark_are_removed():
    kept = store("full-none.json.gz")
    Submission.objects.create(bundle_id=uuid.uuid4(), bundle={}, run=kept)
    last_run, last_submission = bench_ingest._last_ids()
    assert last_run == kept.pk
    made = store("full-writeback.json.gz")
    Submission.objects.create(bundle_id=uuid.uuid4(), bundle={}, run=made)
    assert Result.objects.filter(run=made).exists()

    bench_ingest._remove_since(last_run, last_submission)

    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
    assert list(Submission.objects.values_list("run", flat=True)) == [kept.pk]
    assert not Result.objects.filter(run_id=made.pk).exists()
    assert not Measurement.objects.filter(result__run_id=made.pk).exists()
    assert Result.objects.filter(run=kept).exists()
