"""Timing: a real gunicorn against the bench database, the queries the app
sends for a request (captured in-process) and the hand-written SQL, both
replayed through psycopg as Django sends them (client-side binding)."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load() -> str:
    """The machine's load averages (1, 5, 15 min), as ``uptime`` says them:
    printed beside every figure, since the machine is shared."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass(frozen=True)
class Serving:
    """A gunicorn serving model: ``sync:W`` or ``gthread:WxT``."""

    worker_class: str = "sync"
    workers: int = 2
    threads: int = 1

    @classmethod
    def parse(cls, text: str) -> Serving:
        kind, _, size = text.strip().partition(":")
        if kind not in ("sync", "gthread") or not size:
            raise ValueError(
                f"{text!r}: expected sync:WORKERS or gthread:WORKERSxTHREADS"
            )
        workers, _, threads = size.partition("x")
        if kind == "sync" and threads:
            raise ValueError(f"{text!r}: a sync worker has one thread")
        return cls(kind, int(workers), int(threads or 1))

    def __str__(self) -> str:
        if self.worker_class == "sync":
            return f"sync:{self.workers}"
        return f"gthread:{self.workers}x{self.threads}"

    def argv(self) -> list[str]:
        out = ["--worker-class", self.worker_class, "--workers", str(self.workers)]
        if self.worker_class == "gthread":
            out += ["--threads", str(self.threads)]
        return out


# gunicorn's flags as docker/entrypoint.sh serves (tests/bench/
# test_serving_flags.py holds the two equal).  --preload: the app imported
# (and warmed, benchdb/ops/warm.py) once, before the workers fork; without
# it the workers past the first were still importing NumPy and SciPy when
# the first row's rounds began.  --max-requests: a worker replaced after
# that many requests, as in production, so the many-clients lines pay for
# it as a deployment does.
DEPLOYED_FLAGS = (
    "--preload",
    "--max-requests",
    "10000",
    "--max-requests-jitter",
    "1000",
)


# What every request of the harness asks with, as browsers, curl
# --compressed and Python's requests do: a compressed answer.  The service
# compresses what it sends (GZipMiddleware), and that CPU is part of what a
# visitor waits for; without it the rows timed answers nobody is sent.
REQUEST_HEADERS = {"Accept-Encoding": "gzip"}


