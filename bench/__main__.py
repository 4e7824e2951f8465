"""Speed and memory figures for benchdb: printed, never asserted.

Timed tests fail on a loaded machine and pass on a fast one without saying
anything; a table of figures with the machine they came from can be compared
by a person across commits.  ``python -m bench`` (``make bench``) measures:

- parser throughput: every real tool output under tests/samples, parsed by the
  agent's parsers (the server re-parses the same way at ingest);
- ingest: N bundles built from real fio runs on this machine (tiny files),
  stored with ``store_bundle`` as the ingest task does, in runs/s;
- comparison: ``build_comparison`` over K runs;
- pages and API: the home page, a run page and the runs API through the
  Django test client, with N runs in the database.

Peak RSS is the process's high-water mark (``resource.getrusage``) after each
step.  It works in a throwaway database (``benchdb_bench``) on the server
``DATABASE_URL`` names, or on the embedded PostgreSQL, created at start and
dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
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


def make_bundles(count: int, repeats: int) -> list[dict]:
    """Bundles whose repeats are real fio outputs from this machine."""
    from tests.api.factories import FioRuns, make_bundle

    tests = ("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1")
    workdir = Path(tempfile.mkdtemp(prefix="benchdb-bench-"))
    fio = FioRuns(workdir)
    bundles = []
    for index in range(count):
        speed = "fast" if index % 2 == 0 else "slow"
        bundles.append(make_bundle(fio, tests=tests, speed=speed, repeats=repeats))
    for leftover in workdir.iterdir():
        leftover.unlink()
    workdir.rmdir()
    return bundles


def bench_ingest(bundles: list[dict]) -> list[tuple]:
    from django.db import transaction

    from benchdb.results.ingest import store_bundle

    durations = []
    start = time.perf_counter()
    for bundle in bundles:
        t0 = time.perf_counter()
        with transaction.atomic():
            store_bundle(bundle)
        durations.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    tests = len(bundles[0]["tests"])
    repeats = len(bundles[0]["tests"][0]["repeats"])
    return [
        (
            f"ingest {len(bundles)} bundles",
            len(bundles) / elapsed,
            "runs/s",
            f"{tests} tests x {repeats} repeats; median "
            f"{statistics.median(durations) * 1000:.1f} ms/run",
        )
    ]


def bench_compare(k: int, rounds: int) -> list[tuple]:
    from benchdb.results.compare import build_comparison
    from benchdb.results.models import Run

    runs = list(Run.objects.order_by("id")[:k])
    start = time.perf_counter()
    for _ in range(rounds):
        comparison = build_comparison(runs)
    elapsed = (time.perf_counter() - start) / rounds
    shared = len(comparison.get("tests") or comparison.get("rows") or [])
    return [
        (
            f"compare {len(runs)} runs",
            elapsed * 1000,
            "ms",
            f"{shared} shared tests, {rounds} rounds",
        )
    ]


def bench_pages(rounds: int) -> list[tuple]:
    from django.test import Client

    from benchdb.results.models import Run

    client = Client()
    run = Run.objects.order_by("id").first()
    count = Run.objects.count()
    rows = []
    for label, url in (
        ("home page", "/"),
        ("run page", f"/runs/{run.pk}/"),
        ("API run list", "/api/v1/runs/"),
        ("API run detail", f"/api/v1/runs/{run.pk}/"),
    ):
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"bench: GET {url} answered {response.status_code}")
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - t0)
        rows.append(
            (
                f"{label} ({count} runs)",
                statistics.median(times) * 1000,
                "ms",
                f"median of {rounds}, {len(response.content) / 1024:.0f} KiB",
            )
        )
    return rows


def print_table(rows: list[tuple]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'figure':>12}  {'unit':<10}  {'peak RSS':>9}  note")
    for what, figure, unit, note, rss in rows:
        print(f"{what:<{width}}  {figure:>12,.1f}  {unit:<10}  {rss:>6.0f} MiB  {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="bundles to ingest")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per test")
    parser.add_argument("--compare", type=int, default=10, help="runs to compare")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per timing")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.compare < 1 or args.repeats < 1 or args.rounds < 1:
        parser.error("--runs, --repeats, --compare and --rounds must be at least 1")

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )
    rows = []

    def add(new_rows):
        rss = peak_rss_mib()
        rows.extend((*row, rss) for row in new_rows)

    add(bench_parsers(args.rounds))
    add(bench_large_fio(args.rounds))

    server = server_url()
    recreate_database(server, BENCH_DATABASE)
    os.environ["DATABASE_URL"] = with_database(server, BENCH_DATABASE)
    try:
        import django
        from django.core.management import call_command

        # STATIC_ROOT is only filled by collectstatic; the pages need no files.
        warnings.filterwarnings("ignore", message="No directory at")
        django.setup()
        call_command("migrate", verbosity=0)
        print(f"running fio for {args.runs} bundles' worth of real outputs ...")
        bundles = make_bundles(args.runs, args.repeats)
        add(bench_ingest(bundles))
        del bundles
        add(bench_compare(args.compare, args.rounds))
        add(bench_pages(args.rounds))
    finally:
        from django.db import connections

        connections.close_all()
        recreate_database(server, BENCH_DATABASE, drop_only=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
