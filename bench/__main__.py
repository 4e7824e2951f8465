"""Speed at scale for benchdb: figures printed, never asserted.

``python -m bench --scale 10k,100k,1M`` (``make bench``):

1. stores a seed of real bundles (the agent's standard profile, run here on a
   small file) with the project's own ingest, then multiplies the seed runs in
   SQL (``INSERT ... SELECT`` over ``generate_series``, bench/data.py) until
   the results table holds each scale's number of rows;
2. at each scale, times every row in interleaved rounds, three things per
   round: the request through a real gunicorn (``--serving``), the queries
   the app sends for it (captured in-process) replayed through psycopg, and
   the hand-written SQL answering it (bench/endpoints.py; for a stored
   answer, the read of its stored rows).  Target: p95 at most 2 x the lower
   of the two SQL p95 + 5 ms.  Comparisons are timed on random run sets each
   asked once (memo hits are rows of their own); the refresh of the stored
   answers after an upload is a row of its own;
3. prints the growth of each row across scales and the targets (growth at
   most 1.5 x; pages under 300 KB), with the machine's load beside every
   figure;
4. ``--concurrency 8,32``: many clients at once under each serving model of
   ``--serving-models`` (bench/concurrency.py); ``--ingest N``: N real
   bundles end to end, workers running during the uploads, from the first
   POST to the last "done", against a bulk INSERT of the same rows
   (bench/ingest.py); ``--rss``: the peak RSS of one export, of the worker's
   full dump and of the comparison memo.

Timed tests fail on a loaded machine and pass on a fast one without saying
anything; a table of figures with the machine, date and load can be compared
by a person across commits.  It works in a throwaway database
(``benchdb_bench``) on the server ``DATABASE_URL`` names, or on the embedded
PostgreSQL, created at start and dropped at the end (``--keep`` keeps it).
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
# What serve and compose run (docker/entrypoint.sh web; bench/README.md,
# "Serving model"): sync workers, 2 x cores + 1.
DEFAULT_SERVING = f"sync:{2 * len(os.sched_getaffinity(0)) + 1}"
# The serving models --concurrency compares: today's 2 sync workers, sync
# workers from the cores (2 x cores + 1), and threads.
SERVING_MODELS = "sync:2,sync:5,gthread:2x8,gthread:5x4"


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


def measure_scale(args, dsn: str, label: str, bundles: list[dict]) -> list[dict]:
    """Every endpoint through gunicorn, the app's queries for it replayed
    and its hand-written SQL, in interleaved rounds, at the current data
    size; first the refresh of the stored answers, as a row of its own."""
    from bench import endpoints, timing

    ctx = endpoints.pick_context()
    built = endpoints.build(ctx)
    chosen = [
        ep
        for ep in built
        if not args.only or any(o.lower() in ep.name.lower() for o in args.only)
    ]
    conn, run_sql = timing.sql_timer(dsn)
    rows = []
    try:
        if args.refresh_rounds < 1:
            pass  # the stored answers as they are (stale ones are still served)
        elif not args.only or any(o.lower() in "refresh" for o in args.only):
            store_offered_setups()
            for full in (False, True):
                rows.append(measure_refresh(args, run_sql, built, bundles, label, full))
        else:
            # The stored answers of the data as it is, as the worker keeps them.
            from benchdb.results import refresh

            refresh.refresh()
        if chosen:
            server = timing.Server(dsn, serving=args.serving)
            try:
                for ep in chosen:
                    rows.append(_measure(args, server, run_sql, ep, ctx, label))
            finally:
                server.stop()
    finally:
        conn.close()
    return rows


def _row(label, name, kind, http, app, sql, **extra) -> dict:
    """A row's figures (ms) from its three timings (s; ``app`` None when
    the app's queries were not captured)."""
    from bench import timing

    def ms(values, q):
        return timing.percentile(values, q) * 1000 if values else None

    row = {
        "scale": label,
        "name": name,
        "kind": kind,
        "n": len(http),
        "p50": ms(http, 50),
        "p95": ms(http, 95),
        "app_p50": ms(app, 50),
        "app_p95": ms(app, 95),
        "sql_p50": ms(sql, 50),
        "sql_p95": ms(sql, 95),
        "load": timing.load(),
        "status": 200,
        "bytes": 0,
        "queries": None,
        "stored": 0,
        "notes": "",
        **extra,
    }
    print(format_row(row), flush=True)
    return row


# Untimed requests per web worker before a fixed row's rounds (``_measure``).
WARM_PER_WORKER = 3


