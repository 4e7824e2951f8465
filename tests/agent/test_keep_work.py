"""No finished test is lost: a failing tool is recorded with its error while
the others stand; an unusable dd is reported before the run; a device is
preconditioned for real (or the bundle says it was not); an unstable test is
flagged with its spread."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchdb_agent import bundle, runner, suite

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
AGENT = [sys.executable, "-m", "benchdb_agent"]
TINY = ["--size", "8M", "--runtime", "1", "--repeats", "1", "--max-repeats", "1"]


def run_agent(*args, env=None, timeout=300):
    return subprocess.run(
        [*AGENT, "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def path_with(tmp_path: Path, name: str, script: str | None = None, link=None):
    """A PATH whose first folder holds ``name``: a script, or a link."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    if link:
        tool.symlink_to(link)
    else:
        tool.write_text(script)
        tool.chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


def test_a_failing_tool_is_recorded_and_the_others_stand(tmp_path):
    # The real ioping, given an option it refuses: it fails as a broken or
    # incompatible ioping would, mid-run, after fio has finished.
    real = shutil.which("ioping")
    env = path_with(tmp_path, "ioping", f'#!/bin/sh\nexec {real} -Z "$@"\n')
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "b.json"
    proc = run_agent(
        "--target", str(target), *TINY,
        "--test", "fio-rand-read-4k-q1t1",
        "--test", "ioping-read-4k",
        "--test", "dd-write-1m-fdatasync",
        "--out", str(out),
        env=env,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    assert [t["test_id"] for t in doc["tests"]] == [
        "fio-rand-read-4k-q1t1",
        "dd-write-1m-fdatasync",
    ]
    assert all(t["status"] == "complete" for t in doc["tests"])
    (failed,) = doc["not_run"]
    assert failed["test_id"] == "ioping-read-4k" and failed["status"] == "failed"
    assert "ioping failed (exit" in failed["error"]
    assert doc["partial"] is True and "1 of 3 tests failed" in doc["stop_reason"]
    codes = [(w["code"], w.get("test_id")) for w in doc["warnings"]]
    assert ("test-failed", "ioping-read-4k") in codes
    assert list(target.iterdir()) == []
    # The table names the failure too.
    assert "failed: ioping failed" in proc.stderr


@pytest.mark.skipif(not shutil.which("busybox"), reason="busybox not installed")
def test_busybox_dd_is_reported_unusable_before_the_run(tmp_path):
    env = path_with(tmp_path, "dd", link=shutil.which("busybox"))
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "b.json"
    proc = run_agent(
        "--target", str(target), *TINY,
        "--test", "fio-rand-read-4k-q1t1",
        "--test", "dd-write-1m-fdatasync",
        "--out", str(out),
        env=env,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    said = proc.stderr
    assert "dd is unusable here" in said
    assert said.index("dd is unusable here") < said.index("[1/")  # before the run
    doc = json.loads(out.read_text())
    assert [t["test_id"] for t in doc["tests"]] == ["fio-rand-read-4k-q1t1"]
    (nr,) = doc["not_run"]
    assert nr["test_id"] == "dd-write-1m-fdatasync" and nr["status"] == "failed"
    assert "statistics line" in nr["error"]
    assert "tool-unusable" in {w["code"] for w in doc["warnings"]}


def blank_image(tmp_path, size=48 * 2**20):
    img = tmp_path / "disk.img"
    with open(img, "wb") as fh:
        fh.truncate(size)
    return img


def test_a_device_is_preconditioned_for_real(tmp_path):
    img = blank_image(tmp_path)
    out = tmp_path / "dev.json"
    proc = run_agent(
        "--device", str(img), "--device-write-destroys-data", *TINY,
        "--size", "32M", "--test", "fio-rand-read-4k-q1t1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["preconditioning"]["done"] is True
    assert doc["preconditioning"]["bytes"] == 32 * 2**20
    assert doc["tests"][0]["preconditioned"] is True
    assert "preconditioning: writing 32 MiB" in proc.stderr
    # The ends were zeroed afterwards, so the device reads as blank again;
    # the measured range in between holds fio's random data.
    data = img.read_bytes()
    assert data[: 2**20].strip(b"\0") == b"" and data[-(2**20) :].strip(b"\0") == b""
    assert data[2**20 : 32 * 2**20].strip(b"\0") != b""
    again = run_agent(
        "--device", str(img), "--device-write-destroys-data", *TINY,
        "--size", "32M", "--test", "fio-rand-read-4k-q1t1", "--no-precondition",
        "--out", str(out),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    doc = json.loads(out.read_text())
    assert doc["preconditioning"]["done"] is False
    assert doc["preconditioning"]["method"].startswith("not done")
    assert doc["tests"][0]["preconditioned"] is False
    assert "not-preconditioned" in {w["code"] for w in doc["warnings"]}


def test_an_unstable_test_at_the_cap_is_flagged_with_its_cv(monkeypatch):
    # Two real dd outputs with different rates stand in for two repeats.
    outputs = [
        (SAMPLES / "dd" / name).read_text()
        for name in ("gnu-c.txt", "gnu-9.1-progress.txt", "gnu-c.txt")
    ]
    monkeypatch.setattr(
        runner, "run_tool", lambda cmd, timeout, clock=None: outputs.pop(0)
    )
    test = suite.get_test("dd-write-1m-fdatasync")
    ctx = runner.Context(
        path="/nonexistent/x",
        dd_path="/nonexistent/x",
        size=2**20,
        runtime=1,
        repeats=2,
        max_repeats=2,
        ioping_count=1,
        device=True,
    )
    result = runner._new_result(test, ctx)
    runner._run_repeats(result, test, ctx, runner.Progress(3, io.StringIO()))
    assert len(result["repeats"]) == 2 and result["cv"] > runner.CV_THRESHOLD
    warning = result["unstable"]
    assert warning["code"] == "unstable" and warning["test_id"] == test["test_id"]
    assert f"{result['cv']:.0%}" in warning["message"]
    assert "repeat cap" in warning["message"]


def test_load_and_steal_past_their_thresholds_are_warned():
    codes = {
        w["code"]
        for w in runner._load_warnings(
            {"steal_share": 0.2, "loadavg_1m_max": 6.35, "cpus": 2}
        )
    }
    assert codes == {"cpu-steal", "high-load"}
    assert (
        runner._load_warnings({"steal_share": 0.0, "loadavg_1m_max": 0.5, "cpus": 2})
        == []
    )
    # The sampler reads the real /proc.
    sampler = runner.LoadSampler(interval=0.05)
    sampler.start()
    import time

    time.sleep(0.3)
    sampler.stop()
    summary = sampler.summary()
    assert summary["samples"] >= 2 and summary["loadavg_1m_max"] >= 0
    assert summary["cpus"] == os.cpu_count()


def test_help_explains_profiles_and_exit_codes():
    proc = subprocess.run(
        [*AGENT, "run", "--help"], capture_output=True, text=True, timeout=60
    )
    text = proc.stdout
    for name in suite.PROFILES:
        assert f"  {name} " in text
    assert "about 2 min" in text and "1 GiB test file" in text
    assert "host RAM" in text
    for code in range(6):
        assert f"  {code}  " in text
