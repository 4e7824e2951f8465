"""Where the refresh after one upload goes, answer by answer, in-process.

    .venv/bin/python -m bench.profile_refresh --database benchdb_bench_refresh \
        [--setup] [--rounds 1] [--cold] [--full] [--benchdb DIR]

On a database the harness kept (``python -m bench --scale 100k --keep
--database benchdb_bench_refresh``), each round stores the seed bundles once
more (one upload: the seed host and guest, ``bench.data.store_seed``), then
times ``refresh.refresh()``: wall and this process's CPU
(``time.process_time``; PostgreSQL's own CPU is not in it), and the same per
answer (each ``_bring_up``: computed, or stamped current), with the
posteriors' draw sets and their lengths (``across._posteriors``).  The
uploaded runs are kept: the next round's upload lands on the same system.

``--setup``: first store the answers over the report pages' offered setups
(what the harness's refresh row stores) and bring everything up to the data.
``--cold``: the kept posteriors deleted before each refresh (every posterior
drawn).  ``--benchdb DIR``: import ``benchdb`` from another checkout (DIR
holds its ``benchdb/``), to time the code before a change beside it after,
interleaved, on the same database.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="a database bench kept")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--setup", action="store_true")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--full", action="store_true", help="refresh(full=True)")
    parser.add_argument("--benchdb", help="a checkout whose benchdb/ is imported")
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    if args.benchdb:
        sys.path.insert(0, str(Path(args.benchdb).resolve()))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    from bench.__main__ import server_url, with_database

    os.environ["DATABASE_URL"] = with_database(server_url(), args.database)
    import django

    django.setup()
    from django.db import connection

    from bench import data
    from bench.__main__ import store_offered_setups
    from benchdb.results import across, refresh

    print(f"benchdb from {Path(refresh.__file__).parent.parent}")
    bundles = data.seed_bundles("standard")
    if args.setup:
        print(f"offered setups' answers stored: {store_offered_setups()}")
        refresh.refresh()

    per_answer: dict = defaultdict(lambda: [0, 0.0, 0.0])
    draws: list[tuple[int, int, float]] = []
    bring_up, posteriors = refresh._bring_up, across._posteriors

    def timed_bring_up(answer, name, answer_args, full, out):
        before = len(out["recomputed"])
        wall, cpu = time.perf_counter(), time.process_time()
        bring_up(answer, name, answer_args, full, out)
        entry = per_answer[
            (name, "computed" if len(out["recomputed"]) > before else "stamped")
        ]
        entry[0] += 1
        entry[1] += time.perf_counter() - wall
        entry[2] += time.process_time() - cpu

    def timed_posteriors(vectors, *rest):
        cpu = time.process_time()
        try:
            return posteriors(vectors, *rest)
        finally:
            draws.append((vectors[0].size, len(vectors), time.process_time() - cpu))

    refresh._bring_up, across._posteriors = timed_bring_up, timed_posteriors
    for r in range(args.rounds):
        data.store_seed(bundles)
        if args.cold:
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM results_posterior")
        per_answer.clear()
        draws.clear()
        load = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        out = refresh.refresh(full=args.full)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"round {r}: wall {wall:.2f} s, CPU {cpu:.2f} s, {out['answers']} "
            f"computed, {out['restamped']} stamped current, load {load:.2f}; "
            f"posteriors: {len(draws)} draw sets, "
            f"{sum(d[2] for d in draws):.2f} s CPU, (length, vectors) "
            f"{[d[:2] for d in draws]}"
        )
        for (name, what), (n, w, c) in sorted(
            per_answer.items(), key=lambda kv: -kv[1][1]
        ):
            print(f"  {name:28} {what:8} x{n:<3} wall {w:7.2f} s  CPU {c:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
