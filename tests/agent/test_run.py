"""benchdb-agent run with the real fio, ioping and dd on a small file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from benchdb_agent import bundle, suite

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(bundle.SCHEMA_PATH.read_text())
SHORT = [
    "--size",
    "16M",
    "--runtime",
    "1",
    "--repeats",
    "2",
    "--max-repeats",
    "3",
    "--ioping-count",
    "3",
]


@pytest.fixture(scope="module")
def quick_bundle(agent, tmp_path_factory):
    """The quick profile, shortened, from the checkout and from the .pyz."""
    target = tmp_path_factory.mktemp("target")
    out = tmp_path_factory.mktemp("out") / "bundle.json"
    proc = agent(
        "run",
        "--target",
        str(target),
        "--profile",
        "quick",
        *SHORT,
        "--tag",
        "cache_mode=none",
        "--tag",
        "storage_backend=lvm",
        "--pair",
        "p-1",
        "--out",
        str(out),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return target, json.loads(out.read_text()), proc.stderr


def test_quick_profile_bundle_is_valid_and_complete(quick_bundle):
    target, doc, _log = quick_bundle
    jsonschema.validate(doc, SCHEMA)
    assert bundle.validate(doc) == []
    ids = [t["test_id"] for t in doc["tests"]]
    assert ids == [t["test_id"] for t in suite.tests_for("quick")]
    assert doc["pair_id"] == "p-1" and doc["tags"]["storage_backend"] == "lvm"
    for test in doc["tests"]:
        assert test["warmup_discarded"] is True
        assert 2 <= len(test["repeats"]) <= 3
        assert test["extra_repeats"] == len(test["repeats"]) - 2
        assert test["comparability_key"].startswith(
            "benchdb-standard/1|" + test["test_id"]
        )
        for rep in test["repeats"]:
            (rec,) = [r for r in rep["records"] if r["direction"] == test["direction"]]
            main = rec["bw_bytes"] if test["tool"] == "dd" else rec["iops"]
            assert main > 0
            # The raw output re-parses to the same records (the server's check).
            from benchdb_agent import parsers

            text = bundle.decode_raw(rep["raw"])
            again = parsers.parse(
                text, rep["raw"]["format"], direction=test["direction"]
            )
            assert again["records"] == rep["records"]
    # What the run was set to do, and that each test finished.
    assert doc["partial"] is False and doc["stop_reason"] is None
    assert doc["not_run"] == [] and doc["buffered"] is False
    assert doc["plan"]["runtime_s"] == 1 and doc["plan"]["repeats"] == 2
    assert doc["plan"]["size_choice"].startswith("set with --size")
    assert doc["preconditioning"]["done"] is True
    for test in doc["tests"]:
        assert test["status"] == "complete" and test["buffered"] is False
        assert test["preconditioned"] is (test["tool"] != "dd")
        assert test["cv"] is None or test["cv"] >= 0
    assert "load" in doc["environment"]
    # Test files are gone, the small-file warning is there.
    assert list(target.iterdir()) == []
    codes = {w["code"] for w in doc["warnings"]}
    assert "small-test-file" in codes


def test_the_end_of_a_run_is_a_table_for_people(quick_bundle):
    _target, doc, log = quick_bundle
    table = log[log.index("test ") :]
    for test in doc["tests"]:
        assert test["title"] in table
    assert "MB/s" in table and "IOPS" in table and "CV" in table


def test_progress_is_plain_lines_off_a_terminal(quick_bundle):
    _target, doc, log = quick_bundle
    assert "[1/" in log and "\r" not in log
    assert "fio-rand-read-4k-q32t1 repeat 1" in log


def tool_processes(marker: str, also: str = "", agent_pid: int = 0) -> list:
    """PIDs of live processes whose command line mentions ``marker`` (and
    ``also``), but the agent's own (``agent_pid``; from a .pyz its command
    line holds the target too)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == agent_pid:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if (
            marker in cmdline
            and also in cmdline
            and state != "Z"
            and "benchdb_agent" not in cmdline
        ):
            out.append(int(entry.name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_the_agent_alone_stops_fio_and_keeps_a_partial_bundle(
    agent, tmp_path, sig
):
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "partial.json"
    proc = subprocess.Popen(
        [
            *agent.argv,
            "run",
            "--target",
            str(target),
            "--size",
            "16M",
            "--runtime",
            "3",
            "--repeats",
            "1",
            "--max-repeats",
            "1",
            "--test",
            "fio-seq-read-1m-q1t1",
            "--test",
            "fio-rand-read-4k-q1t1",
            "--test",
            "fio-rand-write-4k-q1t1",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until fio's measuring job (not the layout) runs on our file.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = tool_processes(str(target), "fio-rand-read", proc.pid)
        if running:
            break
        time.sleep(0.1)
    assert running, "fio never started its test"
    time.sleep(0.5)
    os.kill(proc.pid, sig)  # the agent's PID alone, not its group
    _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 4, stderr
    # No fio (or ioping, dd) survives, and the test files are gone.
    assert tool_processes(str(target)) == []
    assert list(target.iterdir()) == []
    # The finished test is kept, the interrupted one is marked, the rest named.
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    jsonschema.validate(doc, SCHEMA)
    name = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}.get(sig, "SIGINT")
    assert doc["partial"] is True and name in doc["stop_reason"]
    statuses = {t["test_id"]: t["status"] for t in doc["tests"]}
    assert statuses["fio-seq-read-1m-q1t1"] == "complete"
    assert "fio-rand-read-4k-q1t1" not in statuses or (
        statuses["fio-rand-read-4k-q1t1"] == "partial"
    )
    not_run = {t["test_id"]: t for t in doc["not_run"]}
    assert not_run["fio-rand-write-4k-q1t1"]["status"] == "not-run"
    assert name in not_run["fio-rand-write-4k-q1t1"]["error"]
    assert "partial-run" in {w["code"] for w in doc["warnings"]}
    assert "PARTIAL" in stderr and str(out) in stderr


def test_tmpfs_target_is_refused_not_measured(agent, tmp_path):
    shm = Path("/dev/shm")
    target = shm / f"benchdb-test-{os.getpid()}"
    target.mkdir()
    try:
        out = tmp_path / "b.json"
        proc = agent("run", "--target", str(target), *SHORT, "--out", str(out))
        assert proc.returncode == 1
        assert "tmpfs" in proc.stderr and "not disk figures" in proc.stderr
        assert not out.exists()
        assert list(target.iterdir()) == []
    finally:
        target.rmdir()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "cache_mode=fast"], "is not one of"),
        (["--tag", "colour=red"], "unknown tag"),
        (["--tag", "novalue"], "expected key=value"),
        (["--repeats", "0"], "at least 1"),
        (["--size", "lots"], "not a size"),
        (["--pair", "bad pair!"], "--pair"),
        (["--profile", "huge"], "invalid choice"),
    ],
)
def test_bad_flags_exit_2_with_a_reason(agent, tmp_path, args, message):
    proc = agent("run", "--target", str(tmp_path), *args, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert list(tmp_path.iterdir()) == []
