"""Ingest throughput end to end: real bundles uploaded to gunicorn, stored by
a real Celery worker, against a bulk INSERT of the same rows.

1. N copies of the seed bundles (new bundle ids) are POSTed to
   ``/api/v1/submissions/`` on gunicorn (2 workers, 2 client threads): the
   API validates each (re-parsing every raw output) and queues it;
2. gunicorn stops; a worker (``--concurrency 2``, prefork, as
   docker/entrypoint.sh starts it: no ``-E`` task events) starts on the
   broker under test and the clock runs from its "ready" line until every
   submission is ``done``; the CPU time the worker's processes and its
   PostgreSQL backends used meanwhile is printed per bundle (the figure to
   read on a shared machine, where the rate depends on the others' load),
   and the share of that clock the two pool processes spent in tasks (from
   the worker log): the rest is what the broker costs (or the CPU others
   took);
3. the same rows (runs, results, measurements, raw outputs) are copied once
   more with one ``INSERT ... SELECT`` per table: the database's own floor.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _post_all(port: int, bodies: list[bytes], threads: int = 2) -> float:
    todo = list(enumerate(bodies))
    lock = threading.Lock()
    errors: list[str] = []

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                _i, body = todo.pop()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request(
                "POST",
                "/api/v1/submissions/",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            text = response.read()
            conn.close()
            if response.status != 202:
                errors.append(f"{response.status} {text[:300]!r}")

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise SystemExit(f"bench: upload refused: {errors[0]}")
    return time.perf_counter() - t0


def _worker(env: dict, log: Path) -> subprocess.Popen:
    handle = log.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "benchdb",
            "worker",
            "--concurrency=2",
            "--loglevel=INFO",
            f"--hostname=bench-{uuid.uuid4().hex[:8]}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc; 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its children (the worker's pool)."""
    pids = [pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return sum(_cpu_s(p) for p in pids)


def _backends_cpu_s() -> tuple[float, int]:
    """CPU seconds of the other client backends on this database (the
    worker's, which it keeps across tasks) and how many; 0 where PostgreSQL
    runs on another machine."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        pids = [r[0] for r in cur.fetchall()]
    return sum(_cpu_s(p) for p in pids), len(pids)


def _done_count(ids: list[str]) -> tuple[int, int]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FILTER (WHERE status = 'done'), "
            "count(*) FILTER (WHERE status = 'failed') FROM results_submission "
            "WHERE bundle_id = ANY(%s::uuid[])",
            [ids],
        )
        return cur.fetchone()


def _task_seconds(log: Path) -> float:
    """Seconds the worker's processes spent in tasks, from its log's
    "succeeded in" lines (Celery's own clock around each task)."""
    return sum(
        float(m.group(1))
        for m in re.finditer(r" succeeded in ([0-9.]+)s", log.read_text())
    )


def one_broker(bundles, count: int, dsn: str, broker: str) -> list[str]:
    from bench.timing import Server

    bodies, ids = [], []
    for i in range(count):
        bundle = dict(bundles[i % len(bundles)])
        bundle["bundle_id"] = str(uuid.uuid4())
        bundle["pair_id"] = None
        ids.append(bundle["bundle_id"])
        bodies.append(json.dumps(bundle).encode())
    size = sum(len(b) for b in bodies) / len(bodies)
    workdir = Path(tempfile.mkdtemp(prefix="benchdb-bench-broker-"))
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "PYTHONPATH": f"{ROOT / 'agent'}:{ROOT}",
        "SUBMISSION_THROTTLE": "100000000/hour",
    }
    if broker == "redis":
        env["CELERY_BROKER_URL"] = os.environ.get(
            "BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"
        )
    else:
        env.pop("CELERY_BROKER_URL", None)
        env["BENCHDB_BROKER_DIR"] = str(workdir / "broker")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    if broker != "redis":
        os.environ.pop("CELERY_BROKER_URL", None)
    lines = []
    try:
        if broker == "redis":
            import redis

            redis.Redis.from_url(env["CELERY_BROKER_URL"]).delete("celery")
        server = Server(dsn)
        try:
            web0 = _tree_cpu_s(server.proc.pid)
            upload = _post_all(server.port, bodies)
            web_cpu = _tree_cpu_s(server.proc.pid) - web0
            web_pg_cpu, web_backends = _backends_cpu_s()
        finally:
            server.stop()
        proc = _worker(env, workdir / "worker.log")
        try:
            deadline = time.monotonic() + 120
            while "ready" not in (workdir / "worker.log").read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "bench: worker did not start: "
                        + (workdir / "worker.log").read_text()[-2000:]
                    )
                time.sleep(0.01)
            cpu0 = _tree_cpu_s(proc.pid)
            t0 = time.perf_counter()
            deadline = time.monotonic() + max(120, count * 5)
            while True:
                done, failed = _done_count(ids)
                if done + failed >= count or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            elapsed = time.perf_counter() - t0
            worker_cpu = _tree_cpu_s(proc.pid) - cpu0
            pg_cpu, backends = _backends_cpu_s()
        finally:
            _stop(proc)
        # What the broker costs, less dependent on the machine's load than the
        # rate: the share of the clock the two pool processes were not in a
        # task (waiting for the next message, or for the CPU).
        busy = _task_seconds(workdir / "worker.log") / (2 * elapsed)
        idle_ms = max(0.0, 2 * elapsed * (1 - busy)) / max(done, 1) * 1000
        lines.append(
            f"ingest via {broker} broker: {count} bundles of {size / 1024:.0f} KiB "
            f"({len(bundles[0]['tests'])} tests): upload {count / upload:.1f}/s "
            f"(API validation, 2 gunicorn workers; CPU per bundle: gunicorn "
            f"{web_cpu / count * 1000:.1f} ms, PostgreSQL ({web_backends} backends) "
            f"{web_pg_cpu / count * 1000:.1f} ms); worker (concurrency 2) "
            f"{done / elapsed:.1f} bundles/s, {done} done, {failed} failed; "
            f"CPU per bundle: worker {worker_cpu / count * 1000:.1f} ms, "
            f"PostgreSQL ({backends} backends) {pg_cpu / count * 1000:.1f} ms; "
            f"pool processes in tasks {busy:.0%} of the time (idle "
            f"{idle_ms:.1f} ms per bundle)"
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(workdir, ignore_errors=True)
    return lines


def bulk_insert_floor(count: int) -> str:
    """The same rows copied by one INSERT ... SELECT per table: bundles/s."""
    from django.db import connection, transaction

    from bench.data import _columns, _insert_select
    from benchdb.results.models import Measurement, RawOutput, Result, Run

    with connection.cursor() as cur:
        cur.execute(
            "SELECT run_id FROM results_submission WHERE status = 'done' "
            "ORDER BY id DESC LIMIT %s",
            [count],
        )
        run_ids = [r[0] for r in cur.fetchall()]
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE floor_map ON COMMIT DROP AS SELECT "
            "nextval(pg_get_serial_sequence('results_run', 'id')) AS run_id, "
            "id AS seed_id FROM results_run WHERE id = ANY(%s)",
            [run_ids],
        )
        cols = _columns(Run)
        cur.execute(
            _insert_select(
                "results_run",
                cols,
                {"id": "m.run_id", "uuid": "gen_random_uuid()", "baseline_id": "NULL"},
                "FROM floor_map m JOIN results_run s ON s.id = m.seed_id",
            )
        )
        cur.execute(
            "CREATE TEMP TABLE floor_rmap ON COMMIT DROP AS SELECT "
            "nextval(pg_get_serial_sequence('results_result', 'id')) AS result_id, "
            "m.run_id, r.id AS seed_result_id FROM floor_map m "
            "JOIN results_result r ON r.run_id = m.seed_id"
        )
        cur.execute(
            _insert_select(
                "results_result",
                _columns(Result),
                {"id": "m.result_id", "run_id": "m.run_id"},
                "FROM floor_rmap m JOIN results_result s ON s.id = m.seed_result_id",
            )
        )
        for model in (Measurement, RawOutput):
            table = model._meta.db_table
            cur.execute(
                _insert_select(
                    table,
                    [c for c in _columns(model) if c != "id"],
                    {"result_id": "m.result_id"},
                    f"FROM floor_rmap m JOIN {table} s "
                    "ON s.result_id = m.seed_result_id",
                )
            )
    elapsed = time.perf_counter() - t0
    return (
        f"bulk INSERT ... SELECT of the same rows ({len(run_ids)} runs with "
        f"results, measurements, raw outputs): {len(run_ids) / elapsed:.0f} "
        "bundles/s"
    )


def _last_ids() -> tuple[int, int]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT (SELECT coalesce(max(id), 0) FROM results_run), "
            "(SELECT coalesce(max(id), 0) FROM results_submission)"
        )
        return cur.fetchone()


def _remove_since(last_run: int, last_submission: int) -> int:
    """Delete the runs and submissions made after those ids (with their
    results, measurements and raw outputs): the database is left as it was,
    so a later ``--reuse`` times the same runs (``pick_context`` takes the
    newest guests)."""
    from benchdb.results.models import Run, Submission

    Submission.objects.filter(pk__gt=last_submission).delete()
    removed, _ = Run.objects.filter(pk__gt=last_run).delete()
    return removed


def run(bundles: list[dict], count: int, dsn: str) -> list[str]:
    lines = []
    last_run, last_submission = _last_ids()
    try:
        for broker in ("filesystem", "redis"):
            lines += one_broker(bundles, count, dsn, broker)
        lines.append(bulk_insert_floor(count))
    finally:
        _remove_since(last_run, last_submission)
    return lines
