"""A bundle from hardware seen before is stored on the same hardware row,
found by its fingerprint alone: no CPU or disk model lookups (issue 35)."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchdb.results.ingest import store_bundle
from benchdb.results.models import CpuModel, DiskModel, Hardware

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"


def _host_bundle() -> dict:
    with gzip.open(SAMPLES / "full-none.json.gz", "rt") as fh:
        bundle = json.load(fh)
    bundle.update(role="host", pair_id=None, bundle_id=str(uuid.uuid4()))
    bundle["tags"] = dict(bundle.get("tags") or {}, disk_model="Disk X1")
    return bundle


def test_it_finds_known_hardware_by_its_fingerprint_alone():
    first = store_bundle(_host_bundle())
    assert first.hardware is not None
    assert first.hardware.cpu_model is not None
    assert first.hardware.disk_model.name == "Disk X1"

    with CaptureQueriesContext(connection) as queries:
        second = store_bundle(_host_bundle())
    assert second.hardware_id == first.hardware_id
    sql = " ".join(q["sql"] for q in queries)
    assert "results_cpumodel" not in sql
    assert "results_diskmodel" not in sql
    assert (Hardware.objects.count(), CpuModel.objects.count()) == (1, 1)
    assert DiskModel.objects.count() == 1
