"""Shared fixtures: a real Celery worker process on the test database.

The worker is a separate process (``celery -A benchdb worker``) consuming from
the same broker as the test process (Redis in CI, kombu's filesystem transport
on the embedded defaults), connected to pytest-django's test database.  Tests
that use it must commit their data (``transaction=True``), since the worker
cannot see a test's open transaction.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from benchdb import embedded

ROOT = Path(__file__).resolve().parent.parent


def wait_for(
    predicate,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "",
    log: Path | None = None,
):
    """Poll ``predicate`` until it returns a truthy value or time runs out;
    the failure names what it waited for and, given the ``log`` of the
    process it waited on, that log's last lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    message = f"timed out after {timeout}s waiting for {what or predicate}"
    if log is not None:
        message += f"\n--- last lines of {log} ---\n{log_tail(log)}"
    raise AssertionError(message)


def log_tail(log: Path, lines: int = 40) -> str:
    try:
        text = Path(log).read_text(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """Start one real worker for the session; yields its Popen."""
    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    env["DATABASE_URL"] = embedded.database_url(connection.settings_dict)
    if settings.CELERY_BROKER_URL == "filesystem://":
        # Start from an empty queue: messages of an earlier run name rows that
        # no longer exist.
        folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    else:
        from benchdb.celery import app

        app.control.purge()
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    handle = log.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "benchdb",
            "worker",
            "--pool=solo",
            # Ingest's queue and the summary refresh's (settings.CELERY_TASK_ROUTES)
            "--queues=celery,refresh",
            "--loglevel=INFO",
            f"--hostname=test-{uuid.uuid4().hex[:8]}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: "ready" in log.read_text() or proc.poll() is not None,
            timeout=60,
            what="the Celery worker to start",
        )
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited: {log.read_text()[-2000:]}")
        proc.log_path = log
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        handle.close()


@pytest.fixture(autouse=True)
def _data_version_per_statement(request):
    """Inside a test's transaction (never committed) the data version's
    trigger fires at the end of each statement instead of at COMMIT, so a
    test sees what a reader would see after each write committed
    (benchdb/results/answer_cache.py, migration 0010).  Tests with
    ``transaction=True`` commit, and need nothing."""
    marker = request.node.get_closest_marker("django_db")
    transactional = marker is not None and (
        marker.kwargs.get("transaction") or (marker.args and marker.args[0])
    )
    uses_db = marker is not None or "db" in request.fixturenames
    if uses_db and not transactional and "transactional_db" not in request.fixturenames:
        request.getfixturevalue("db")
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SET CONSTRAINTS results_run_data_version, "
                "results_result_data_version IMMEDIATE"
            )
            # The session's real worker commits the answers its refreshes
            # store (after the ingests of earlier tests), outside any test's
            # transaction: each test starts with none stored, as a fresh
            # deployment does, or an earlier test's answer would be served
            # (stale, as designed) over this test's data.
            cursor.execute("DELETE FROM results_answersummary")
    yield
