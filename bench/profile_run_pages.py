"""Random run pages in-process: CPU, wall and SQL per request.

    DATABASE_URL=<a kept bench database> BENCHDB_PAGE_MEMO=0 \\
        python -m bench.profile_run_pages [--pages 8] [--rounds 3]

Eight random listed guest runs with hardware (``random.Random(7)``), each
page asked once to warm it (the first visit computes the stored answers it
reads: its ranks' points), then ``--rounds`` times each, timed by
``time.process_time`` (this process's CPU: the load beside it does not
count), ``perf_counter`` and the SQL's own times.  Prints the medians, the
load average and the last page's rank as shown.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_run_pages")
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from benchdb.results.models import Run

    ids = list(
        Run.objects.listed()
        .filter(role="guest")
        .exclude(hardware=None)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    picked = random.Random(7).sample(ids, min(args.pages, len(ids)))
    client = Client()
    start = time.monotonic()
    for pk in picked:
        assert client.get(f"/runs/{pk}/").status_code == 200
    print(f"warm visits (computing stored answers): {time.monotonic() - start:.1f} s")
    cpu, wall, sql = [], [], []
    for _ in range(args.rounds):
        for pk in picked:
            with CaptureQueriesContext(connection) as queries:
                c0, w0 = time.process_time(), time.perf_counter()
                page = client.get(f"/runs/{pk}/")
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
            assert page.status_code == 200
            sql.append(sum(float(q["time"]) for q in queries.captured_queries))
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print(
        f"{len(ids)} listed guests with hardware; median CPU {ms(cpu):.1f} ms "
        f"(max {max(cpu) * 1000:.1f}), wall {ms(wall):.1f} ms, SQL {ms(sql):.1f} ms; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    rank = re.search(
        r'class="rank">([^<]*)</strong> of <span class="among">([^<]*)',
        page.content.decode(),
    )
    print("last page's rank:", " of ".join(rank.groups()) if rank else "none shown")


if __name__ == "__main__":
    main()
