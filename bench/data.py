"""Realistic data at scale: real bundles through ingest, multiplied in SQL.

A *seed* is a few real standard-profile bundles measured on this machine by
the agent itself (``benchdb-agent run --profile standard`` on a small file,
cached under ``var/bench/seeds``), stored with the project's own
``store_bundle``.  Each scale step then copies the seed runs with
``INSERT ... SELECT`` over ``generate_series``: every copy keeps the seed's
test ids, comparability keys, statistics JSON, environment JSON and per-repeat
measurements, and differs where production rows differ (cache mode, storage,
platform, bus, hardware, visibility, upload time, pairing), with the seed's
figures multiplied by one factor per copied run (0.6-1.4), so distributions
are not degenerate.  Copies carry no raw outputs (the seeds do).

The ``*_mean`` columns and the measurements are scaled; the statistics JSON
is the seed's (pages showing it show the seed's spread, which is realistic in
size and shape, not in value).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_DIR = ROOT / "var" / "bench" / "seeds"

AIO = ["native", "io_uring", "threads"]
STORAGE = ["zfs", "lvm-thin", "file", "ceph-rbd", "lvm", "nfs"]
PLATFORM = ["proxmox", "libvirt", "qemu", "xcp-ng", "esxi"]
BUS = ["virtio-scsi", "virtio-blk", "sata", "nvme"]
IMAGE = ["raw", "qcow2"]
DISK_TYPES = ["nvme-ssd", "sata-ssd", "hdd"]
HARDWARE_ROWS = 1000


def seed_bundles(profile: str, runtime: int = 1) -> list[dict]:
    """A host and a guest bundle from real agent runs (cached per profile)."""
    SEED_DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for role in ("host", "guest"):
        path = SEED_DIR / f"{profile}-{role}.json"
        if not path.exists():
            print(f"  seed: benchdb-agent run --profile {profile} --role {role} ...")
            with tempfile.TemporaryDirectory(prefix="benchdb-bench-") as target:
                cmd = [
                    sys.executable,
                    "-m",
                    "benchdb_agent",
                    "run",
                    "--profile",
                    profile,
                    "--target",
                    target,
                    "--runtime",
                    str(runtime),
                    "--size",
                    "16m",
                    "--ioping-count",
                    "3",
                    "--role",
                    role,
                    "--pair",
                    "bench-seed",
                    "--out",
                    str(path) + ".tmp",
                ]
                if role == "guest":
                    cmd += ["--tag", "cache_mode=none", "--tag", "storage_backend=zfs"]
                else:
                    # A machine that is itself a VM measures a marked host.
                    cmd.append("--allow-virtual-host")
                subprocess.run(
                    cmd,
                    check=True,
                    stdout=subprocess.DEVNULL,
                    env={**os.environ, "PYTHONPATH": f"{ROOT / 'agent'}:{ROOT}"},
                )
            os.replace(str(path) + ".tmp", path)
        doc = json.loads(path.read_text())
        # The bench times pages of a paired guest and host: the seed host
        # stands in for a bare-metal one (its figures are only multiplied).
        doc.pop("virtual_host", None)
        out.append(doc)
    return out


def factory_bundles() -> list[dict]:
    """Tiny real-fio bundles from the test factories (for the smoke test)."""
    from tests.api.factories import FioRuns, make_bundle

    workdir = Path(tempfile.mkdtemp(prefix="benchdb-bench-"))
    fio = FioRuns(workdir)
    tests = ("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1")
    bundles = [
        make_bundle(fio, tests=tests, role="host", pair_id="bench-seed"),
        make_bundle(
            fio, tests=tests, pair_id="bench-seed", tags={"cache_mode": "none"}
        ),
    ]
    for leftover in workdir.iterdir():
        leftover.unlink()
    workdir.rmdir()
    return bundles


def store_seed(bundles: list[dict]) -> list[int]:
    """The seed bundles through the project's own ingest; their run ids."""
    import copy
    import uuid

    from benchdb.results.ingest import store_bundle

    ids = []
    for bundle in bundles:
        bundle = copy.deepcopy(bundle)
        bundle["bundle_id"] = str(uuid.uuid4())
        ids.append(store_bundle(bundle).pk)
    return ids


def _columns(model) -> list[str]:
    return [f.column for f in model._meta.concrete_fields]


def _insert_select(table: str, columns: list[str], overrides: dict, source: str):
    cols = ", ".join(f'"{c}"' for c in columns)
    exprs = ", ".join(overrides.get(c, f's."{c}"') for c in columns)
    return f"INSERT INTO {table} ({cols}) SELECT {exprs} {source}"


