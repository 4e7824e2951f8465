"""The bench harness at a tiny scale: every endpoint answers and is printed
with its three timings, and many clients at once are timed.

The figures themselves are not asserted (they depend on the machine); this
only proves ``make bench`` runs end to end: seed through ingest, SQL
multiplication, gunicorn, the app's queries captured and replayed, the
hand-written SQL, the refresh's row, the summary and ``--concurrency``.
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
            "--refresh-rounds",
            "1",
            "--concurrency",
            "2",
            "--duration",
            "0.2",
            "--serving-models",
            "sync:1,gthread:1x2",
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
    assert "app SQL hand SQL  target" in out
    ctx = {
        "guest": 1,
        "host": 2,
        "disk_type": "hdd",
        "compare": list(range(10)),
        "test_id": "x",
        "key": "x",
        "page": 2,
        "guests": {1: 2},
    }
    built = endpoints.build(ctx)
    names = [ep.name for ep in built]
    # Comparisons on random sets each asked once, and memo hits apart.
    assert any(ep.random_runs for ep in built)
    assert any("memo hit" in name for name in names)
    summary = out.split(" growth  targets at ")[-1]
    for name in ["refresh of stored answers", *names]:
        lines = [
            line
            for line in out.splitlines()
            if line[: bench_main.NAME_WIDTH].rstrip() == name
        ]
        # One row per scale, one in the summary; every answer a 200.
        assert len(lines) == 3, (name, out)
        assert not any("HTTP " in line for line in lines), lines
        assert name in summary
        for row in lines[:2]:
            # p50, p95, the app's queries replayed, the hand-written SQL and
            # the target: five figures in ms, then ok or MISS.
            cells = row[bench_main.NAME_WIDTH :].split()
            assert all(float(cell) >= 0 for cell in cells[:5]), row
            assert cells[5] in ("ok", "MISS"), row
    # Many clients at once: every URL at c=2 under both serving models.
    for model in ("sync:1", "gthread:1x2"):
        for url in ("browse /runs/", "run page", "API run list", "API compare"):
            assert any(
                line.startswith(model)
                and url in line
                and "c=2" in line
                and "errors 0" in line
                for line in out.splitlines()
            ), (model, url, out[-3000:])
