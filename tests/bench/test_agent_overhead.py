"""bench --agent-overhead's figures come from the bundle's tool timings and
the wall time around the agent (a real run of the agent, timed here)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from bench import agent_overhead


def test_the_overhead_is_the_wall_time_the_tools_did_not_take(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    out = tmp_path / "b.json"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "benchdb_agent", "run", "--target", str(target),
         "--test", "fio-rand-read-4k-q1t1", "--size", "16M", "--runtime", "1",
         "--repeats", "2", "--out", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    wall = time.perf_counter() - started
    doc = json.loads(out.read_text())
    m = agent_overhead.figures_of(doc, wall)
    tools = doc["timing"]["tool_s"]
    assert m["overhead"] == (wall - tools) / tools > 0
    assert m["wall_over_tools"] == wall / tools > 1
    (test,) = doc["tests"]
    assert m["repeats_s"] == sum(r["tool_wall_s"] for r in test["repeats"])
    assert m["repeats_s"] < tools < doc["timing"]["run_s"] < wall
    m["command"] = "python -m benchdb_agent"
    lines = agent_overhead.report(m)
    assert f"{m['overhead']:.2%}" in lines[3] and "target <= 2%" in lines[3]
