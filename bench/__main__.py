"""Speed at scale for benchdb: figures printed, never asserted.

``python -m bench --scale 10k,100k,1M`` (``make bench``):

1. stores a seed of real bundles (the agent's standard profile, run here on a
   small file) with the project's own ingest, then multiplies the seed runs in
   SQL (``INSERT ... SELECT`` over ``generate_series``, bench/data.py) until
   the results table holds each scale's number of rows;
2. at each scale, times every API endpoint and page through a real gunicorn
   (2 workers) against the same database, and the hand-written SQL giving
   the same answer (bench/endpoints.py) in the same run: p50, p95, their
   ratio, queries per request (in-process) and response bytes;
3. prints the growth of each answer across scales and the targets (p95 at
   most 2 x SQL + 5 ms; at most 3 x the smallest scale's; pages under 300 KB;
   compare of 10 runs under 100 ms);
4. with ``--rss``, the peak RSS of one export and of the worker's full dump,
   and the memory of the comparison memo filled past its budget,
   each in a fresh process; with ``--ingest N``, N real bundles end to end
   through a Celery worker against a bulk INSERT of the same rows.

Timed tests fail on a loaded machine and pass on a fast one without saying
anything; a table of figures with the machine and date can be compared by a
person across commits.  It works in a throwaway database (``benchdb_bench``)
on the server ``DATABASE_URL`` names, or on the embedded PostgreSQL, created
at start and dropped at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "samples"
BENCH_DATABASE = "benchdb_bench"


def peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def server_url() -> str:
    """DATABASE_URL, or the embedded PostgreSQL's (started if need be)."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from benchdb import embedded

    return embedded.database_url(embedded.database_settings())


