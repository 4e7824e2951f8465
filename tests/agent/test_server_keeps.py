"""The server accepts and keeps what the agent now says: per-test status and
spread, buffered results under their own key, and one test per fio job."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from benchdb.api.validation import check_bundle
from benchdb.results.ingest import store_bundle

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
AGENT = [sys.executable, "-m", "benchdb_agent"]

pytestmark = pytest.mark.django_db


def accepted(doc) -> bool:
    errors = check_bundle(doc)
    assert errors == []
    return True


def test_one_test_per_fio_job_is_stored_with_its_own_records(tmp_path):
    out = tmp_path / "jobs.json"
    proc = subprocess.run(
        [*AGENT, "import", str(SAMPLES / "fio" / "two-jobs-3.json"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert accepted(doc)
    run = store_bundle(doc)
    by_id = {r.test_id: r for r in run.results.all()}
    assert set(by_id) == {"fio-seq-read-1m-q1t1", "fio-rand-write-4k-q1t1"}
    jobs = set(by_id["fio-seq-read-1m-q1t1"].measurements.values_list("job", flat=True))
    assert jobs == {"seqread"}
    directions = set(
        by_id["fio-rand-write-4k-q1t1"].measurements.values_list("direction", flat=True)
    )
    assert directions == {"write"}


def test_buffered_results_keep_their_mark_and_key(tmp_path):
    target = Path("/dev/shm") / f"benchdb-test-{uuid.uuid4().hex}"
    target.mkdir()
    out = tmp_path / "buffered.json"
    try:
        proc = subprocess.run(
            [
                *AGENT, "run", "--target", str(target), "--size", "8M",
                "--runtime", "1", "--repeats", "2", "--max-repeats", "2",
                "--test", "fio-rand-read-4k-q1t1", "--allow-buffered",
                "--out", str(out),
            ],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        target.rmdir()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert accepted(doc)
    run = store_bundle(doc)
    (result,) = run.results.all()
    assert result.comparability_key.endswith("|buffered")
    assert result.options["direct"] == "0"
    assert result.stats["buffered"] is True and result.stats["status"] == "complete"
    assert result.stats["cv"] == doc["tests"][0]["cv"]
    assert {"ram-backed-target", "buffered-io"} <= {w["code"] for w in run.warnings}
