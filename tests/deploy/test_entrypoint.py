"""The containers' commands (docker/entrypoint.sh), run without Docker.

migrate on an empty database, gunicorn serving pages with the production
settings (collected static files, https redirect, security headers, JSON
logs), and a worker consuming a task: the same script and arguments
docker/compose.yml uses, as subprocesses on this machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

import psycopg
import pytest

from benchdb.results.tasks import ping
from tests.conftest import wait_for
from tests.deploy.conftest import (
    ENTRYPOINT,
    ROOT,
    free_port,
    production_env,
    running_web,
    stop,
    with_test_broker,
)
from tests.deploy.conftest import request as get

# pytest-django creates the test database only for a session whose tests ask
# for it; the subprocesses here use that database.
pytestmark = pytest.mark.django_db


@pytest.fixture
def empty_database(test_database_url):
    """A new, empty database on the test server; dropped afterwards."""
    name = f"benchdb_deploy_{uuid.uuid4().hex[:8]}"
    admin_url = test_database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield test_database_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migrate_checks_and_migrates_an_empty_database(empty_database):
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "migrate"],
        env=production_env(empty_database),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    with psycopg.connect(empty_database) as conn:
        applied = conn.execute(
            "SELECT count(*) FROM django_migrations WHERE app = 'results'"
        ).fetchone()[0]
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
    assert applied >= 1
    assert "django_migrations" in tables and "auth_user" in tables


def test_migrate_refuses_an_insecure_configuration(empty_database):
    env = production_env(empty_database, DEBUG="true")
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "benchdb.E003" in result.stderr
    with psycopg.connect(empty_database) as conn:
        exists = conn.execute("SELECT to_regclass('django_migrations')").fetchone()
    assert exists[0] is None  # refused before migrating anything


@pytest.fixture
def gunicorn(test_database_url, tmp_path):
    """The web container: collectstatic as at build, then `entrypoint.sh web`."""
    static_root = tmp_path / "staticfiles"
    env = production_env(
        test_database_url,
        STATIC_MANIFEST="true",
        STATIC_ROOT=str(static_root),
        LOG_FORMAT="json",
        WEB_CONCURRENCY="1",
    )
    env = with_test_broker(env)
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stderr
    assert (static_root / "staticfiles.json").exists()
    log = tmp_path / "gunicorn.log"
    with running_web(env, log) as base:
        yield base, env, log


def test_gunicorn_serves_health_and_pages(gunicorn):
    base, env, log = gunicorn
    status, _, body = get(base + "/health/", https=False)  # exempt from redirect
    assert status == 200
    assert json.loads(body) == {
        "status": "ok",
        "checks": {"database": "ok", "broker": "ok"},
    }
    # The container health check (docker/compose.yml) says healthy.
    probe = subprocess.run(
        [sys.executable, "-m", "benchdb.ops.probe", base + "/health/"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.returncode == 0, probe.stderr

    status, headers, body = get(base + "/")
    assert status == 200, log.read_text()[-3000:]
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    # Static files: hashed names from the manifest, served by WhiteNoise.
    css = re.search(rb'href="(/static/css/benchdb\.[0-9a-f]{12}\.css)"', body)
    assert css, body[:2000]
    status, headers, _ = get(base + css.group(1).decode())
    assert status == 200
    assert "max-age=315360000" in headers["Cache-Control"]


def test_gunicorn_redirects_http_and_refuses_unknown_hosts(gunicorn):
    base, env, log = gunicorn
    status, headers, _ = get(base + "/", https=False)
    assert status == 301
    assert headers["Location"] == "https://example.org/"
    status, _, _ = get(base + "/", host="attacker.example")
    assert status == 400
    # Structured logs: the refusal is one JSON object on one line.
    records = wait_for(
        lambda: [
            json.loads(line)
            for line in log.read_text().splitlines()
            if line.startswith("{") and "DisallowedHost" in line
        ],
        timeout=10,
        what="the DisallowedHost log record",
    )
    assert records[0]["level"] == "ERROR"
    assert "attacker.example" in records[0]["message"]


def test_the_probe_reports_an_unhealthy_server(tmp_path):
    port = free_port()  # nothing listens there
    probe = subprocess.run(
        [sys.executable, "-m", "benchdb.ops.probe", f"http://127.0.0.1:{port}/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.returncode == 1
    assert "unhealthy" in probe.stderr


def test_worker_consumes_a_task(test_database_url, tmp_path):
    queue = f"deploy-{uuid.uuid4().hex[:8]}"  # not the session worker's queue
    env = with_test_broker(production_env(test_database_url))
    log = tmp_path / "worker.log"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            ["sh", str(ENTRYPOINT), "worker", "--pool=solo", "--queues", queue],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(
                lambda: proc.poll() is not None or "ready" in log.read_text(),
                timeout=60,
                what="the worker to start",
            )
            assert proc.poll() is None, log.read_text()[-3000:]
            marker = tmp_path / "pong"
            ping.apply_async(args=[str(marker)], queue=queue)
            pid = wait_for(
                lambda: marker.exists() and marker.read_text(),
                timeout=30,
                what="the worker to run the task",
            )
            # entrypoint.sh execs celery: the task ran in the process we started.
            assert int(pid) == proc.pid
            assert "worker@" in log.read_text()
        finally:
            stop(proc)
