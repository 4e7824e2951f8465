"""A worker killed in the middle of storing a run leaves nothing half-written.

A dedicated worker (its own queue, so the session's worker stays out of it)
is caught inside ``store_bundle``: the test holds an uncommitted insert of
the CPU model name the bundle will need, so the worker's insert waits on the
unique index after the Run row is written.  The worker is then killed with
SIGKILL, PostgreSQL rolls its transaction back, and a fresh worker running
the message again (what late acknowledgement does) stores the run once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.db import connection

from benchdb import embedded
from benchdb.results.models import Result, Run, Submission
from benchdb.results.tasks import ingest
from tests.api.factories import make_bundle
from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

QUEUE = "crash-test"


def start_worker(log_path):
    env = dict(os.environ)
    env["DATABASE_URL"] = embedded.database_url(connection.settings_dict)
    handle = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "benchdb",
            "worker",
            "--pool=solo",
            "-Q",
            QUEUE,
            "--loglevel=INFO",
            f"--hostname=crash-{uuid.uuid4().hex[:8]}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    wait_for(
        lambda: "ready" in log_path.read_text() or proc.poll() is not None,
        timeout=60,
        what="the crash-test worker to start",
    )
    assert proc.poll() is None, log_path.read_text()[-2000:]
    return proc, handle


def waiting_on_lock(conn) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND query ILIKE '%%results_cpumodel%%'"
    ).fetchone()
    return row[0] > 0


def test_a_killed_worker_leaves_no_run_and_the_rerun_stores_one(fio, tmp_path):
    bundle = make_bundle(fio)
    bundle["environment"]["cpu"]["model"] = f"Crash CPU {uuid.uuid4().hex[:6]}"
    sub = Submission.objects.create(bundle_id=bundle["bundle_id"], bundle=bundle)
    dsn = embedded.database_url(connection.settings_dict)

    with (
        psycopg.connect(dsn) as blocker,
        psycopg.connect(dsn, autocommit=True) as probe,
    ):
        blocker.execute(
            "INSERT INTO results_cpumodel (name) VALUES (%s)",
            [bundle["environment"]["cpu"]["model"]],
        )
        proc, handle = start_worker(tmp_path / "crash-worker.log")
        try:
            ingest.apply_async(args=[sub.pk], queue=QUEUE)
            wait_for(
                lambda: waiting_on_lock(probe),
                timeout=30,
                what="the worker to block inside store_bundle",
            )
            # Mid-task: the Run row exists in the worker's open transaction.
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
            handle.close()
        blocker.rollback()

    sub.refresh_from_db()
    assert sub.status == Submission.Status.PROCESSING
    assert sub.attempts == 1
    wait_for(
        lambda: (
            not Run.objects.filter(uuid=bundle["bundle_id"]).exists()
            and not Result.objects.filter(run__uuid=bundle["bundle_id"]).exists()
        ),
        timeout=10,
        what="the killed worker's transaction to be rolled back",
    )

    proc, handle = start_worker(tmp_path / "rerun-worker.log")
    try:
        ingest.apply_async(args=[sub.pk], queue=QUEUE)
        wait_for(
            lambda: Submission.objects.get(pk=sub.pk).status == "done",
            timeout=30,
            what="the re-run to finish",
        )
    finally:
        proc.terminate()
        proc.wait(20)
        handle.close()
    sub.refresh_from_db()
    assert sub.attempts == 2
    assert Run.objects.filter(uuid=bundle["bundle_id"]).count() == 1
    assert sub.run.results.count() == 1
