"""Start ``manage.py serve`` as ``make run`` does, for the tests that need the
whole thing running (tests/service/test_serve.py, the soak)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import ROOT, log_tail, wait_for

STARTED = re.compile(r"serve: started the (.+?)(?: again)? \(pid (\d+)\)")
RESTARTED = re.compile(r"serve: the (.+?) \(pid (\d+)\) .*; restarted as pid (\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 10):
    """(status, headers, body) or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()
    except OSError:
        return None


class Serve:
    """``manage.py serve`` in its own process group, its output in a file."""

    def __init__(
        self, folder: Path, env: dict, concurrency: int = 1, reference: bool = False
    ):
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "serve.log"
        self._handle = self.log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "serve",
                f"--addr=127.0.0.1:{self.port}",
                f"--concurrency={concurrency}",
                *([] if reference else ["--no-reference"]),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, predicate, what: str, timeout: float = 120):
        """``wait_for`` that also fails at once if serve exited."""

        def check():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"serve exited ({self.proc.returncode}) while waiting for "
                    f"{what}\n--- last lines of {self.log} ---\n{log_tail(self.log)}"
                )
            return predicate()

        return wait_for(check, timeout=timeout, interval=0.3, what=what, log=self.log)

    def pids(self) -> dict[str, int]:
        """The latest pid of each process serve started, by name."""
        found = {}
        for line in self.text().splitlines():
            if m := STARTED.search(line):
                found[m.group(1)] = int(m.group(2))
            elif m := RESTARTED.search(line):
                found[m.group(1)] = int(m.group(3))
        return found

    def wait_up(self, timeout: float = 180) -> None:
        self.wait(
            lambda: get(f"{self.url}/health/", timeout=5),
            "the web server to answer /health/",
            timeout,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Whatever serve's children left (they have process groups of their
        # own): nothing may outlive the test.
        for pid in self.pids().values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._handle.close()


def ping(env: dict, marker: Path) -> None:
    """Send the ping task (benchdb/results/tasks.py) from a new process with
    ``env``: the worker that runs it writes its pid to ``marker``."""
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            f"from benchdb.results.tasks import ping; ping.delay({str(marker)!r})",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not alive.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def embedded_env(folder: Path, database_url: str | None = None, **extra) -> dict:
    """The environment of ``make run``: the embedded broker in ``folder``
    and, unless given a database, the embedded PostgreSQL there too."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "BENCHDB_BROKER_DIR")
    }
    env["BENCHDB_VAR_DIR"] = str(folder / "var")
    if database_url:
        env["DATABASE_URL"] = database_url
    env.update(extra)
    return env
