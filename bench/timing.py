"""Timing: a real gunicorn (2 sync workers) against the bench database, the
hand-written SQL through psycopg, and queries per request in-process."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gunicorn -w 2 on a free port, with the bench database."""

    def __init__(self, database_url: str, workers: int = 2, env: dict | None = None):
        self.port = free_port()
        # What the server is run with beyond the machine's environment.
        self.env = dict(env or {})
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBUG": "false",
            "DB_CONN_MAX_AGE": "600",
            "PYTHONPATH": f"{ROOT / 'agent'}:{ROOT}",
            "ANON_THROTTLE": "100000000/hour",
            **self.env,
        }
        self.proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "benchdb.wsgi:application",
                "--workers",
                str(workers),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--timeout",
                "600",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.get("/api/v1/vocabularies/")
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit(
                        "bench: gunicorn exited: " + self.proc.stderr.read().decode()
                    ) from None
                time.sleep(0.3)
        raise SystemExit("bench: gunicorn did not answer within 60 s")

    def get(self, url: str) -> tuple[int, int, float]:
        """(status, body bytes, seconds) of one GET, body read to the end."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        t0 = time.perf_counter()
        conn.request("GET", url)
        response = conn.getresponse()
        size = 0
        while True:
            chunk = response.read(1 << 16)
            if not chunk:
                break
            size += len(chunk)
        elapsed = time.perf_counter() - t0
        conn.close()
        return response.status, size, elapsed

    def worker_pids(self) -> list[int]:
        out = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True
        )
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def sample(fn, rounds: int, budget_s: float) -> list[float]:
    """Up to ``rounds`` timings of ``fn`` (after one warm-up), stopping early
    once ``budget_s`` is spent (at least three)."""
    fn()
    times: list[float] = []
    start = time.monotonic()
    while len(times) < rounds:
        times.append(fn())
        if len(times) >= 3 and time.monotonic() - start > budget_s:
            break
    return times


def sql_timer(dsn: str):
    """A timer of hand-written SQL, in a session set as the service's are
    (its ``options``, e.g. ``jit=off``: benchdb/settings.py)."""
    import psycopg
    from django.conf import settings

    options = settings.DATABASES["default"].get("OPTIONS", {}).get("options", "")
    conn = psycopg.connect(dsn, autocommit=True, options=options)

    def run(statements: list[tuple[str, list]]) -> float:
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for sql, params in statements:
                cur.execute(sql, params or None)
                if cur.description is not None:
                    cur.fetchall()
        return time.perf_counter() - t0

    return conn, run


def count_queries(url: str, env: dict | None = None) -> int:
    """Queries one request makes, in-process (Django test client), after
    one request before it, as in a warm server's process; ``env``: the
    server's settings that change it (``BENCHDB_COMPARISON_MEMO``)."""
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    overrides = {}
    if env and "BENCHDB_COMPARISON_MEMO" in env:
        overrides["BENCHDB_COMPARISON_MEMO"] = int(env["BENCHDB_COMPARISON_MEMO"])
    client = Client()

    def get():
        response = client.get(url)
        if getattr(response, "streaming", False):
            for _ in response.streaming_content:
                pass

    with override_settings(**overrides):
        get()
        with CaptureQueriesContext(connection) as ctx:
            get()
    return len(ctx.captured_queries)


def export_rss(database_url: str, what: str) -> dict:
    """Peak RSS of one export in a fresh process: ``dump`` (the worker's full
    compressed dump) or a URL streamed through the test client."""
    code = r"""
import json, os, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import django
django.setup()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
what = sys.argv[1]
t0 = time.perf_counter()
size = 0
if what == "dump":
    from benchdb.results.tasks import public_dump, dump_dir
    stem = public_dump()
    size = sum(p.stat().st_size for p in dump_dir().glob(stem + ".*"))
else:
    from django.test import Client
    response = Client().get(what)
    assert response.status_code == 200, response.status_code
    if getattr(response, "streaming", False):
        for chunk in response.streaming_content:
            size += len(chunk)
    else:
        size = len(response.content)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "peak_kib": after, "bytes": size,
                  "seconds": time.perf_counter() - t0}))
"""
    return _in_fresh_process(database_url, code, what)


def memo_rss(database_url: str, comparisons: int = 60) -> dict:
    """The comparison memo (``compare._MEMO``) at its budget, in a fresh
    process: ``comparisons`` distinct 10-run comparisons of listed guests
    built one after another, then what is kept, what was evicted, the
    memory Python traced for it and the process's RSS before and after."""
    code = r"""
import gc, json, sys, tracemalloc, warnings
warnings.filterwarnings("ignore")
import django
django.setup()
from django.db import connection
from benchdb.results import compare, reads

def rss_kib():
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])

n = int(sys.argv[1])
with connection.cursor() as cur:
    cur.execute(
        "SELECT id FROM results_run WHERE visibility = 'public' AND NOT hidden "
        "AND role = 'guest' ORDER BY id LIMIT %s", [10 * n])
    ids = [row[0] for row in cur.fetchall()]
gc.collect()
before = rss_kib()
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
for i in range(0, len(ids) - 9, 10):
    runs, ref = reads.compared_runs(ids[i:i + 10], None,
                                    fields=compare.COMPARED_RUN_FIELDS)
    compare.build_comparison(runs, ref)
gc.collect()
kept = compare._MEMO
print(json.dumps({"built": len(ids) // 10, "kept": len(kept), "figures": kept.cost,
                  "budget": kept.budget, "evicted": kept.evictions,
                  "traced_kib": (tracemalloc.get_traced_memory()[0] - base) // 1024,
                  "rss_before_kib": before, "rss_after_kib": rss_kib()}))
"""
    return _in_fresh_process(database_url, code, str(comparisons))


def _in_fresh_process(database_url: str, code: str, arg: str) -> dict:
    """Run ``code`` with Django set up on the database in a new Python
    process: the JSON object its last line prints, or {"error": ...}."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "benchdb.settings",
        "PYTHONPATH": f"{ROOT / 'agent'}:{ROOT}",
    }
    done = subprocess.run(
        [sys.executable, "-c", code, arg],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])
