"""Helpers for the deployment tests: production environments for subprocesses.

The containers' commands are run here as plain subprocesses (no Docker engine
on the development machines), with the variables a production ``.env`` sets,
against the test database and the test session's broker.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from benchdb import embedded

ROOT = Path(__file__).resolve().parent.parent.parent
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
# Names the check only parses; nothing connects to them.
UNUSED_REDIS = "redis://127.0.0.1:6379/15"

# Variables of the developer's or CI's shell that would change the outcome.
_PRODUCTION_KEYS = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "SECURE_SSL_REDIRECT",
    "TRUST_X_FORWARDED_PROTO",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "STATIC_MANIFEST",
    "STATIC_ROOT",
    "WHITENOISE_USE_FINDERS",
    "LOG_FORMAT",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def production_env(database_url: str, **overrides: str) -> dict[str, str]:
    """The environment a production container gets from docker/.env."""
    env = {k: v for k, v in os.environ.items() if k not in _PRODUCTION_KEYS}
    venv_bin = str(Path(os.sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="example.org",
        CSRF_TRUSTED_ORIGINS="https://example.org",
        SITE_URL="https://example.org",
        SECURE_SSL_REDIRECT="true",
        TRUST_X_FORWARDED_PROTO="true",
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=UNUSED_REDIS,
    )
    env.update(overrides)
    return env


def with_test_broker(env: dict[str, str]) -> dict[str, str]:
    """Point ``env`` at the broker this test session uses (Redis or a folder)."""
    from django.conf import settings

    env = dict(env)
    if settings.CELERY_BROKER_URL == "filesystem://":
        queue = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        env.pop("CELERY_BROKER_URL", None)
        env["BENCHDB_BROKER_DIR"] = str(queue.parent)
    else:
        env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    return env


@pytest.fixture
def test_database_url(django_db_setup, django_db_blocker) -> str:
    """A DATABASE_URL for pytest-django's (migrated) test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        connection.ensure_connection()
    return embedded.database_url(connection.settings_dict)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def request(
    url: str,
    body: bytes | None = None,
    headers: dict | None = None,
    host: str = "example.org",
    https: bool = True,
    timeout: float = 30,
):
    """(status, headers, body) of one request to the production settings'
    host, without following redirects; error statuses are answers too."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    sent = {"Host": host, **({"X-Forwarded-Proto": "https"} if https else {})}
    req = urllib.request.Request(url, data=body, headers={**sent, **(headers or {})})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def answers(url: str) -> int | None:
    """The status of ``url``, or None while nothing answers in time (a
    server still starting on busy cores)."""
    try:
        return request(url, timeout=10)[0]
    except OSError:
        return None


@contextlib.contextmanager
def running_web(env: dict[str, str], log: Path):
    """``entrypoint.sh web`` (gunicorn, as the web container runs it) on a
    free port; yields its base URL once /health/ answers 200."""
    from tests.conftest import wait_for

    port = free_port()
    env = dict(env, GUNICORN_BIND=f"127.0.0.1:{port}")
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            ["sh", str(ENTRYPOINT), "web"],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(
                lambda: proc.poll() is not None or "Booting worker" in log.read_text(),
                timeout=60,
                what="gunicorn to start",
            )
            assert proc.poll() is None, log.read_text()[-3000:]
            wait_for(
                lambda: answers(base + "/health/") == 200,
                timeout=120,
                what="/health/ to answer 200",
            )
            yield base
        finally:
            stop(proc)
