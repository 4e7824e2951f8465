"""``manage.py embedded status|stop|settings``: the embedded PostgreSQL's
lifecycle, and the memory settings it is given on this machine (``settings``
prints them as docker/.env lines, for the compose PostgreSQL)."""

import os
import signal
import time

from django.core.management.base import BaseCommand, CommandError

from benchdb import embedded

# How long ``stop`` waits for PostgreSQL's fast shutdown.
STOP_TIMEOUT_S = 60.0


def postmaster_pid(pgdata) -> int | None:
    """The running postmaster's pid from ``postmaster.pid`` (its first line,
    as PostgreSQL writes it), or None when no server runs on ``pgdata``."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


class Command(BaseCommand):
    help = (
        "Show or stop the embedded PostgreSQL (used when DATABASE_URL is unset), "
        "or print the memory settings it gets on this machine as .env lines."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "stop", "settings"])

    def handle(self, *args, action: str, **kw):
        if action == "settings":
            for name, value in embedded.postgres_settings().items():
                self.stdout.write(f"PG_{name.upper()}={value}")
            return
        pgdata = embedded.var_dir() / "pgdata"
        if not (pgdata / "PG_VERSION").exists():
            raise CommandError(f"no embedded database under {pgdata}")
        pid = postmaster_pid(pgdata)
        if action == "status":
            if pid is None:
                self.stdout.write(f"not running, data in {pgdata}")
            else:
                self.stdout.write(f"running, pid {pid}, data in {pgdata}")
            return
        if pid is None:
            self.stdout.write("not running")
            return
        # PostgreSQL's fast shutdown (SIGINT): sessions are ended, the data
        # checkpointed.  Not pgserver's cleanup, which stops the server only
        # when the process asking holds its last handle: a web server or
        # worker that was killed leaves its handle behind, and the server ran
        # on while this command said "stopped".
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid):
            if time.monotonic() > deadline:
                raise CommandError(
                    f"PostgreSQL (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.1)
        self.stdout.write("stopped")
