"""Ingest end to end: real bundles uploaded to gunicorn while the workers
store them, against a bulk INSERT of the same rows.

1. The Celery workers ``manage.py serve`` runs are started first (the
   ingest worker on the default queue, concurrency 2, and the refresh
   worker on ``refresh``: every queue the app uses is consumed, so the
   refresh each ingest queues is run, as in production), on the filesystem
   broker and then on Redis;
2. gunicorn (the serving model of the rows, ``--serving``) takes N copies
   of the seed bundles (new bundle ids) POSTed by 4 uploaders at once: the
   API validates each (re-parsing every raw output) and queues it;
3. after a warm-up (``_warm_up``: 3 uploads per web worker, not timed, so
   every process has taken its first request or task, and the refresh they
   queued has run), the clock runs from
   the first POST to the last submission ``done``: the rate a fleet of
   agents uploading at once sees at a warm server.  The CPU time gunicorn,
   the workers and their PostgreSQL backends used meanwhile is printed per
   bundle (the figure to read on a shared machine, where the rate depends
   on the others' load), with the backends that ended meanwhile (a web
   process without persistent connections starts one per upload);
4. the same rows (runs, results, measurements, raw outputs) are copied once
   more with one ``INSERT ... SELECT`` per table: the database's own floor,
   and the end-to-end rate as a share of it.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _copies(bundles: list[dict], count: int) -> tuple[list[bytes], list[str]]:
    """``count`` copies of the seed bundles with new ids, encoded once (the
    uploaders send bytes: no client encoding on the cores being measured),
    and their ids."""
    bodies, ids = [], []
    for i in range(count):
        bundle = dict(bundles[i % len(bundles)])
        bundle["bundle_id"] = str(uuid.uuid4())
        bundle["pair_id"] = None
        ids.append(bundle["bundle_id"])
        bodies.append(json.dumps(bundle).encode())
    return bodies, ids


def _wait_done(ids: list[str], deadline: float) -> tuple[int, int]:
    """(done, failed) once every submission of ``ids`` is one or the other
    (or at ``deadline``, ``time.monotonic``)."""
    while True:
        done, failed = _done_count(ids)
        if done + failed >= len(ids) or time.monotonic() > deadline:
            return done, failed
        time.sleep(0.01)


def _warm_up(port: int, bundles: list[dict], web_workers: int) -> None:
    """Uploads before the clock, one per web worker and then some, waited
    for to the last done: every gunicorn worker and every worker pool
    process has taken its first request or task.  A first one costs far
    more than the rest (a gunicorn worker's first upload 110 ms of CPU
    against 33 ms, measured with one sync worker: the pages copied from the
    preloaded parent, the connection, what is built on first use), a cost a
    server pays once per ``--max-requests`` (10,000) requests and a pool
    process once per ``--max-tasks-per-child`` (100) tasks; with 5 web
    workers and 2 pool processes it was about a quarter of what 40 timed
    bundles measured."""
    bodies, ids = _copies(bundles, 3 * web_workers)
    errors: list[str] = []
    _post_all(port, bodies, web_workers, errors)
    if errors:
        raise SystemExit(f"bench: upload refused: {errors[0]}")
    _wait_done(ids, time.monotonic() + 120)
    _wait_refresh_idle(time.monotonic() + 120)


def _wait_refresh_idle(deadline: float) -> None:
    """Until no summary refresh is queued or running: the one the warm-up
    queued (``SUMMARY_REFRESH_DELAY_S`` after its first upload) is not timed
    with the timed uploads, as none was before the warm-up."""
    from django.db import connection

    from benchdb.results.refresh import REFRESH_LOCK

    while time.monotonic() < deadline:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM results_dataversion "
                "WHERE refresh_queued IS NOT NULL) AND NOT EXISTS (SELECT 1 "
                "FROM pg_locks WHERE locktype = 'advisory' AND objid = %s)",
                [REFRESH_LOCK],
            )
            if cur.fetchone()[0]:
                return
        time.sleep(0.1)


def _post_all(port: int, bodies: list[bytes], threads: int, errors: list) -> None:
    """POST every body to /api/v1/submissions/ from ``threads`` clients."""
    todo = list(enumerate(bodies))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                _i, body = todo.pop(0)
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

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def worker_argvs() -> list[tuple[str, list[str]]]:
    """(name, argv) of the Celery workers ``manage.py serve`` runs: one per
    queue the app uses (the ingest worker on the default queue, the refresh
    worker on ``refresh``), so nothing the uploads queue is left unconsumed.
    Refuses a route to a queue none of them consumes."""
    from django.conf import settings

    from benchdb.ops.management.commands.serve import children

    workers = [
        (c.name, c.argv)
        for c in children("127.0.0.1:0", 2)
        if c.argv[1:3] == ["-m", "celery"] and "worker" in c.argv
    ]
    consumed = {
        q
        for _name, argv in workers
        for arg in argv
        if arg.startswith("--queues=")
        for q in arg.split("=", 1)[1].split(",")
    }
    routed = {"celery"} | {
        route["queue"] for route in getattr(settings, "CELERY_TASK_ROUTES", {}).values()
    }
    if routed - consumed:
        raise SystemExit(f"bench: no worker consumes the queues {routed - consumed}")
    return workers


def _worker(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(
        [*argv, f"--hostname=bench-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _cpu_s(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds (user + system) a process has used, from /proc; 0 if gone.
    ``reaped``: with its children that have ended and been waited for."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its children (the worker's pool), with
    the children that have ended: a Celery pool process replaced after
    ``--max-tasks-per-child`` tasks, a web worker after ``--max-requests``
    (each counted once, by the process that waited for it)."""
    from bench.timing import tree_pids

    return sum(_cpu_s(p, reaped=True) for p in tree_pids(pid))


