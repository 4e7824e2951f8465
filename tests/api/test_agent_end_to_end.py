"""The real agent, run on this machine, uploads to a live server; the worker
ingests; the API serves the run; a resend changes nothing.

This is issue 4's "done when": fio and dd really run (tiny sizes), the bundle
goes over HTTP with a token to ``live_server``, a separate worker process
stores it, and the numbers the API answers are those in the raw outputs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from benchdb.results.models import ApiToken, Run, Submission
from benchdb_agent import bundle as agent_bundle
from benchdb_agent import parsers
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def agent(*args, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchdb_agent", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_agent_bundle_becomes_a_run_and_a_resend_changes_nothing(
    celery_worker_process, live_server, alice, api, tmp_path
):
    _token, key = ApiToken.issue(alice, "agent")
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "bundle.json"
    done = agent(
        "run",
        "--target", str(target),
        "--profile", "quick",
        "--test", "fio-rand-read-4k-q1t1",
        "--test", "dd-write-1m-fdatasync",
        "--size", "16m",
        "--runtime", "1",
        "--tag", "cache_mode=none",
        "--out", str(out),
        "--upload", live_server.url,
        "--token", key,
        "--spool-dir", str(tmp_path / "spool"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert "sent to" in done.stderr

    def ingested():
        sub = Submission.objects.filter(bundle_id=doc["bundle_id"]).first()
        return sub if sub and sub.status in ("done", "failed") else None

    sub = wait_for(ingested, timeout=30, what="the worker to ingest the upload")
    assert sub.status == "done", sub.errors
    run = sub.run
    assert run.owner == alice and run.cache_mode == "none"

    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    tests = {t["test_id"]: t for t in detail["tests"]}
    assert set(tests) == {"fio-rand-read-4k-q1t1", "dd-write-1m-fdatasync"}
    # The server's figure is the geometric mean of what the raw outputs say.
    fio_test = next(t for t in doc["tests"] if t["test_id"] == "fio-rand-read-4k-q1t1")
    iops = [
        parsers.parse(agent_bundle.decode_raw(r["raw"]), r["raw"]["format"])["records"][
            0
        ]["iops"]
        for r in fio_test["repeats"]
    ]
    assert tests["fio-rand-read-4k-q1t1"]["iops_mean"] == pytest.approx(
        statistics.geometric_mean(iops), rel=1e-12
    )
    assert tests["dd-write-1m-fdatasync"]["main_direction"] == "write"

    resent = agent(
        "upload", str(out), "--server", live_server.url, "--token", key,
        "--spool-dir", str(tmp_path / "spool"),
    )  # fmt: skip
    assert resent.returncode == 0, resent.stderr[-3000:]
    assert f'"run": {run.pk}' in resent.stderr
    assert Submission.objects.filter(bundle_id=doc["bundle_id"]).count() == 1
    assert Run.objects.filter(uuid=doc["bundle_id"]).count() == 1

    compared = api.get(f"/api/v1/compare/?runs={run.pk}").json()
    assert {t["test_id"] for t in compared["tests"]} == set(tests)
