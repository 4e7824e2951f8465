"""No submission is stranded: real web, broker, beat and worker processes.

- The broker is down when the bundle arrives: a gunicorn process whose
  CELERY_BROKER_URL names a closed local port stores the row and answers 503
  with Retry-After; once a redis-server listens on that port and beat and a
  worker run, the run appears with no resend (``tasks.requeue_stale``).  A
  resend while the broker is back queues it at once (202).
- A worker is killed with SIGKILL inside the ingest: the row stays
  ``processing``; beat queues it again once it is older than
  SUBMISSION_PROCESSING_STALE_AFTER_S (a few seconds here), long before the
  broker's visibility timeout would hand the message back.

Each test has its own redis-server on a free port, so the session's broker
and worker are not involved.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack

import psycopg
import pytest
from django.db import connection

from benchdb import embedded
from benchdb.results.models import Run, Submission
from tests.api.factories import make_bundle
from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Subprocesses of one test, each with its log; all stopped at the end."""

    def __init__(self, tmp_path, broker_port: int):
        self.tmp_path = tmp_path
        self.port = broker_port
        self.procs: list[tuple[subprocess.Popen, object]] = []
        self.env = dict(os.environ)
        self.env.update(
            DATABASE_URL=embedded.database_url(connection.settings_dict),
            CELERY_BROKER_URL=f"redis://127.0.0.1:{broker_port}/0",
            SUBMISSION_REQUEUE_INTERVAL_S="1",
            SUBMISSION_PROCESSING_STALE_AFTER_S="3",
            SUBMISSION_RETRY_AFTER_S="7",
            CELERY_BEAT_SCHEDULE_FILENAME=str(tmp_path / "beat-schedule"),
            DEBUG="false",
        )

    def start(self, name: str, argv: list[str], ready: str | None = None):
        log = self.tmp_path / f"{name}.log"
        handle = log.open("w")
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=handle, stderr=subprocess.STDOUT
        )
        proc.log_path = log
        self.procs.append((proc, handle))
        if ready is not None:
            wait_for(
                lambda: ready in log.read_text() or proc.poll() is not None,
                timeout=60,
                what=f"{name} to start",
            )
            assert proc.poll() is None, log.read_text()[-3000:]
        return proc

    def web(self) -> str:
        port = free_port()
        self.start(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "benchdb.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
            ],
            ready="Booting worker",
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _up(url), timeout=30, what="gunicorn to answer")
        return url

    def broker(self):
        proc = self.start(
            "redis",
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            ready="Ready to accept connections",
        )
        return proc

    def worker(self, name: str = "worker"):
        return self.start(
            name,
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "benchdb",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                f"--hostname={name}-{uuid.uuid4().hex[:8]}@%h",
            ],
            ready="ready",
        )

    def beat(self):
        return self.start(
            "beat",
            [sys.executable, "-m", "celery", "-A", "benchdb", "beat", "-l", "INFO"],
            ready="beat: Starting",
        )

    def stop(self):
        for proc, handle in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            handle.close()


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/v1/vocabularies/", timeout=5):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def post(url: str, bundle: dict) -> tuple[int, dict, dict]:
    request = urllib.request.Request(
        url + "/api/v1/submissions/",
        data=json.dumps(bundle).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.load(exc)


@pytest.fixture
def processes(tmp_path):
    stack = ExitStack()
    procs = Processes(tmp_path, free_port())
    stack.callback(procs.stop)
    with stack:
        yield procs


def test_a_bundle_posted_while_the_broker_is_down_is_ingested_once_it_is_back(
    processes, fio
):
    url = processes.web()  # the broker port is closed: nothing listens there
    bundle = make_bundle(fio)

    status, headers, body = post(url, bundle)

    assert status == 503, body
    assert headers["Retry-After"] == "7"
    assert body["errors"][0]["code"] == "queue_unavailable"
    assert body["id"] == bundle["bundle_id"]
    assert body["status"] == "queued" and body["queued_at"] is None
    assert "broker unreachable" in body["last_error"]
    assert body["owner_key"].startswith("bdo_")  # anonymous: the key, once
    sub = Submission.objects.get(bundle_id=bundle["bundle_id"])
    assert sub.enqueued is None and sub.status == "queued"
    # A resend while the broker is still down: the same row, 503 again.
    status, _headers, again = post(url, bundle)
    assert status == 503 and again["id"] == bundle["bundle_id"]
    # The very same bundle: its key again, in case the first answer was lost.
    assert again["owner_key"] == body["owner_key"]
    assert Submission.objects.count() == 1

    processes.broker()
    processes.beat()
    processes.worker()

    # No resend: beat's requeue_stale queues it, the worker stores the run.
    run = wait_for(
        lambda: Run.objects.filter(uuid=bundle["bundle_id"]).first(),
        timeout=60,
        what="the run to appear without a resend",
    )
    sub.refresh_from_db()
    assert sub.status == "done" and sub.run == run
    assert sub.attempts == 1
    assert sub.enqueued is not None


def test_a_resend_after_the_broker_is_back_queues_the_stored_bundle(processes, fio):
    url = processes.web()
    bundle = make_bundle(fio)
    assert post(url, bundle)[0] == 503

    processes.broker()
    processes.worker()  # no beat: only the resend can queue it
    status, headers, body = post(url, bundle)

    assert status == 202, body
    assert headers["Location"] == body["status_url"]
    assert body["queued_at"] is not None
    wait_for(
        lambda: Run.objects.filter(uuid=bundle["bundle_id"]).exists(),
        timeout=60,
        what="the resent bundle's run",
    )
    assert Submission.objects.get(bundle_id=bundle["bundle_id"]).status == "done"


def waiting_on_lock(conn) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND query ILIKE '%%results_cpumodel%%'"
    ).fetchone()
    return row[0] > 0