def create_hardware(cursor) -> None:
    """HARDWARE_ROWS hardware descriptions over 200 disk and 50 CPU models."""
    cursor.execute(
        "INSERT INTO results_diskmodel (name) SELECT 'Bench disk model ' || g "
        "FROM generate_series(1, 200) g ON CONFLICT DO NOTHING"
    )
    cursor.execute(
        "INSERT INTO results_cpumodel (name) SELECT 'Bench CPU model ' || g "
        "FROM generate_series(1, 50) g ON CONFLICT DO NOTHING"
    )
    cursor.execute(
        """
        INSERT INTO results_hardware (fingerprint, cpu_model_id, cpu_sockets,
            cpu_cores, cpu_threads, memory_bytes, disk_model_id, disk_type,
            disk_count, disk_size_bytes, raid_controller, raid_level,
            controller_cache_bytes, controller_battery)
        SELECT md5('bench-hw-' || g),
            (SELECT id FROM results_cpumodel
              WHERE name = 'Bench CPU model ' || (1 + g %% 50)),
            1, 4 + 4 * (g %% 8), 8 + 8 * (g %% 8), (16 + 16 * (g %% 16))::bigint << 30,
            (SELECT id FROM results_diskmodel
              WHERE name = 'Bench disk model ' || (1 + g %% 200)),
            (%(types)s::text[])[1 + g %% 3], 1 + g %% 4, (1 + g %% 8)::bigint << 40,
            '', CASE WHEN g %% 4 = 0 THEN 'raid10' ELSE 'none' END, NULL, NULL
        FROM generate_series(1, %(n)s) g
        ON CONFLICT (fingerprint) DO NOTHING
        """,
        {"types": DISK_TYPES, "n": HARDWARE_ROWS},
    )