def recreate_database(url: str, name: str, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def bench_parsers(rounds: int) -> list[tuple]:
    """(what, figure, unit, note) rows: records/s per format over the samples."""
    from benchdb_agent import parsers

    by_format: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(SAMPLES.rglob("*")):
        if not path.is_file() or path.suffix in (".md", ".sh"):
            continue
        text = path.read_text(errors="replace")
        fmt = parsers.detect_format(text)
        if fmt is None:
            continue
        try:
            parsers.parse(text, fmt, source=path.name)
        except parsers.ParseError:
            continue  # deliberately truncated or foreign samples
        by_format.setdefault(fmt, []).append((path.name, text))
    rows = []
    for fmt, samples in sorted(by_format.items()):
        size = sum(len(text.encode()) for _, text in samples)
        records = 0
        start = time.perf_counter()
        for _ in range(rounds):
            for name, text in samples:
                records += len(parsers.parse(text, fmt, source=name)["records"])
        elapsed = time.perf_counter() - start
        rows.append(
            (
                f"parse {fmt}",
                records / elapsed,
                "records/s",
                f"{len(samples)} samples, {size * rounds / elapsed / 1e6:.1f} MB/s",
            )
        )
    return rows


def bench_large_fio(rounds: int) -> list[tuple]:
    """One large real fio JSON: 64 jobs without group reporting, json+ bins."""
    import shutil
    import subprocess

    from benchdb_agent import parsers

    fio = shutil.which("fio")
    if fio is None:
        raise SystemExit("bench: fio is not installed (make test installs it)")
    with tempfile.TemporaryDirectory(prefix="benchdb-bench-") as workdir:
        done = subprocess.run(
            [
                fio,
                "--name=large",
                f"--directory={workdir}",
                "--rw=randread",
                "--bs=4k",
                "--size=64k",
                "--numjobs=64",
                "--ioengine=psync",
                "--output-format=json+",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
    text = done.stdout
    records = 0
    start = time.perf_counter()
    for _ in range(rounds):
        records += len(parsers.parse(text, "fio-json", source="large")["records"])
    elapsed = time.perf_counter() - start
    size = len(text.encode())
    return [
        (
            "parse fio-json, 64 jobs",
            records / elapsed,
            "records/s",
            f"one {size / 1e6:.1f} MB json+ output, {size * rounds / elapsed / 1e6:.1f}"
            " MB/s",
        )
    ]


def parse_scale(text: str) -> int:
    """10k, 100k, 1M, 2.5M or a plain number of results."""
    text = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    number = text[:-1] if factor != 1 else text
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a scale") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a scale is at least 1 result")
    return value


def human_count(n: int) -> str:
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def measure_scale(args, dsn: str, label: str) -> list[dict]:
    """Every endpoint through gunicorn and its SQL, at the current data size.

    Comparisons are kept computed per web process (``compare._MEMO``): their
    rows time what a comparison asked again costs, and a second gunicorn
    that keeps none (``BENCHDB_COMPARISON_MEMO=0``) times the same URLs as
    each is computed, in rows named ``..., computed``."""
    from bench import endpoints, timing

    ctx = endpoints.pick_context()
    chosen = [
        ep
        for ep in endpoints.build(ctx)
        if not args.only or any(o.lower() in ep.name.lower() for o in args.only)
    ]
    conn, run_sql = timing.sql_timer(dsn)
    rows = []
    try:
        server = timing.Server(dsn, workers=args.workers)
        try:
            for ep in chosen:
                rows.append(_measure(args, server, run_sql, ep, label, ep.name))
        finally:
            server.stop()
        kept = [ep for ep in chosen if ep.kept]
        if kept:
            server = timing.Server(
                dsn, workers=args.workers, env={"BENCHDB_COMPARISON_MEMO": "0"}
            )
            try:
                for ep in kept:
                    name = f"{ep.name}, computed"
                    rows.append(_measure(args, server, run_sql, ep, label, name))
            finally:
                server.stop()
    finally:
        conn.close()
    return rows


def _measure(args, server, run_sql, ep, label: str, name: str) -> dict:
    """One endpoint's row: its first request, then up to ``--rounds``
    requests and as many of its SQL within ``--budget`` seconds each."""
    from bench import timing

    status, size, first = server.get(ep.url)
    if status != 200:
        print(f"  {name}: GET {ep.url} answered {status}", file=sys.stderr)
    service = timing.sample(lambda: server.get(ep.url)[2], args.rounds, args.budget)
    sql = timing.sample(lambda: run_sql(ep.sql), args.rounds, args.budget)
    p50 = timing.percentile(service, 50)
    queries = (
        timing.count_queries(ep.url, server.env)
        if p50 < args.query_count_limit
        else None
    )
    row = {
        "scale": label,
        "name": name,
        "kind": ep.kind,
        "url": ep.url,
        "status": status,
        "bytes": size,
        "queries": queries,
        "n": len(service),
        "p50": p50 * 1000,
        "p95": timing.percentile(service, 95) * 1000,
        "sql_p50": timing.percentile(sql, 50) * 1000,
        "sql_p95": timing.percentile(sql, 95) * 1000,
        "notes": ep.notes,
    }
    print(format_row(row), flush=True)
    if ep.stored or ep.kept:
        # The first request: for a stored answer, the stored row (or, for
        # arguments the refresh does not precompute, its live cost); for a
        # kept comparison, its computation in the worker that took it.
        print(f"{'':<{NAME_WIDTH}} first request {first * 1000:.1f} ms", flush=True)
    return row


def refresh_summaries(label: str) -> str:
    """The worker's refresh of the stored answers (results/refresh.py), timed
    in-process: after the data grew, as after a burst of uploads."""
    from django.db import connection

    from benchdb.results import refresh

    result = refresh.refresh()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*), coalesce(max(seconds), 0), "
            "coalesce(sum(octet_length(answer)), 0) FROM results_answersummary"
        )
        stored, slowest, size = cur.fetchone()
    line = (
        f"refresh of stored answers at {label} (worker): {result['answers']} "
        f"computed in {result['seconds']:.2f} s (slowest {slowest:.2f} s); "
        f"{stored} stored, {size / 1024:,.0f} KiB"
    )
    print(line, flush=True)
    return line


# The endpoint column's width: "page compare, guest+host, computed".
NAME_WIDTH = 35


HEADER = (
    f"{'endpoint':<{NAME_WIDTH}} {'p50':>9} {'p95':>9} {'SQL p95':>8} {'ratio':>6} "
    f"{'target':>7} {'queries':>7} {'bytes':>10}  n"
)


def target_ms(row: dict) -> float:
    return 2 * row["sql_p95"] + 5


def format_row(row: dict) -> str:
    ratio = row["p95"] / row["sql_p95"] if row["sql_p95"] else float("inf")
    ok = "ok" if row["p95"] <= target_ms(row) else "MISS"
    queries = "-" if row["queries"] is None else str(row["queries"])
    status = "" if row["status"] == 200 else f" HTTP {row['status']}"
    return (
        f"{row['name']:<{NAME_WIDTH}} {row['p50']:>9.1f} {row['p95']:>9.1f} "
        f"{row['sql_p95']:>8.1f} {ratio:>5.1f}x {ok:>7} {queries:>7} "
        f"{row['bytes']:>10,}  {row['n']}{status}"
    )