def _warm(server, url: str) -> None:
    """``WARM_PER_WORKER`` bursts of as many requests at once as the server
    has workers (threads): a sync worker answers one at a time, so the
    requests of a burst land on different workers, where sequential ones
    went to whichever worker was first back at the socket, often the same."""
    from concurrent.futures import ThreadPoolExecutor

    workers = server.serving.workers * server.serving.threads
    with ThreadPoolExecutor(workers) as pool:
        for _ in range(WARM_PER_WORKER):
            list(pool.map(lambda _i: server.get(url), range(workers)))


def _measure(args, server, run_sql, ep, ctx: dict, label: str) -> dict:
    """One endpoint's row: up to ``--rounds`` rounds, each one request, the
    app's queries for it replayed, then the hand-written SQL, within
    ``--budget`` seconds."""
    from bench import timing

    if ep.random_runs:
        return _measure_random(args, server, run_sql, ep, ctx, label)
    status, size, first = server.get(ep.url)
    if first >= args.query_count_limit:
        # A stored answer the first request computed (and stored) is read by
        # the next: capture what a reader sends, not the computation.
        status, size, first = server.get(ep.url)
    if status != 200:
        print(f"  {ep.name}: GET {ep.url} answered {status}", file=sys.stderr)
    # A warm server: every worker's first asks of this address (its compiled
    # statements, its memo, the kept page read from the shared table) before
    # the rounds, as in a server that has served it a while (a worker is
    # cold again once per --max-requests, 10,000: 0.01% of its answers).
    # Untimed; the random rows, each set asked once, have none.
    _warm(server, ep.url)
    captured = timing.capture(ep.url) if first < args.query_count_limit else None
    stored = captured.stored_rows() if captured else []
    # A stored answer is held against the read of its stored row; an answer
    # the app computes from every run, against that computation's SQL.
    hand = list(ep.sql) + (stored if stored else list(ep.live_sql))
    fns = [lambda: server.get(ep.url)[2]]
    if captured:
        reads = captured.reads
        fns.append(lambda: run_sql(reads))
    fns.append(lambda: run_sql(hand))
    timed = timing.interleaved(fns, args.rounds, args.budget)
    http, sql = timed[0], timed[-1]
    app = timed[1] if captured else None
    return _row(
        label,
        ep.name,
        ep.kind,
        http,
        app,
        sql,
        url=ep.url,
        status=status,
        bytes=size,
        queries=captured.queries if captured else None,
        stored=len(stored),
        notes=ep.notes,
    )


def _measure_random(args, server, run_sql, ep, ctx: dict, label: str) -> dict:
    """A comparison row on random run sets, each asked once: every round,
    one new set through the service, the app's queries (captured once, for
    another set, computed) replayed for a second new set, and the
    hand-written SQL for a third, so none of the three reads runs another
    just read (cold result pages, as a new comparison meets them)."""
    import random

    from bench import endpoints, timing

    guests = ctx["guests"]
    rng = random.Random(args.random_seed)
    probe = endpoints.random_set(ep, guests, rng)
    captured = timing.capture(ep.url.format(runs=",".join(map(str, probe))), memo=False)
    seen = {"status": captured.status, "bytes": 0}

    def http() -> float:
        ids = endpoints.random_set(ep, guests, rng)
        status, size, seconds = server.get(ep.url.format(runs=",".join(map(str, ids))))
        if status != 200:
            seen["status"] = status
        seen["bytes"] = size
        return seconds

    def app() -> float:
        ids = endpoints.random_set(ep, guests, rng)
        same = dict(zip(probe, ids, strict=True))
        for old, new in zip(
            endpoints.baselines_of(probe, guests),
            endpoints.baselines_of(ids, guests),
            strict=True,
        ):
            if old and new and old not in same:
                same[old] = new
        return run_sql(captured.mapped(same))

    def hand() -> float:
        ids = endpoints.random_set(ep, guests, rng)
        return run_sql((ep.random_sql or endpoints._compare_sql)(ids))

    http_s, app_s, sql_s = timing.interleaved(
        [http, app, hand], -args.rounds, args.budget
    )
    return _row(
        label,
        ep.name,
        ep.kind,
        http_s,
        app_s,
        sql_s,
        url=ep.url,
        status=seen["status"],
        bytes=seen["bytes"],
        queries=captured.queries,
        notes=ep.notes,
    )


