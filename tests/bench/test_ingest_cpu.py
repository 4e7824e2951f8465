"""``bench --ingest`` counts the CPU of worker processes that ended during
the timing: a Celery pool process is replaced after ``--max-tasks-per-child``
tasks and a web worker after ``--max-requests``, and what they used is the
uploads' cost too (before, it was left out, and a run of 200 bundles showed
the workers at 3 ms a bundle)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from bench import ingest as bench_ingest

# A parent that starts a child burning about half a second of CPU, waits for
# it (so its CPU moves to the parent's "reaped" count), then waits for stdin.
PARENT = textwrap.dedent(
    """
    import subprocess, sys
    burn = (
        "import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 0.5: pass"
    )
    subprocess.run([sys.executable, "-c", burn], check=True)
    print("reaped", flush=True)
    sys.stdin.read()
    """
)


def test_a_tree_counts_the_children_that_ended():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout.readline().strip() == "reaped"
        own = bench_ingest._cpu_s(parent.pid)
        with_ended = bench_ingest._cpu_s(parent.pid, reaped=True)
        tree = bench_ingest._tree_cpu_s(parent.pid)
        # The child's half second is in the tree's count, not in the
        # parent's own.
        assert with_ended - own >= 0.4
        assert tree >= with_ended - 0.05
        assert own < 0.4
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)


def test_a_process_gone_counts_nothing():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    assert bench_ingest._cpu_s(proc.pid) == 0.0
    assert bench_ingest._cpu_s(proc.pid, reaped=True) == 0.0