def _backends_cpu(since: dict[int, float] | None = None) -> dict[int, float]:
    """CPU seconds of each other client backend on this database (the
    workers' and the web workers', kept across tasks and requests), by pid:
    since ``since`` (a pid not in it started meanwhile); none where
    PostgreSQL runs on another machine."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        pids = [r[0] for r in cur.fetchall()]
    since = since or {}
    return {p: _cpu_s(p) - since.get(p, 0.0) for p in pids}


def _ended_backends_cpu_s() -> float:
    """CPU seconds of every PostgreSQL backend that has ended so far (the
    postmaster's reaped children, from /proc; 0 where PostgreSQL runs on
    another machine).  A web process that opens a connection per request
    (``DB_CONN_MAX_AGE`` 0) starts and ends a backend per upload, whose CPU
    ``_backends_cpu`` never sees.  Server-wide: on a shared machine, other
    databases' ended sessions are in it too."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
    try:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        postmaster = int(fields[1])
        fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1]
    except (OSError, IndexError, ValueError):
        return 0.0
    fields = fields.split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


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


def one_broker(
    bundles, count: int, dsn: str, broker: str, serving=None, clients: int = 4
) -> tuple[str, float]:
    """Ingest end to end on one broker: the workers ``serve`` runs are
    started and ready first, then ``clients`` uploaders POST the bundles to
    gunicorn while the workers store them; the clock runs from the first
    POST to the last submission ``done``.  (line, bundles/s)."""
    from bench.timing import Server

    bodies, ids = _copies(bundles, count)
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
    procs: list[subprocess.Popen] = []
    try:
        if broker == "redis":
            import redis

            queues = redis.Redis.from_url(env["CELERY_BROKER_URL"])
            queues.delete("celery", "refresh")
        logs = []
        for name, argv in worker_argvs():
            log = workdir / f"{name.replace(' ', '-')}.log"
            logs.append(log)
            procs.append(_worker(argv, env, log))
        deadline = time.monotonic() + 120
        for proc, log in zip(procs, logs, strict=True):
            while "ready" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "bench: worker did not start: " + log.read_text()[-2000:]
                    )
                time.sleep(0.01)
        server = Server(dsn, serving=serving)
        try:
            _warm_up(server.port, bundles, server.serving.workers)
            web0 = _tree_cpu_s(server.proc.pid)
            cpu0 = sum(_tree_cpu_s(p.pid) for p in procs)
            ended0 = _ended_backends_cpu_s()
            # The backends' CPU from here: the warm-up's is not the timed one.
            pg0 = _backends_cpu()
            errors: list[str] = []
            uploads = threading.Thread(
                target=_post_all, args=(server.port, bodies, clients, errors)
            )
            t0 = time.perf_counter()
            uploads.start()
            deadline = time.monotonic() + max(120, count * 5)
            while True:
                done, failed = _done_count(ids)
                if done + failed >= count or time.monotonic() > deadline:
                    break
                if errors and not uploads.is_alive():
                    raise SystemExit(f"bench: upload refused: {errors[0]}")
                time.sleep(0.01)
            elapsed = time.perf_counter() - t0
            uploads.join()
            web_cpu = _tree_cpu_s(server.proc.pid) - web0
            worker_cpu = sum(_tree_cpu_s(p.pid) for p in procs) - cpu0
            used = _backends_cpu(pg0)
            pg_cpu, backends = sum(used.values()), len(used)
            ended_cpu = _ended_backends_cpu_s() - ended0
        finally:
            server.stop()
    finally:
        for proc in procs:
            _stop(proc)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(workdir, ignore_errors=True)
    rate = done / elapsed
    line = (
        f"ingest end to end via {broker} broker: {count} bundles of "
        f"{size / 1024:.0f} KiB ({len(bundles[0]['tests'])} tests), {clients} "
        f"uploaders, workers running: {rate:.1f} bundles/s from the first POST "
        f"to the last done ({done} done, {failed} failed in {elapsed:.1f} s); "
        f"CPU per bundle: gunicorn {web_cpu / count * 1000:.1f} ms, workers "
        f"{worker_cpu / count * 1000:.1f} ms, PostgreSQL ({backends} backends) "
        f"{pg_cpu / count * 1000:.1f} ms, ended backends (server-wide) "
        f"{ended_cpu / count * 1000:.1f} ms"
    )
    return line, rate


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
    rate = len(run_ids) / elapsed
    return (
        f"bulk INSERT ... SELECT of the same rows ({len(run_ids)} runs with "
        f"results, measurements, raw outputs): {rate:.0f} bundles/s",
        rate,
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


def run(bundles: list[dict], count: int, dsn: str, serving=None) -> list[str]:
    from bench.timing import load

    lines = []
    rates = []
    last_run, last_submission = _last_ids()
    try:
        for broker in ("filesystem", "redis"):
            line, rate = one_broker(bundles, count, dsn, broker, serving)
            lines.append(f"{line}; {load()}")
            rates.append(rate)
        floor_line, floor_rate = bulk_insert_floor(count)
        lines.append(
            f"{floor_line}; end to end at {max(rates) / floor_rate:.0%} of it "
            f"(best broker); {load()}"
        )
    finally:
        _remove_since(last_run, last_submission)
    return lines
