"""Where an upload's CPU goes: the submission view and the worker's ingest
task, in-process, on the bench's seed bundles.

    .venv/bin/python -m bench.profile_ingest [--count 40] [--profile] [--top 30]

The seed bundles are the bench's (``bench/data.py``, cached in
``var/bench/seeds``).  Each copy (a new bundle id, as ``bench/ingest.py``
sends it) is POSTed to ``/api/v1/submissions/`` through Django's test client
with the broker left out (the message is not sent: this times the request),
then stored by the ingest task, called in this process (its refresh
message is sent to the broker as a worker's would be).  Printed: CPU
milliseconds per bundle of each half (``time.process_time``, this process
only; the mean and the median) and PostgreSQL's (the CPU of the session's
backend, from /proc where the server runs on this machine: the process
keeps one connection, ``DB_CONN_MAX_AGE``, so a new connection's start is
in neither), and with ``--profile`` the functions that took it (cProfile
with a CPU clock, sorted by cumulative then by own time; its overhead
inflates small functions several times).  It works in its own database
(``--database``), created at start and dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import sys
import time
import uuid
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


def _bodies(bundles: list[dict], count: int) -> list[bytes]:
    out = []
    for i in range(count):
        bundle = dict(bundles[i % len(bundles)])
        bundle["bundle_id"] = str(uuid.uuid4())
        bundle["pair_id"] = None
        out.append(json.dumps(bundle).encode())
    return out


def _median_ms(seconds: list[float]) -> float:
    """The median in ms: on a shared machine, less moved by the others' load
    (and by this process's rare collections) than the mean."""
    return statistics.median(seconds) * 1000


def _backend_ms(connection) -> float:
    """CPU ms the session's PostgreSQL backend has used (0 if not local)."""
    from bench.ingest import _cpu_s

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return _cpu_s(cursor.fetchone()[0]) * 1000


def _report(profile: cProfile.Profile | None, top: int) -> None:
    if profile is not None:
        stats = pstats.Stats(profile, stream=sys.stdout)
        stats.strip_dirs().sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_ingest")
    parser.add_argument("--count", type=int, default=40, help="bundles to send")
    parser.add_argument("--profile", action="store_true", help="print cProfile")
    parser.add_argument("--top", type=int, default=30, help="functions printed")
    parser.add_argument("--seed", default="standard", choices=["standard", "quick"])
    parser.add_argument("--database", default="benchdb_bench_profile")
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="no cyclic garbage collection at all (to see the collector's share)",
    )
    args = parser.parse_args(argv)
    if args.no_gc:
        gc.disable()

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    os.environ["SUBMISSION_THROTTLE"] = "100000000/hour"
    # One session for every request and task: its backend's CPU is
    # PostgreSQL's share (a connection per request would end with each).
    os.environ["DB_CONN_MAX_AGE"] = "600"
    from bench.__main__ import recreate_database, server_url, with_database

    server = server_url()
    recreate_database(server, args.database)
    os.environ["DATABASE_URL"] = with_database(server, args.database)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections
        from django.test import Client

        from bench import data
        from benchdb.results import tasks
        from benchdb.results.models import Submission

        call_command("migrate", verbosity=0)
        bundles = data.seed_bundles(args.seed)
        bodies = _bodies(bundles, args.count)
        size = sum(map(len, bodies)) / len(bodies)
        client = Client()
        # A warm worker: the first request imports and compiles what it needs.
        warm = _bodies(bundles, 2)
        with mock.patch("benchdb.api.views.enqueue", return_value=True):
            for body in warm:
                client.post(
                    "/api/v1/submissions/", body, content_type="application/json"
                )
            # What start-up made kept out of the collector's full passes, as
            # the web (benchdb/wsgi.py) and worker (benchdb/celery.py)
            # processes do once they have imported everything.
            gc.freeze()
            profile = cProfile.Profile(time.process_time) if args.profile else None
            pg0 = _backend_ms(connections["default"])
            t0 = time.process_time()
            if profile:
                profile.enable()
            api_each = []
            for body in bodies:
                t1 = time.process_time()
                response = client.post(
                    "/api/v1/submissions/", body, content_type="application/json"
                )
                api_each.append(time.process_time() - t1)
                if response.status_code != 202:
                    raise SystemExit(
                        f"refused: {response.status_code} {response.content[:500]!r}"
                    )
            if profile:
                profile.disable()
            api_ms = (time.process_time() - t0) / len(bodies) * 1000
            api_pg = (_backend_ms(connections["default"]) - pg0) / len(bodies)
        print(
            f"API: {len(bodies)} bundles of {size / 1024:.0f} KiB, "
            f"{api_ms:.1f} ms CPU per bundle (this process; median "
            f"{_median_ms(api_each):.1f} ms); PostgreSQL {api_pg:.1f} ms"
        )
        _report(profile, args.top)

        subs = list(Submission.objects.order_by("pk").values_list("pk", flat=True))
        for pk in subs[: len(warm)]:
            tasks.ingest(pk)
        subs = subs[len(warm) :]
        profile = cProfile.Profile(time.process_time) if args.profile else None
        pg0 = _backend_ms(connections["default"])
        t0 = time.process_time()
        if profile:
            profile.enable()
        store_each = []
        for pk in subs:
            t1 = time.process_time()
            tasks.ingest(pk)
            store_each.append(time.process_time() - t1)
        if profile:
            profile.disable()
        store_ms = (time.process_time() - t0) / len(subs) * 1000
        store_pg = (_backend_ms(connections["default"]) - pg0) / len(subs)
        done = Submission.objects.filter(
            pk__in=subs, status=Submission.Status.DONE
        ).count()
        print(
            f"worker: the ingest task of {len(subs)} submissions ({done} done), "
            f"{store_ms:.1f} ms CPU per bundle (this process; median "
            f"{_median_ms(store_each):.1f} ms); PostgreSQL {store_pg:.1f} ms"
        )
        _report(profile, args.top)
        connections.close_all()
    finally:
        recreate_database(server, args.database, drop_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
