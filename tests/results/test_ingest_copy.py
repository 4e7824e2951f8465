"""Measurements and raw outputs go to PostgreSQL by a binary COPY
(``ingest._copy_rows``): each value is stored as the text COPY stored it,
the edges included (an integer in a float column, one past 2**53, NULL, a
job name with tabs, newlines and backslashes, gzip bytes with zero bytes and
backslashes) (issue 35)."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path

import pytest

from benchdb.results.ingest import _copy_rows, store_bundle
from benchdb.results.models import METRIC_FIELDS, Measurement, RawOutput

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"

EDGES = [1234, 2**53 + 1, 0.1, 1e300, None, 0, 7.5e-9, 10**17 + 3, 3.0, 2.5, 1, 2]
JOB = "a\tjob\nwith \\ and \\N"
DATA = gzip.compress(b"\x00\\x\\\\\t\n\r" + bytes(range(256)))


def _result():
    with gzip.open(SAMPLES / "full-none.json.gz", "rt") as fh:
        bundle = json.load(fh)
    bundle.update(pair_id=None, bundle_id=str(uuid.uuid4()))
    return store_bundle(bundle).results.first()


@pytest.mark.parametrize("binary", [True, False])
def test_a_binary_copy_stores_what_a_text_copy_stores(binary):
    result = _result()
    assert len(EDGES) == len(METRIC_FIELDS)
    _copy_rows(
        Measurement,
        ["result_id", "repeat", "job", "direction", *METRIC_FIELDS],
        [(result.pk, 99, JOB, "read", *EDGES)],
        binary=binary,
    )
    _copy_rows(
        RawOutput,
        ["result_id", "repeat", "format", "data_gzip", "sha256"],
        [(result.pk, 99, "fio-json", DATA, "0" * 64)],
        binary=binary,
    )
    stored = Measurement.objects.get(result=result, repeat=99)
    assert stored.job == JOB
    assert [getattr(stored, f) for f in METRIC_FIELDS] == [
        None if v is None else float(v) for v in EDGES
    ]
    raw = RawOutput.objects.get(result=result, repeat=99)
    assert bytes(raw.data_gzip) == DATA