def test_a_worker_killed_mid_ingest_is_replaced_within_the_requeue_period(
    processes, fio
):
    bundle = make_bundle(fio)
    bundle["environment"]["cpu"]["model"] = f"Stale CPU {uuid.uuid4().hex[:6]}"
    # Stored as the upload stores it, its message not yet sent: beat sends it.
    sub = Submission.objects.create(bundle_id=bundle["bundle_id"], bundle=bundle)
    dsn = embedded.database_url(connection.settings_dict)
    processes.broker()

    with (
        psycopg.connect(dsn) as blocker,
        psycopg.connect(dsn, autocommit=True) as probe,
    ):
        # Hold the CPU model's name, so the worker blocks inside store_bundle.
        blocker.execute(
            "INSERT INTO results_cpumodel (name) VALUES (%s)",
            [bundle["environment"]["cpu"]["model"]],
        )
        first = processes.worker("doomed")
        processes.beat()
        wait_for(
            lambda: waiting_on_lock(probe),
            timeout=60,
            what="the worker to block inside the ingest",
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        blocker.rollback()

    sub.refresh_from_db()
    assert sub.status == "processing" and sub.attempts == 1
    assert not Run.objects.filter(uuid=bundle["bundle_id"]).exists()

    processes.worker("second")
    # Stale after 3 s, checked every second: far sooner than the broker's
    # visibility timeout (10 minutes) would give the message back.
    wait_for(
        lambda: Submission.objects.get(pk=sub.pk).status == "done",
        timeout=60,
        what="the stale submission to be queued again and stored",
    )
    sub.refresh_from_db()
    assert sub.attempts == 2
    assert "worker was lost" in sub.last_error
    assert Run.objects.filter(uuid=bundle["bundle_id"]).count() == 1


def test_the_agent_keeps_the_owner_key_of_a_503_and_claims_its_run_with_it(
    processes, fio, tmp_path
):
    """benchdb-agent upload against the real server with its broker down: the
    503 shows the owner key once; the agent's inline resends (503 again,
    without the key) and the spooled resend (202) do not lose it."""
    url = processes.web()
    bundle = make_bundle(fio)
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    spool = tmp_path / "spool"
    env = dict(processes.env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "agent"), str(ROOT)])
    agent = [sys.executable, "-m", "benchdb_agent", "upload", "--spool-dir", str(spool)]

    proc = subprocess.run(
        [*agent, str(path), "--server", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 5, proc.stderr  # spooled
    kept = json.loads(
        (spool / "owner-keys" / f"{bundle['bundle_id']}.json").read_text()
    )
    key = kept["servers"][url]["owner_key"]
    assert key.startswith("bdo_") and f"run later: {key}" in proc.stderr
    sub = Submission.objects.get(bundle_id=bundle["bundle_id"])
    assert sub.owner_key_hash and sub.attempts == 0

    processes.broker()
    processes.worker()
    proc = subprocess.run(
        [*agent, "--pending"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert key in proc.stderr  # the same key, kept and answered again
    assert "ingested:" in proc.stderr
    run = Run.objects.get(uuid=bundle["bundle_id"])
    assert run.check_owner_key(key)