def store_offered_setups() -> int:
    """Store the reports' answers over each one-click setup the report pages
    offer (``setups_with_data``), beside the defaults: what readers ask for,
    and what an incremental refresh need not compute when an upload does not
    reach it.  Returns how many."""
    from benchdb.results import answers, reports

    stored = 0
    for question, asked in (
        ("cache", (answers.cache_mode_answers, answers.cache_mode_ranking)),
        ("overhead", (answers.overhead_answer,)),
    ):
        workload = [reports.workload_arg(w) for w in answers.workloads(question)[:1]]
        for offered in answers.setups_with_data(question) if workload else []:
            setup = {k: offered[k] for k in ("platform", "disk_type")}
            for answer in asked:
                answer(setup, workload[0])
                stored += 1
    return stored


def measure_refresh(
    args, run_sql, built, bundles, label: str, full: bool = False
) -> dict:
    """The refresh of the stored answers (results/refresh.py), as the
    worker runs it after an upload, timed in-process, round after round
    (incremental, or with ``full`` every stale answer computed, as before
    the refresh was incremental):
    one real upload (the seed bundles through ``store_bundle``: the data
    version moves), the refresh (its queries captured), its reads replayed,
    then the hand-written SQL of every stored answer computed from every
    run (the endpoints' ``live_sql``).  The uploaded runs are deleted at the
    end and the refresh run once more (untimed), so the rows that follow
    read stored answers of the data as it was."""
    from django.db import connection

    from bench import data, timing
    from benchdb.results import refresh
    from benchdb.results.models import Run

    hand = list(
        dict.fromkeys(
            (sql, tuple(params)) for ep in built for sql, params in ep.live_sql
        )
    )
    added: list[int] = []
    figures = {"answers": 0, "restamped": 0}
    statements: list = []

    def upload_and_refresh() -> float:
        added.extend(data.store_seed(bundles))
        statements.clear()

        def record(execute, sql, params, many, context):
            if not many:
                statements.append((sql, params))
            return execute(sql, params, many, context)

        t0 = time.perf_counter()
        with connection.execute_wrapper(record):
            figures.update(refresh.refresh(full=full))
        return time.perf_counter() - t0

    def replay() -> float:
        captured = timing.Captured(200, list(statements), len(statements))
        return run_sql(captured.reads)

    try:
        timed = timing.interleaved(
            [upload_and_refresh, replay, lambda: run_sql(hand)],
            -args.refresh_rounds,
            0,
        )
    finally:
        Run.objects.filter(pk__in=added).delete()
        refresh.refresh()
    return _row(
        label,
        "refresh of stored answers" + (", full" if full else ""),
        "worker",
        *timed,
        queries=len(statements),
        notes=f"after one upload; {figures['answers']} answers computed, "
        f"{figures['restamped']} stamped current",
    )


def tune_database(url: str, name: str) -> None:
    """The per-session memory settings ``embedded.postgres_settings`` gives
    this machine, for every new session on the bench database."""
    import psycopg

    from benchdb import embedded

    wanted = embedded.postgres_settings()
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        for setting in ("work_mem", "effective_cache_size", "maintenance_work_mem"):
            conn.execute(
                f"ALTER DATABASE \"{name}\" SET {setting} = '{wanted[setting]}'"
            )


def postgres_settings() -> str:
    """The memory settings of the PostgreSQL measured (one line)."""
    from django.db import connection

    names = ("shared_buffers", "effective_cache_size", "work_mem", "jit")
    with connection.cursor() as cur:
        out = []
        for name in names:
            cur.execute(f"SHOW {name}")
            out.append(f"{name}={cur.fetchone()[0]}")
    return "PostgreSQL: " + ", ".join(out)


ROWS_SAY = """\
Each row, round after round: the request through gunicorn (p50, p95); the
queries the app sends for it, captured in-process and replayed through psycopg
(app SQL p95); the hand-written SQL answering it (hand SQL p95; for a stored
answer, the read of its stored rows). target = 2 x the lower SQL p95 + 5 ms."""

# The endpoint column's width: "page compare, guest+host, memo hit".
NAME_WIDTH = 35

HEADER = (
    f"{'endpoint':<{NAME_WIDTH}} {'p50':>8} {'p95':>8} {'app SQL':>8} "
    f"{'hand SQL':>8} {'target':>7} {'':>4} {'queries':>7} {'stored':>6} "
    f"{'bytes':>10}  n  load"
)


def target_ms(row: dict) -> float:
    """2 x the better (lower) p95 of the two SQL figures + 5 ms."""
    floors = [v for v in (row["app_p95"], row["sql_p95"]) if v is not None]
    return 2 * min(floors) + 5


def _cell(value) -> str:
    return f"{value:>8.1f}" if value is not None else f"{'-':>8}"


