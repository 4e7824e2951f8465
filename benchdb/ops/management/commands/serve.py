"""``manage.py serve``: run benchdb on one machine, web server plus worker.

What ``make run`` calls.  It migrates, loads the reference data (idempotent),
then starts a real Celery worker (with beat for the periodic tasks) and the
web server, and stops both together on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate, load reference data, run the web server and a Celery worker."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument(
            "--no-reference", action="store_true", help="Skip loading reference data."
        )

    def handle(self, *args, addr: str, concurrency: int, no_reference: bool, **kw):
        call_command("migrate", interactive=False, verbosity=1)
        if not no_reference and "load_reference" in get_commands():
            call_command("load_reference")
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "benchdb",
                "worker",
                "--beat",
                "--loglevel=INFO",
                f"--concurrency={concurrency}",
            ]
        )
        web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", addr, "--noreload"]
        )
        self.stdout.write(f"benchdb is running on http://{addr}/ (Ctrl-C stops it)")

        def stop(*_):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        try:
            while worker.poll() is None and web.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for proc in (web, worker):
                if proc.poll() is None:
                    proc.terminate()
            for proc in (web, worker):
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        failed = [p for p in (web, worker) if p.returncode not in (0, -15, None)]
        if failed:
            sys.exit(1)
