"""What the harness's page rows cost in the web process, in-process.

    .venv/bin/python -m bench.profile_pages --database benchdb_bench_pages \
        [--requests 30] [--only "page home"] [--profile "page home"] [--top 30]

On a bench database seeded with ``--keep`` (``python -m bench``), each page
row of the harness (home, browse, the two reports, the comparisons) is asked
``--requests`` times through Django's test client as an anonymous visitor,
the rows interleaved request by request (a shared machine's load moves them
alike); the random comparisons get a new random set each time (seeded: the
same sets on every run of this script), the memo hit the same pair.
Printed per row: this process's CPU per request (``time.process_time``:
the query building, rows, templates and middleware; PostgreSQL's own work is
not in it), median and lowest, in ms; the wall time the queries took
(execute to last row fetched) and their number.  ``--profile ROW``: cProfile
of that row's requests with a CPU clock (sorted by cumulative then own
time; it inflates small functions several times).  Nothing is written.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ROWS = {
    "page home": "/",
    "page browse /runs/": "/runs/",
    "page browse, filtered": (
        "/runs/?cache_mode=none&cache_mode=writeback&disk_type=hdd"
    ),
    "page cache-mode report": "/reports/cache-modes/",
    "page overhead report": "/reports/overhead/",
    "page compare, 10 random runs": "/compare/?runs={ten}",
    "page compare, guest+host, random": "/compare/?runs={pair}",
    "page compare, guest+host, memo hit": "/compare/?runs={hot}",
}


def _guests() -> dict[int, int | None]:
    """Listed guests and their listed host (or None), as the harness picks
    its random sets."""
    from benchdb.results.models import Run

    listed = Run.objects.listed()
    hosts = set(listed.filter(role="host").values_list("pk", flat=True))
    return {
        pk: (baseline if baseline in hosts else None)
        for pk, baseline in listed.filter(role="guest")
        .order_by("pk")
        .values_list("pk", "baseline_id")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_pages")
    parser.add_argument("--database", required=True, help="a kept bench database")
    parser.add_argument("--requests", type=int, default=30, help="per row")
    parser.add_argument("--only", action="append", help="row names (repeatable)")
    parser.add_argument("--profile", help="the row to profile")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    os.environ["DB_CONN_MAX_AGE"] = "600"
    from bench.__main__ import server_url, with_database

    os.environ["DATABASE_URL"] = with_database(server_url(), args.database)
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    guests = _guests()
    paired = [g for g, h in guests.items() if h]
    rng = random.Random(args.seed)
    hot = paired[0]
    names = [n for n in ROWS if not args.only or any(o in n for o in args.only)]

    def url(name: str) -> str:
        pair = rng.choice(paired)
        return ROWS[name].format(
            ten=",".join(map(str, rng.sample(sorted(guests), 10))),
            pair=f"{pair},{guests[pair]}",
            hot=f"{hot},{guests[hot]}",
        )

    sql = {"s": 0.0, "n": 0}

    def timed(execute, query, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(query, params, many, context)
        finally:
            sql["s"] += time.perf_counter() - t0
            sql["n"] += 1

    client = Client()
    for name in names:  # warm: imports, templates, the memo's hot pair
        for _ in range(2):
            assert client.get(url(name)).status_code == 200, name
    gc.freeze()
    cpu = {n: [] for n in names}
    db = {n: [] for n in names}
    count = {}
    profile = cProfile.Profile(time.process_time) if args.profile else None
    with connection.execute_wrapper(timed):
        for _ in range(args.requests):
            for name in names:
                address = url(name)
                sql["s"], sql["n"] = 0.0, 0
                on = profile is not None and args.profile in name
                if on:
                    profile.enable()
                t0 = time.process_time()
                response = client.get(address)
                b"".join(response) if response.streaming else response.content
                cpu[name].append(time.process_time() - t0)
                if on:
                    profile.disable()
                assert response.status_code == 200, (address, response.status_code)
                db[name].append(sql["s"])
                count[name] = sql["n"]
    print(f"{'row':<38} {'CPU med':>8} {'lowest':>8} {'SQL med':>8} {'queries':>7}")
    for name in names:
        print(
            f"{name:<38} {statistics.median(cpu[name]) * 1000:8.2f} "
            f"{min(cpu[name]) * 1000:8.2f} "
            f"{statistics.median(db[name]) * 1000:8.2f} {count[name]:7d}"
        )
    # The ingest profile's print (cumulative, then own time).
    from bench.profile_ingest import _report

    _report(profile, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
