"""``manage.py serve``: run benchdb on one machine, and keep it running.

What ``make run`` calls.  It migrates, loads the reference data (idempotent),
then starts and watches four processes:

- the web server: gunicorn on ``--addr``, started by ``docker/entrypoint.sh
  web`` as the compose web container starts it, so both serve with the same
  serving model (worker class, workers from the cores, threads: chosen by
  measurement, bench/README.md "Serving model");
- the Celery worker for ingest and the other tasks (queue ``celery``);
- a second worker for the summary refresh alone (queue ``refresh``, one at a
  time: benchdb/results/refresh.py), so ingest never waits behind it;
- Celery beat (the periodic tasks: requeue, refresh backstop, public dump).

A worker or beat that exits is started again, with one line saying which,
why (its exit status and the last error it printed) and its new pid; one
that keeps dying is started again after a growing pause (up to
``MAX_BACKOFF_S``).  If the web server exits, ``serve`` stops the others and
exits non-zero, saying so: nothing is left answering "connection refused"
while looking alive.  Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand

# A child that ran this long before exiting is restarted at once; one that
# dies sooner waits 1, 2, 4 ... up to MAX_BACKOFF_S seconds.
QUICK_DEATH_S = 10
MAX_BACKOFF_S = 30
# How many of a child's last output lines are kept to say why it died.
TAIL_LINES = 200
ERROR_LINE = re.compile(r"CRITICAL|ERROR|Error|Exception|Traceback|Killed")
# An ingest worker process is replaced after this many tasks: its memory
# grows with the bundles it parsed (140 -> 188 MB over 1,215 ingests).
MAX_TASKS_PER_CHILD = 100


@dataclass
class Child:
    """One process ``serve`` started and watches."""

    name: str
    argv: list[str]
    essential: bool = False
    # Set in its environment beside ours.
    env: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    tail: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES)
    )
    started: float = 0.0
    restarts: int = 0
    quick_deaths: int = 0
    restart_at: float | None = None
    relay: threading.Thread | None = None

    def last_error(self) -> str:
        """Its last error line, or its last line when it printed none."""
        lines = [line.strip() for line in self.tail if line.strip()]
        for line in reversed(lines):
            if ERROR_LINE.search(line):
                return f"its last error: {line}"
        if lines:
            return f"no error printed (its last line: {lines[-1]})"
        return "it printed nothing"


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "benchdb", *args]


def children(addr: str, concurrency: int) -> list[Child]:
    # One machine, a fixed set of workers: no gossip, mingle or heartbeat
    # events between them (they are for clusters, and on the filesystem
    # broker each is a file per message per worker).
    alone = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return [
        Child(
            "web server",
            ["sh", str(settings.BASE_DIR / "docker" / "entrypoint.sh"), "web"],
            essential=True,
            env={
                "GUNICORN_BIND": addr,
                # The entrypoint runs `python`: this one, with its packages.
                "PATH": os.pathsep.join(
                    [os.path.dirname(sys.executable), os.environ.get("PATH", "")]
                ),
            },
        ),
        Child(
            "worker",
            _celery(
                "worker",
                "--queues=celery",
                "--hostname=ingest@%h",
                f"--concurrency={concurrency}",
                f"--max-tasks-per-child={MAX_TASKS_PER_CHILD}",
                "--loglevel=INFO",
                *alone,
            ),
        ),
        Child(
            "refresh worker",
            _celery(
                "worker",
                "--queues=refresh",
                "--hostname=refresh@%h",
                "--concurrency=1",
                "--loglevel=INFO",
                *alone,
            ),
        ),
        Child("beat", _celery("beat", "--loglevel=INFO")),
    ]


class Command(BaseCommand):
    help = (
        "Migrate, load the reference data, then run and watch the web server, "
        "the Celery worker, the refresh worker and beat (restarting any that "
        "exits; if the web server exits, serve exits non-zero)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr",
            default="127.0.0.1:8000",
            help="address and port of the web server, e.g. 0.0.0.0:8000 or "
            "127.0.0.1:8001 for a second instance or when 8000 is taken "
            "(default 127.0.0.1:8000)",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=2,
            help="ingest worker processes (default 2)",
        )
        parser.add_argument(
            "--no-reference", action="store_true", help="Skip loading reference data."
        )

    def say(self, text: str) -> None:
        self.stdout.write(f"serve: {text}")
        self.stdout.flush()

    def start(self, child: Child) -> None:
        env = {**os.environ, **child.env}
        # No static files were collected: WhiteNoise serves them from the
        # source folders.
        env.setdefault("WHITENOISE_USE_FINDERS", "true")
        # Each line as it is printed (a pipe would hold it in a buffer).
        env["PYTHONUNBUFFERED"] = "1"
        child.proc = subprocess.Popen(
            child.argv,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            # Its own process group: a worker's pool goes with it.
            start_new_session=True,
        )
        child.started = time.monotonic()
        child.restart_at = None
        child.relay = threading.Thread(
            target=self.relay, args=(child, child.proc), daemon=True
        )
        child.relay.start()

    def relay(self, child: Child, proc: subprocess.Popen) -> None:
        """Copy a child's output to ours, keeping its last lines."""
        for line in proc.stdout:
            child.tail.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()

    def handle(self, *args, addr: str, concurrency: int, no_reference: bool, **kw):
        call_command("migrate", interactive=False, verbosity=1)
        if not no_reference and "load_reference" in get_commands():
            call_command("load_reference")
        procs = children(addr, concurrency)
        for child in procs:
            self.start(child)
            self.say(f"started the {child.name} (pid {child.proc.pid})")
        self.say(f"benchdb is running on http://{addr}/ (Ctrl-C stops it)")

        def stop(*_):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        failure = None
        try:
            failure = self.watch(procs)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop_all(procs)
        if failure:
            self.say(failure)
            sys.exit(1)

    def watch(self, procs: list[Child]) -> str:
        """Restart what dies until the web server does; returns why."""
        while True:
            now = time.monotonic()
            for child in procs:
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self.start(child)
                        self.say(
                            f"started the {child.name} again (pid {child.proc.pid})"
                        )
                    continue
                code = child.proc.poll()
                if code is None:
                    continue
                self.reap(child)
                if child.essential:
                    return (
                        f"the {child.name} (pid {child.proc.pid}) "
                        f"{exit_reason(code)}; {child.last_error()}; "
                        "stopping the others and exiting"
                    )
                child.restarts += 1
                quick = now - child.started < QUICK_DEATH_S
                child.quick_deaths = child.quick_deaths + 1 if quick else 0
                pause = (
                    min(2 ** (child.quick_deaths - 1), MAX_BACKOFF_S) if quick else 0
                )
                dead = child.proc.pid
                reason = f"{exit_reason(code)}; {child.last_error()}"
                if pause:
                    child.restart_at = now + pause
                    self.say(
                        f"the {child.name} (pid {dead}) {reason}; restarting it "
                        f"in {pause} s (restart {child.restarts})"
                    )
                else:
                    self.start(child)
                    self.say(
                        f"the {child.name} (pid {dead}) {reason}; restarted as "
                        f"pid {child.proc.pid} (restart {child.restarts})"
                    )
            time.sleep(0.2)

    @staticmethod
    def reap(child: Child) -> None:
        """Kill what the dead child left in its process group (a worker's
        pool processes), then let its last lines reach the tail."""
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        child.relay.join(5)

    def stop_all(self, procs: list[Child]) -> None:
        running = [c for c in procs if c.proc and c.proc.poll() is None]
        for child in running:
            try:
                os.killpg(child.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        for child in running:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(child.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                child.proc.wait(10)