class Server:
    """gunicorn on a free port, with the bench database (``serving``: its
    worker class, workers and threads; default 2 sync workers)."""

    def __init__(
        self,
        database_url: str,
        workers: int = 2,
        env: dict | None = None,
        serving: Serving | None = None,
    ):
        self.serving = serving or Serving("sync", workers)
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
                *self.serving.argv(),
                *DEPLOYED_FLAGS,
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
        """(status, body bytes, seconds) of one GET, asked as a browser asks
        (``REQUEST_HEADERS``), the answer read to its last byte.  The body's
        bytes are the page's, uncompressed (the 300 KB budget is a page's
        weight): a gzip answer's trailer says them (ISIZE, RFC 1952), so
        nothing is decompressed on the client's cores."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        t0 = time.perf_counter()
        conn.request("GET", url, headers=REQUEST_HEADERS)
        response = conn.getresponse()
        size, tail = 0, b""
        while True:
            chunk = response.read(1 << 16)
            if not chunk:
                break
            size += len(chunk)
            tail = (tail + chunk[-4:])[-4:]
        elapsed = time.perf_counter() - t0
        conn.close()
        if response.getheader("Content-Encoding") == "gzip" and len(tail) == 4:
            size = int.from_bytes(tail, "little")
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


def tree_pids(pid: int) -> list[int]:
    """A process and its children (gunicorn's workers, a worker's pool)."""
    pids = [pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def interleaved(fns: list, rounds: int, budget_s: float) -> list[list[float]]:
    """Timings of each of ``fns`` taken in turn, round after round: round
    ``i`` calls every function once, in order, before round ``i + 1``, so
    the service and its SQL see the same machine (its load, the caches) at
    the same moments.  One untimed round first (a warm-up), unless
    ``rounds`` is negative (each call then on new inputs: nothing to warm);
    up to ``abs(rounds)`` rounds, stopping once ``budget_s`` is spent (at
    least three).  A function returns its seconds."""
    if rounds > 0:
        for fn in fns:
            fn()
    rounds = abs(rounds)
    out: list[list[float]] = [[] for _ in fns]
    start = time.monotonic()
    while len(out[0]) < rounds:
        for times, fn in zip(out, fns, strict=True):
            times.append(fn())
        if len(out[0]) >= 3 and time.monotonic() - start > budget_s:
            break
    return out


def sql_timer(dsn: str):
    """A timer of SQL statements through psycopg, in a session set as the
    service's are (its ``options``, e.g. ``jit=off``: benchdb/settings.py)
    and sending them as Django does (client-side binding, ``ClientCursor``):
    the same text reaches PostgreSQL as from the app."""
    import psycopg
    from django.conf import settings

    options = settings.DATABASES["default"].get("OPTIONS", {}).get("options", "")
    conn = psycopg.connect(
        dsn, autocommit=True, options=options, cursor_factory=psycopg.ClientCursor
    )

    def run(statements: list[tuple[str, object]]) -> float:
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for sql, params in statements:
                cur.execute(sql, params or None)
                if cur.description is not None:
                    cur.fetchall()
        return time.perf_counter() - t0

    return conn, run


# What is replayed of a request's queries: its reads.  Writes (a session
# saved, a stored answer's ``requested`` mark), savepoints and SET are left
# out: replaying them would change the bench database, and they are not
# the answer's cost.
READ = ("select", "with", "(select")
# A WITH that writes (the kept pages' share, ``web/kept.py``) is a write.
WRITES = re.compile(r"\b(insert\s+into|delete\s+from|update\s+\w+\s+set)\b", re.I)


@dataclass
class Captured:
    """The queries one in-process request sent: ``statements`` (SQL with
    its parameters, as Django passed them to psycopg), all of them counted
    in ``queries``; ``reads``: those replayed (``READ``)."""

    status: int
    statements: list
    queries: int

    @property
    def reads(self) -> list:
        return [
            s
            for s in self.statements
            if s[0].lstrip().lower().startswith(READ) and not WRITES.search(s[0])
        ]

    def stored_rows(self) -> list[tuple[str, list]]:
        """The read of every stored answer the request found (``answer_cache
        .fetch``: a primary-key read of ``results_answersummary``)."""
        out = []
        for sql, params in self.statements:
            if "results_answersummary s ON s.name" in sql and params:
                out.append(
                    (
                        "SELECT answer, version, computed, runs FROM "
                        "results_answersummary WHERE name = %s AND digest = %s",
                        list(params),
                    )
                )
        return out

    def mapped(self, ids: dict[int, int]) -> list:
        """The reads with every integer parameter in ``ids`` replaced (the
        same request for other runs: a comparison's run and baseline ids)."""

        def swap(value):
            if isinstance(value, bool):
                return value
            if isinstance(value, int):
                return ids.get(value, value)
            if isinstance(value, (list, tuple)):
                return type(value)(swap(v) for v in value)
            return value

        return [(sql, swap(params)) for sql, params in self.reads]


def capture(url: str, memo: bool = True) -> Captured:
    """The queries one GET of ``url`` sends, in this process (Django's test
    client, with ``connection.execute_wrapper``) after one GET before it,
    as in a warm server's process; ``memo=False``: with no comparison kept
    (``BENCHDB_COMPARISON_MEMO=0``) and no page kept as written
    (``BENCHDB_PAGE_MEMO=0``, benchdb/web/kept.py), the queries of a
    comparison computed and its page written, as a new random set's are."""
    from django.db import connection
    from django.test import Client, override_settings

    client = Client()
    statements: list = []

    def get() -> int:
        response = client.get(url)
        if getattr(response, "streaming", False):
            for _ in response.streaming_content:
                pass
        return response.status_code

    def record(execute, sql, params, many, context):
        if not many:
            statements.append((sql, params))
        return execute(sql, params, many, context)

    overrides = {} if memo else {"BENCHDB_COMPARISON_MEMO": 0, "BENCHDB_PAGE_MEMO": 0}
    with override_settings(**overrides):
        get()
        statements.clear()
        with connection.execute_wrapper(record):
            status = get()
    return Captured(status, list(statements), len(statements))


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