def summary(all_rows: list[dict], scales: list[str]) -> list[str]:
    """Growth and targets across scales, as lines of text."""
    lines = []
    names = list(dict.fromkeys(r["name"] for r in all_rows))
    by = {(r["scale"], r["name"]): r for r in all_rows}
    first, last = scales[0], scales[-1]
    head = f"{'endpoint':<{NAME_WIDTH}}" + "".join(f" {s + ' p95':>12}" for s in scales)
    lines.append(head + f" {'growth':>7}  targets at {last}")
    for name in names:
        cells = []
        for s in scales:
            r = by.get((s, name))
            cells.append(f" {r['p95']:>12.1f}" if r else f" {'-':>12}")
        a, b = by.get((first, name)), by.get((last, name))
        growth = f"{b['p95'] / a['p95']:>6.1f}x" if a and b and a["p95"] else "      -"
        notes = []
        if b:
            notes.append(
                "p95<=2xSQL+5ms " + ("ok" if b["p95"] <= target_ms(b) else "MISS")
            )
            if a and len(scales) > 1:
                notes.append(
                    "growth<=3x " + ("ok" if b["p95"] <= 3 * a["p95"] else "MISS")
                )
            if b["kind"] == "page":
                notes.append(
                    "<=300KB " + ("ok" if b["bytes"] <= 300 * 1024 else "MISS")
                )
            if "compare, 10" in name and b["kind"] == "api":
                notes.append("<100ms " + ("ok" if b["p95"] < 100 else "MISS"))
        lines.append(
            f"{name:<{NAME_WIDTH}}" + "".join(cells) + f" {growth}  " + ", ".join(notes)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--scale",
        default="10k,100k,1M",
        help="result counts to measure at, comma-separated (10k,100k,1M; 5M ...)",
    )
    parser.add_argument(
        "--seed",
        choices=["standard", "quick", "factories"],
        default="standard",
        help="seed bundles: the agent's standard or quick profile run here on a "
        "small file (cached in var/bench/seeds), or the tests' tiny fio bundles",
    )
    parser.add_argument("--rounds", type=int, default=20, help="requests per timing")
    parser.add_argument(
        "--budget", type=float, default=8.0, help="seconds per timing (min 3 rounds)"
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument(
        "--only", action="append", help="only endpoints whose name contains this"
    )
    parser.add_argument(
        "--query-count-limit",
        type=float,
        default=5.0,
        help="count queries in-process only for answers faster than this (s)",
    )
    parser.add_argument(
        "--ingest", type=int, default=0, help="also time N bundles through a worker"
    )
    parser.add_argument("--rss", action="store_true", help="peak RSS of exports")
    parser.add_argument("--parsers", action="store_true", help="parser throughput")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure a database kept by --keep (migrated, grown if need be)",
    )
    parser.add_argument("--database", default=BENCH_DATABASE)
    parser.add_argument("--markdown", help="also write the figures to this file")
    parser.add_argument(
        "--agent-overhead",
        metavar="DIR",
        help="only run a real quick profile of the agent on DIR and print its "
        "overhead over the tools (bench/agent_overhead.py); no database",
    )
    parser.add_argument(
        "--agent-pyz", metavar="FILE", help="with --agent-overhead: run this .pyz"
    )
    args = parser.parse_args(argv)
    if args.agent_overhead:
        from bench import agent_overhead

        figures = agent_overhead.measure(args.agent_overhead, pyz=args.agent_pyz)
        print("\n".join(agent_overhead.report(figures)))
        return 0
    scales = sorted({parse_scale(s) for s in args.scale.split(",") if s.strip()})
    if args.rounds < 1 or args.budget <= 0:
        parser.error("--rounds and --budget must be positive")

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    machine = (
        f"{platform.node()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print(f"machine: {machine}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if args.parsers:
        rows = []
        for row in bench_parsers(args.rounds) + bench_large_fio(args.rounds):
            rows.append(row)
            print(f"{row[0]:<30} {row[1]:>12,.1f} {row[2]:<10} {row[3]}")

    from bench import data

    server = server_url()
    if not args.reuse:
        recreate_database(server, args.database)
    dsn = with_database(server, args.database)
    os.environ["DATABASE_URL"] = dsn
    all_rows: list[dict] = []
    labels: list[str] = []
    extra: list[str] = []
    try:
        import django
        from django.core.management import call_command
        from django.db import connection

        warnings.filterwarnings("ignore", message="No directory at")
        django.setup()
        call_command("migrate", verbosity=0)
        if args.seed == "factories":
            bundles = data.factory_bundles()
        else:
            bundles = data.seed_bundles(args.seed)
        from benchdb.results.models import Run

        if args.reuse and Run.objects.exists():
            # The seed runs were stored first; copies come in pairs.
            seed_ids = list(
                Run.objects.order_by("id").values_list("id", flat=True)[: len(bundles)]
            )
            next_k = (Run.objects.count() - len(bundles)) // len(bundles) + 1
            with connection.cursor() as cur:
                for table in ("results_run", "results_result"):
                    cur.execute(f"VACUUM (ANALYZE) {table}")
            print(f"reusing {args.database}: seed runs {seed_ids}")
        else:
            t0 = time.perf_counter()
            seed_ids = data.store_seed(bundles)
            seed_s = time.perf_counter() - t0
            with connection.cursor() as cur:
                data.create_hardware(cur)
            tests = sum(len(b["tests"]) for b in bundles)
            print(
                f"seed: {len(bundles)} real {args.seed} bundles ({tests} tests) "
                f"through store_bundle in {seed_s:.2f} s"
            )
            next_k = 1
        for scale in scales:
            next_k, seconds = data.grow_to(seed_ids, scale, next_k)
            c = data.counts()
            label = human_count(scale)
            labels.append(label)
            print(
                f"\n== {label} results: {c['run']:,} runs, {c['result']:,} results, "
                f"{c['measurement']:,} measurements, database "
                f"{c['db_bytes'] / 2**20:,.0f} MiB (generated in {seconds:.0f} s)"
            )
            line = refresh_summaries(label)
            extra.append(line)
            print(HEADER)
            all_rows += measure_scale(args, dsn, label)
        if all_rows:
            print()
            for line in summary(all_rows, labels):
                print(line)
            print(flush=True)
        if args.rss:
            from bench import timing

            for what, label in (
                ("/api/v1/runs/export/?format=csv", "export CSV page, in-process"),
                ("/api/v1/runs/export/?format=json", "export JSON page, in-process"),
                ("dump", "public dump (worker task), CSV+JSONL gzip"),
            ):
                r = timing.export_rss(dsn, what)
                if "error" in r:
                    line = f"peak RSS {label}: failed {r['error']}"
                else:
                    line = (
                        f"peak RSS {label}: {r['peak_kib'] / 1024:.0f} MiB "
                        f"(after start-up {r['before_kib'] / 1024:.0f} MiB), "
                        f"{r['bytes']:,} bytes in {r['seconds']:.1f} s"
                    )
                print(line)
                extra.append(line)
            r = timing.memo_rss(dsn)
            if "error" in r:
                line = f"comparison memo: failed {r['error']}"
            else:
                line = (
                    f"comparison memo: {r['built']} 10-run comparisons built, "
                    f"{r['kept']} kept ({r['figures']:,} of {r['budget']:,} "
                    f"figures), {r['evicted']} evicted; {r['traced_kib'] / 1024:.1f} "
                    f"MiB traced, RSS {r['rss_before_kib'] / 1024:.0f} -> "
                    f"{r['rss_after_kib'] / 1024:.0f} MiB"
                )
            print(line)
            extra.append(line)
        if args.ingest:
            from bench import ingest as bench_ingest

            try:
                for line in bench_ingest.run(bundles, args.ingest, dsn):
                    print(line)
                    extra.append(line)
            except SystemExit as exc:
                extra.append(f"ingest: {exc}")
                print(extra[-1])
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            recreate_database(server, args.database, drop_only=True)
    lines = summary(all_rows, labels) if all_rows else []
    if args.markdown:
        write_markdown(Path(args.markdown), machine, all_rows, lines, extra)
    return 0


def write_markdown(path: Path, machine: str, rows, lines, extra) -> None:
    out = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}.",
        "",
        "| scale | endpoint | p50 ms | p95 ms | SQL p95 ms | ratio | queries | bytes |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r["p95"] / r["sql_p95"] if r["sql_p95"] else 0
        q = "-" if r["queries"] is None else r["queries"]
        out.append(
            f"| {r['scale']} | {r['name']} | {r['p50']:.1f} | {r['p95']:.1f} | "
            f"{r['sql_p95']:.1f} | {ratio:.1f}x | {q} | {r['bytes']:,} |"
        )
    out += ["", "```", *lines, *extra, "```", ""]
    path.write_text("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
