"""Where an API request's CPU goes: the harness's API rows, in-process.

    DATABASE_URL=postgres://.../benchdb_bench_api \\
        .venv/bin/python -m bench.profile_api [--only NAME] [--count 40]
        [--profile NAME] [--queries] [--tree PATH]

Each API row of the harness (``bench/endpoints.py``, on a database the
harness seeded and kept: ``python -m bench --scale 100k --keep --database
benchdb_bench_api --refresh-rounds 0 --only "API aggregates"``) is asked
through Django's test client in this process, ``--count`` times after two
warm-up requests; random comparisons get a new random run set each time.
Printed per row: CPU milliseconds per request (``time.process_time``, this
process only: Python's cost, not PostgreSQL's), the median and the lowest
quartile, and the queries of one request.  ``--profile NAME``: cProfile (a
CPU clock) of that row's requests, sorted by cumulative then own time;
``--queries``: the SQL of one request of each row.

``--tree PATH`` runs another checkout's code (its ``benchdb`` first on the
path) over the same database, so two trees can be measured in turn,
interleaved: ``for i in 1 2; do (cd ../main && python -m bench.profile_api
...); python -m bench.profile_api ...; done`` from each tree, or
``--tree`` with one tree's script.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_api")
    parser.add_argument("--only", action="append", default=[], help="row names")
    parser.add_argument("--count", type=int, default=40, help="requests per row")
    parser.add_argument("--profile", default="", help="cProfile this row")
    parser.add_argument("--top", type=int, default=35, help="functions printed")
    parser.add_argument("--queries", action="store_true", help="print the SQL")
    parser.add_argument("--tree", default="", help="another checkout's code")
    parser.add_argument("--random-seed", type=int, default=1)
    args = parser.parse_args(argv)

    tree = Path(args.tree).resolve() if args.tree else ROOT
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    from bench.endpoints import build, pick_context, random_set

    ctx = pick_context()
    rng = random.Random(args.random_seed)
    rows = [e for e in build(ctx) if e.kind in ("api", "export")]
    rows = [e for e in rows if e.name.startswith("API")]
    if args.only:
        rows = [e for e in rows if any(o in e.name for o in args.only)]
    client = Client()

    def url_of(ep) -> str:
        if ep.random_runs:
            ids = random_set(ep, ctx["guests"], rng)
            return ep.url.format(runs=",".join(map(str, ids)))
        return ep.url

    print(f"tree: {tree}  load: {os.getloadavg()[0]:.1f}")
    print(f"{'row':<34} {'CPU ms p50':>10} {'p25':>7} {'queries':>8}")
    for ep in rows:
        for _ in range(2):
            client.get(url_of(ep))
        captured: list[str] = []

        def record(execute, sql, params, many, context, captured=captured):
            captured.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            response = client.get(url_of(ep))
        assert response.status_code == 200, (ep.name, response.status_code)
        profile = cProfile.Profile(time.process_time) if args.profile else None
        spent = []
        for _ in range(args.count):
            url = url_of(ep)
            profiling = profile is not None and args.profile in ep.name
            start = time.process_time()
            if profiling:
                profile.enable()
            response = client.get(url)
            b"".join(response) if response.streaming else response.content
            if profiling:
                profile.disable()
            spent.append(time.process_time() - start)
        q1 = statistics.quantiles(spent, n=4)[0] * 1000
        med = statistics.median(spent) * 1000
        print(f"{ep.name:<34} {med:>10.2f} {q1:>7.2f} {len(captured):>8}")
        if args.queries:
            for sql in captured:
                print("   ", sql[:3000])
        if profile is not None and args.profile in ep.name:
            stats = pstats.Stats(profile, stream=sys.stdout)
            stats.strip_dirs().sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