def format_row(row: dict) -> str:
    ok = "ok" if row["p95"] <= target_ms(row) else "MISS"
    queries = "-" if row["queries"] is None else str(row["queries"])
    status = "" if row["status"] == 200 else f" HTTP {row['status']}"
    return (
        f"{row['name']:<{NAME_WIDTH}} {row['p50']:>8.1f} {row['p95']:>8.1f} "
        f"{_cell(row['app_p95'])} {_cell(row['sql_p95'])} {target_ms(row):>7.1f} "
        f"{ok:>4} {queries:>7} {row['stored'] or '-':>6} {row['bytes']:>10,}  "
        f"{row['n']}  {row['load']}{status}"
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
                f"p95<=2x min(app, hand SQL)+5ms={target_ms(b):.1f} "
                + ("ok" if b["p95"] <= target_ms(b) else "MISS")
            )
            if a and len(scales) > 1 and b["kind"] != "worker":
                notes.append(
                    "growth<=1.5x " + ("ok" if b["p95"] <= 1.5 * a["p95"] else "MISS")
                )
            if b["kind"] == "page":
                notes.append(
                    "<=300KB " + ("ok" if b["bytes"] <= 300 * 1024 else "MISS")
                )
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
    parser.add_argument(
        "--serving",
        default=DEFAULT_SERVING,
        help="gunicorn's serving model for the rows: sync:WORKERS or "
        f"gthread:WORKERSxTHREADS (default {DEFAULT_SERVING}, what serve and "
        "compose run)",
    )
    parser.add_argument(
        "--concurrency",
        help="also (or with --no-rows, only) time many clients at once: "
        "comma-separated client counts (8,32), for each --serving-models",
    )
    parser.add_argument(
        "--serving-models",
        default=SERVING_MODELS,
        help=f"with --concurrency: serving models to compare ({SERVING_MODELS})",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=10.0,
        help="with --concurrency: seconds per URL, serving model and client count",
    )
    parser.add_argument(
        "--no-rows",
        action="store_true",
        help="skip the rows (with --concurrency, --ingest or --rss)",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="set the bench database's work_mem, effective_cache_size and "
        "maintenance_work_mem to benchdb/embedded.py's values for this machine "
        "(ALTER DATABASE: on a shared server, where shared_buffers cannot be "
        "changed without a restart)",
    )
    parser.add_argument(
        "--random-seed",
        type=int,
        default=35,
        help="seed of the random run sets of the comparison rows",
    )
    parser.add_argument(
        "--refresh-rounds",
        type=int,
        default=2,
        help="rounds of the refresh row (each an upload and a full refresh); 0: "
        "no refresh row, and the stored answers are read as they are",
    )
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
    from bench import timing

    try:
        args.serving = timing.Serving.parse(args.serving)
        models = [timing.Serving.parse(m) for m in args.serving_models.split(",")]
        clients = [int(c) for c in (args.concurrency or "").split(",") if c.strip()]
    except ValueError as exc:
        parser.error(str(exc))
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
    if args.tune:
        tune_database(server, args.database)
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
                f"{c['db_bytes'] / 2**20:,.0f} MiB (generated in {seconds:.0f} s); "
                f"{timing.load()}"
            )
            print(postgres_settings())
            if not args.no_rows:
                print(ROWS_SAY)
                print(HEADER)
                all_rows += measure_scale(args, dsn, label, bundles)
            if clients:
                from bench import concurrency

                for line in concurrency.run(dsn, models, clients, args):
                    extra.append(f"{label}: {line}")
        if all_rows:
            print()
            for line in summary(all_rows, labels):
                print(line)
            print(flush=True)
        if args.rss:
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
                for line in bench_ingest.run(bundles, args.ingest, dsn, args.serving):
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
    def cell(value) -> str:
        return "-" if value is None else f"{value:.1f}"

    out = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}.",
        "",
        "| scale | row | p50 ms | p95 ms | app SQL p95 | hand SQL p95 | target "
        "| | queries | stored rows | bytes | load |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in rows:
        q = "-" if r["queries"] is None else r["queries"]
        ok = "ok" if r["p95"] <= target_ms(r) else "MISS"
        out.append(
            f"| {r['scale']} | {r['name']} | {r['p50']:.1f} | {r['p95']:.1f} | "
            f"{cell(r['app_p95'])} | {cell(r['sql_p95'])} | {target_ms(r):.1f} | "
            f"{ok} | {q} | {r['stored'] or '-'} | {r['bytes']:,} | {r['load']} |"
        )
    out += ["", "```", *lines, *extra, "```", ""]
    path.write_text("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