def multiply(seed_ids: list[int], copies: int, first_k: int) -> float:
    """``copies`` more copies of every seed run (copy numbers from first_k).

    Returns the seconds it took.  Foreign-key triggers are off while loading
    (``session_replication_role = replica``): every id is taken from the
    tables' own sequences in this transaction, so the rows are consistent.
    """
    from django.db import connection, transaction

    from benchdb.results.models import Measurement, Result, Run

    start = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL session_replication_role = replica")
        cur.execute("SET LOCAL synchronous_commit = off")
        cur.execute(
            "CREATE TEMP TABLE bench_hw ON COMMIT DROP AS SELECT "
            "row_number() OVER (ORDER BY id) - 1 AS idx, id FROM results_hardware"
        )
        cur.execute("SELECT count(*) FROM bench_hw")
        hw_count = cur.fetchone()[0]
        cur.execute(
            """
            CREATE TEMP TABLE bench_map ON COMMIT DROP AS
            SELECT nextval(pg_get_serial_sequence('results_run', 'id')) AS run_id,
                   s.id AS seed_id, s.role AS role, g AS k,
                   0.6 + 0.8 * random() AS factor
            FROM generate_series(%s, %s) g
            CROSS JOIN results_run s WHERE s.id = ANY(%s)
            """,
            [first_k, first_k + copies - 1, seed_ids],
        )
        cur.execute("CREATE INDEX ON bench_map (seed_id)")
        guest = "CASE WHEN s.role = 'guest' THEN {} ELSE s.\"{}\" END"

        # Copies come in groups of five (g = k / 5) that differ only in cache
        # mode, as people measure them: the cache-mode report finds them.
        def pick(values: list[str], step: int) -> str:
            arr = "ARRAY[" + ", ".join(f"'{v}'" for v in values) + "]"
            return f"({arr})[1 + (m.k / 5 / {step}) % {len(values)}]"

        run_over = {
            "id": "m.run_id",
            "uuid": "gen_random_uuid()",
            "title": "''",
            "cache_mode": guest.format(
                "(ARRAY['none', 'writeback', 'writethrough', 'directsync', "
                "'unsafe'])[1 + m.k % 5]",
                "cache_mode",
            ),
            "aio_mode": guest.format(pick(AIO, 1), "aio_mode"),
            "storage_backend": guest.format(pick(STORAGE, 3), "storage_backend"),
            "disk_bus": guest.format(pick(BUS, 7), "disk_bus"),
            "image_format": guest.format(pick(IMAGE, 11), "image_format"),
            "platform": pick(PLATFORM, 13),
            "hardware_id": (
                f"(SELECT id FROM bench_hw WHERE idx = (m.k / 5) % {hw_count})"
            ),
            "pair_id": "'bench-' || m.k",
            "baseline_id": "NULL",
            "owner_id": "NULL",
            "owner_key_hash": "''",
            "created": "now() - m.k * interval '97 seconds'",
            "updated": "now() - m.k * interval '97 seconds'",
            "ran_at": "now() - m.k * interval '97 seconds' - interval '5 minutes'",
            "visibility": (
                "CASE WHEN m.k % 53 = 0 THEN 'unlisted' "
                "WHEN m.k % 97 = 0 THEN 'private' ELSE 'public' END"
            ),
            "hidden": "m.k % 499 = 0",
            "hidden_reason": "CASE WHEN m.k % 499 = 0 THEN 'bench: hidden' ELSE '' END",
            "suspect": "m.k % 41 = 0",
            "suspect_reasons": (
                "CASE WHEN m.k % 41 = 0 THEN '[\"bench: flagged\"]'::jsonb "
                "ELSE '[]'::jsonb END"
            ),
        }
        cur.execute(
            _insert_select(
                "results_run",
                _columns(Run),
                run_over,
                "FROM bench_map m JOIN results_run s ON s.id = m.seed_id",
            )
        )
        # Guests point at the host copy with the same copy number.
        cur.execute(
            """
            UPDATE results_run g SET baseline_id = h.run_id
            FROM bench_map gm JOIN bench_map h ON h.k = gm.k AND h.role = 'host'
            WHERE gm.role = 'guest' AND g.id = gm.run_id
            """
        )
        cur.execute(
            """
            CREATE TEMP TABLE bench_rmap ON COMMIT DROP AS
            SELECT nextval(pg_get_serial_sequence('results_result', 'id'))
                       AS result_id,
                   m.run_id, r.id AS seed_result_id, m.factor
            FROM bench_map m JOIN results_result r ON r.run_id = m.seed_id
            """
        )
        result_over = {
            "id": "m.result_id",
            "run_id": "m.run_id",
            "iops_mean": "s.iops_mean * m.factor",
            "bw_bytes_mean": "s.bw_bytes_mean * m.factor",
            "lat_mean_ns_mean": "s.lat_mean_ns_mean / m.factor",
            # A copy's values are its seed's, and so are those of its
            # baseline (the host copy with the same copy number): the seed's
            # stored overhead, against the copy's own baseline.
            "overhead": (
                "jsonb_set(s.overhead, '{baseline}', to_jsonb(c.baseline_id))"
            ),
        }
        cur.execute(
            _insert_select(
                "results_result",
                _columns(Result),
                result_over,
                "FROM bench_rmap m JOIN results_result s ON s.id = m.seed_result_id "
                "JOIN results_run c ON c.id = m.run_id",
            )
        )
        scaled_up = {"iops", "bw_bytes", "io_bytes"}
        scaled_down = {"runtime_s"}
        m_over = {"result_id": "m.result_id"}
        for column in _columns(Measurement):
            if column in scaled_up:
                m_over[column] = f's."{column}" * m.factor'
            elif column.endswith("_ns") or column in scaled_down:
                m_over[column] = f's."{column}" / m.factor'
        columns = [c for c in _columns(Measurement) if c != "id"]
        cur.execute(
            _insert_select(
                "results_measurement",
                columns,
                m_over,
                "FROM bench_rmap m JOIN results_measurement s "
                "ON s.result_id = m.seed_result_id",
            )
        )
    with connection.cursor() as cur:
        for table in (
            "results_run",
            "results_result",
            "results_measurement",
            "results_hardware",
        ):
            cur.execute(f"VACUUM (ANALYZE) {table}")
    return time.perf_counter() - start


def counts() -> dict:
    from django.db import connection

    with connection.cursor() as cur:
        out = {}
        for table in ("results_run", "results_result", "results_measurement"):
            cur.execute(f"SELECT count(*) FROM {table}")
            out[table.split("_", 1)[1]] = cur.fetchone()[0]
        cur.execute("SELECT pg_database_size(current_database())")
        out["db_bytes"] = cur.fetchone()[0]
    return out


def grow_to(seed_ids: list[int], results_target: int, first_k: int) -> tuple:
    """Copy seed runs until the results table holds ``results_target`` rows.

    Returns (next copy number, seconds spent).
    """
    from benchdb.results.models import Result

    per_copy = Result.objects.filter(run_id__in=seed_ids).count()
    have = Result.objects.count()
    if have >= results_target:
        return first_k, 0.0
    copies = -(-(results_target - have) // per_copy)
    seconds = multiply(seed_ids, copies, first_k)
    return first_k + copies, seconds
