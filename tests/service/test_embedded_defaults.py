"""The embedded defaults boot, migrate, serve a page and run a worker.

This is what ``make run`` does on a fresh machine: no DATABASE_URL, no
CELERY_BROKER_URL.  The server runs in a subprocess with its own var/ folder,
so it starts a brand-new embedded PostgreSQL from nothing.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from benchdb.ops.management.commands.embedded import postmaster_pid
from tests.conftest import ROOT, wait_for
from tests.service.serving import ping


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except OSError:
        return None


def test_it_boots_migrates_serves_and_consumes_on_embedded_defaults(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "BENCHDB_BROKER_DIR")
    }
    env["BENCHDB_VAR_DIR"] = str(tmp_path / "var")
    env["DEBUG"] = "true"
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "serve",
            f"--addr=127.0.0.1:{port}",
            "--concurrency=1",
            "--no-reference",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        home = wait_for(
            lambda: get(f"http://127.0.0.1:{port}/"),
            timeout=120,
            interval=0.5,
            what="the home page",
        )
        assert home[0] == 200
        assert "benchdb" in home[1]
        # The embedded PostgreSQL is real and lives under the given var/.
        assert (tmp_path / "var" / "pgdata" / "PG_VERSION").exists()
        status, body = wait_for(
            lambda: get(f"http://127.0.0.1:{port}/health/"), timeout=30, what="health"
        )
        assert status == 200 and json.loads(body)["status"] == "ok"
        # A task goes through the filesystem broker to the serve command's worker.
        marker = tmp_path / "pong"
        ping(env, marker)
        pid = wait_for(
            lambda: marker.exists() and marker.read_text(),
            timeout=60,
            what="the embedded worker to run the task",
        )
        assert int(pid) not in (proc.pid, os.getpid())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    # The server outlives the processes that used it (some killed, their
    # pgserver handles left behind) until `manage.py embedded stop`, which
    # must stop it, and say so only then; status does not start it again.
    postmaster = postmaster_pid(tmp_path / "var" / "pgdata")
    assert postmaster is not None

    def embedded(action: str) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", "embedded", action],
            cwd=ROOT,
            env=env,
            timeout=90,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    try:
        assert embedded("status").startswith(f"running, pid {postmaster}")
        assert embedded("stop") == "stopped"
        assert postmaster_pid(tmp_path / "var" / "pgdata") is None
        with pytest.raises(ProcessLookupError):
            os.kill(postmaster, 0)
        assert embedded("status").startswith("not running")
        assert embedded("stop") == "not running"
    finally:  # never leave a server behind, whatever failed above
        if postmaster_pid(tmp_path / "var" / "pgdata") is not None:
            os.kill(postmaster, signal.SIGINT)
