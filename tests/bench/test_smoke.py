"""The bench harness at a tiny scale: every endpoint answers and is printed.

The figures themselves are not asserted (they depend on the machine); this
only proves ``make bench`` runs end to end: seed through ingest, SQL
multiplication, gunicorn, the SQL baselines and the summary.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_harness_prints_every_endpoint_at_two_tiny_scales():
    from django.conf import settings

    from bench import __main__ as bench_main
    from bench import endpoints
    from benchdb import embedded

    database = f"benchdb_smoke_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": embedded.database_url(settings.DATABASES["default"]),
        "PYTHONPATH": f"{ROOT / 'agent'}:{ROOT}",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--seed",
            "factories",
            "--scale",
            "40,80",
            "--rounds",
            "1",
            "--budget",
            "0.01",
            "--database",
            database,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "== 40 results" in out and "== 80 results" in out
    ctx = {
        "guest": 1,
        "host": 2,
        "disk_type": "hdd",
        "compare": list(range(10)),
        "test_id": "x",
        "key": "x",
        "page": 2,
    }
    built = endpoints.build(ctx)
    names = [ep.name for ep in built]
    # Comparisons are timed again on a server that keeps none computed.
    kept = [f"{ep.name}, computed" for ep in built if ep.kept]
    assert kept
    summary = out.split(" growth  targets at ")[-1]
    for name in names + kept:
        lines = [
            line
            for line in out.splitlines()
            if line[: bench_main.NAME_WIDTH].rstrip() == name
        ]
        # One row per scale, one in the summary; every answer a 200.
        assert len(lines) == 3, (name, out)
        assert not any("HTTP " in line for line in lines), lines
        assert name in summary
