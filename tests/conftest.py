"""Shared fixtures: a real Celery worker process on the test database, the
agent as people download it, and bounded waits that say what they waited for.

The worker is a separate process (``celery -A benchdb worker``) consuming from
the same broker as the test process (Redis in CI, kombu's filesystem transport
on the embedded defaults), connected to pytest-django's test database.  Tests
that use it must commit their data (``transaction=True``), since the worker
cannot see a test's open transaction.

The ``agent`` fixture runs the agent's command line two ways: from this
checkout (``python -m benchdb_agent``) and from ``benchdb-agent.pyz`` exactly
as the server serves it (``served_pyz``), so what people download is tested.

Every wait on a process is bounded and, when it runs out, fails with what it
waited for and the last lines of that process's log (``wait_for``,
``finish``): on a busy machine a test fails with a diagnosis, never hangs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from benchdb import embedded

# One definition of each wait, shared with tests/guests/harness.py (a command
# too); imported from here by the tests that wait.
from tests.waits import log_tail, wait_for  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


# --- the agent as people download it -----------------------------------------


@pytest.fixture(scope="session")
def served_pyz(tmp_path_factory) -> Path:
    """``benchdb-agent.pyz`` exactly as the server answers
    ``/agent/benchdb-agent.pyz`` (the view that URL resolves to, called)."""
    from django.test import RequestFactory
    from django.urls import resolve

    path = "/agent/benchdb-agent.pyz"
    response = resolve(path).func(RequestFactory().get(path))
    assert response.status_code == 200, response
    target = tmp_path_factory.mktemp("served") / "benchdb-agent.pyz"
    target.write_bytes(response.content)
    return target


class AgentCommand:
    """The agent's command line, run one way: ``argv`` is its start."""

    def __init__(self, kind: str, argv: list):
        self.kind = kind
        self.argv = argv

    def __call__(self, *args, timeout: float = 120, stdin=None, **kw):
        """Run the agent to the end (bounded); a CompletedProcess, as text."""
        return subprocess.run(
            [*self.argv, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            **kw,
        )


@pytest.fixture(scope="session", params=["source", "pyz"])
def agent(request) -> AgentCommand:
    """The agent's command line from this checkout, then from the served .pyz.

    The .pyz runs without site-packages (``-S``, the agent needs the standard
    library only): this checkout's agent is installed in the test environment,
    and would otherwise stand in for any module the .pyz lacked."""
    if request.param == "source":
        return AgentCommand("source", [sys.executable, "-m", "benchdb_agent"])
    pyz = request.getfixturevalue("served_pyz")
    return AgentCommand("pyz", [sys.executable, "-S", str(pyz)])


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
            timeout=120,
            what="the Celery worker to start",
            logs=[log],
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


def retrying_a_deadlock(flush, attempts: int = 5, pause: float = 0.5):
    """``flush`` run again when PostgreSQL aborted it as a deadlock's victim."""
    import time

    import psycopg
    from django.db import OperationalError

    def run(*args):
        for attempt in range(attempts):
            try:
                return flush(*args)
            except OperationalError as exc:
                deadlock = isinstance(exc.__cause__, psycopg.errors.DeadlockDetected)
                if not deadlock or attempt == attempts - 1:
                    raise
                time.sleep(pause)

    return run


@pytest.fixture(scope="session", autouse=True)
def _flush_outlives_a_deadlock():
    """A transactional test ends with a flush (one TRUNCATE of every table),
    while the session's real worker may still be running the refresh that
    test's writes queued: its transaction holds one table and asks for
    another that the TRUNCATE holds, and PostgreSQL aborts one of the two.
    When it aborts the flush (seen twice in CI, test_rank_flow's teardown),
    the flush is run again once the worker's transaction has gone (its
    ``atomic`` block rolled back, so nothing was half-done)."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.execute_sql_flush
    execute_sql_flush = retrying_a_deadlock(original)
    DatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    DatabaseOperations.execute_sql_flush = original


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
                "results_result_data_version, results_hardware_data_version, "
                "results_cpumodel_data_version, results_diskmodel_data_version "
                "IMMEDIATE"
            )
            # The session's real worker commits the answers its refreshes
            # store (after the ingests of earlier tests), outside any test's
            # transaction: each test starts with none stored, as a fresh
            # deployment does, or an earlier test's answer would be served
            # (stale, as designed) over this test's data.
            cursor.execute("DELETE FROM results_answersummary")
    yield


@pytest.fixture(autouse=True)
def _no_kept_pages():
    """Each test starts with no page kept (benchdb/web/kept.py): a kept
    page's stamp holds clock times, but two tests on an empty database
    would share it."""
    from benchdb.web import kept

    kept.clear()
    yield
