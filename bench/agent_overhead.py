"""The agent's own cost over the tools it runs: ``python -m bench
--agent-overhead DIR`` runs a real quick profile on DIR and prints it.

The bundle records the wall time of every tool process the run started
(``timing.tool_s``: fio, ioping and dd, the layout, the dd probe and the
version probes; each repeat's ``tool_wall_s``).  Everything else between
starting the agent and its exit (the interpreter and imports, detection, the
safety checks, parsing, writing the bundle) is the agent's overhead:

- overhead = (wall - tools) / tools, the target at most 2%;
- wall / tools, the target at most 1.2 for a quick run;
- wall / repeats, where "repeats" counts only the kept repeats' tool time
  (not the layout, the warm-ups or the probes): what the run is for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OVERHEAD_TARGET = 0.02
WALL_TARGET = 1.2


def measure(target: str, profile: str = "quick", pyz: str | None = None) -> dict:
    """Run the agent once on ``target`` and return its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bundle.json"
        agent = (
            [sys.executable, pyz] if pyz else [sys.executable, "-m", "benchdb_agent"]
        )
        cmd = [*agent, "run", "--target", target, "--profile", profile]
        started = time.perf_counter()
        done = subprocess.run(
            [*cmd, "--out", str(out)], capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(
                f"the agent failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        doc = json.loads(out.read_text())
    figures = figures_of(doc, wall)
    figures["command"] = " ".join(cmd[:3] if pyz else cmd[1:3])
    return figures


def figures_of(doc: dict, wall: float) -> dict:
    """The overhead figures of a bundle whose agent took ``wall`` seconds."""
    timing = doc.get("timing") or {}
    tools = timing.get("tool_s")
    if not tools:
        raise SystemExit("the bundle has no timing.tool_s: an agent before issue 29?")
    repeats = sum(r["tool_wall_s"] for t in doc["tests"] for r in t["repeats"])
    return {
        "profile": doc["suite"]["profile"],
        "wall_s": wall,
        "tool_s": tools,
        "tool_processes": timing.get("tool_processes"),
        "run_s": timing.get("run_s"),
        "repeats_s": repeats,
        "overhead": (wall - tools) / tools,
        "wall_over_tools": wall / tools,
        "wall_over_repeats": wall / repeats,
    }


def report(m: dict) -> list[str]:
    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISS"

    outside = m["wall_s"] - m["run_s"]
    overhead_ok = verdict(m["overhead"] <= OVERHEAD_TARGET)
    return [
        f"agent overhead, {m['profile']} profile ({m['command']}):",
        f"  wall {m['wall_s']:.2f} s; tool processes {m['tool_s']:.2f} s "
        f"({m['tool_processes']}); kept repeats {m['repeats_s']:.2f} s",
        f"  agent's own time {m['wall_s'] - m['tool_s']:.2f} s: "
        f"{m['run_s'] - m['tool_s']:.2f} s inside the run (detection, checks, "
        f"parsing), {outside:.2f} s outside it (start, imports, bundle written)",
        f"  overhead ratio (wall - tools) / tools: {m['overhead']:.2%}  "
        f"(target <= {OVERHEAD_TARGET:.0%}: {overhead_ok})",
        f"  wall / tools: {m['wall_over_tools']:.3f}  (target <= {WALL_TARGET}: "
        f"{verdict(m['wall_over_tools'] <= WALL_TARGET)}); wall / kept repeats: "
        f"{m['wall_over_repeats']:.3f}",
    ]
