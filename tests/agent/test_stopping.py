"""Every way of stopping, with real signals on real processes (issue 29):
a run removes what an earlier, SIGKILLed run left and says so; `run` and
`vm` exit 4 (partial, as documented) when stopped by a signal, Ctrl-C
included when they were started with SIGINT ignored (a background job); a
guest run stops itself when the `vm` watching it is gone (heartbeat)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent.test_run import tool_processes

AGENT = [sys.executable, "-m", "benchdb_agent"]
LONG = ["--test", "fio-rand-read-4k-q1t1", "--size", "16M", "--runtime", "20",
        "--repeats", "1", "--max-repeats", "1"]  # fmt: skip
# Two tests: the signal comes while the second runs, so the first is kept.
TWO = ["--test", "fio-rand-read-4k-q1t1", "--test", "fio-rand-write-4k-q1t1",
       "--size", "16M", "--runtime", "3", "--repeats", "1",
       "--max-repeats", "1"]  # fmt: skip


def ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(*args, sigint_ignored=False) -> subprocess.Popen:
    return subprocess.Popen(
        [*AGENT, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )


def wait_for_fio(marker: str, also: str = "", timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = tool_processes(marker, also)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"fio never started on {marker}")


def wait_gone(marker: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while tool_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tool_processes(marker) == []


def test_a_run_removes_what_a_killed_run_left_and_says_so(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    killed = start("run", "--target", str(target), *LONG, "--runtime", "2",
                   "--out", str(tmp_path / "k.json"))  # fmt: skip
    wait_for_fio(str(target), also="fio-rand-read")
    killed.kill()  # SIGKILL: nothing of the agent runs after this
    killed.communicate(timeout=30)
    wait_gone(str(target))  # fio is stopped with the agent (PR_SET_PDEATHSIG)
    left = sorted(p.name for p in target.iterdir())
    assert left == [f"benchdb-test.{killed.pid}.bin"]
    out = tmp_path / "b.json"
    done = subprocess.run(
        [*AGENT, "run", "--target", str(target), *LONG, "--runtime", "1",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"benchdb-test.{killed.pid}.bin (16 MiB, left by run {killed.pid})" in (
        done.stderr
    )
    assert "removed what an earlier run that was killed left" in done.stderr
    doc = json.loads(out.read_text())
    assert "leftovers-removed" in {w["code"] for w in doc["warnings"]}
    assert list(target.iterdir()) == []


def test_fio_stops_when_the_agent_is_killed(tmp_path):
    """SIGKILL leaves the agent no chance to stop its tools: the kernel
    stops fio for it, long before fio's own runtime (60 s here)."""
    target = tmp_path / "target"
    target.mkdir()
    killed = start("run", "--target", str(target), *LONG, "--runtime", "60",
                   "--out", str(tmp_path / "k.json"))  # fmt: skip
    wait_for_fio(str(target), also="--runtime=60")  # past the warm-up
    killed.kill()
    killed.communicate(timeout=30)
    wait_gone(str(target), timeout=30)


def test_a_file_of_a_run_still_going_is_left_alone(tmp_path):
    from benchdb_agent import runner

    mine = tmp_path / f"benchdb-test.{os.getpid()}.bin"
    mine.write_bytes(b"x")
    # A PID no process has (beyond pid_max), and a live one that is no agent.
    dead = tmp_path / "benchdb-dd.4194305.bin"
    dead.write_bytes(b"x")
    other = subprocess.Popen(["sleep", "30"])
    try:
        foreign = tmp_path / f".benchdb-ddprobe-{other.pid}"
        foreign.write_bytes(b"x")
        unrelated = tmp_path / "benchdb-notes.txt"
        unrelated.write_bytes(b"x")
        removed = runner.remove_leftovers(str(tmp_path))
    finally:
        other.kill()
        other.wait()
    assert sorted(removed) == sorted(
        [f"{dead.name} (0 MiB, left by run 4194305)",
         f"{foreign.name} (0 MiB, left by run {other.pid})"]
    )  # fmt: skip
    assert mine.exists() and unrelated.exists()
    assert not dead.exists() and not foreign.exists()


@pytest.mark.parametrize("sigint_ignored", [False, True])
def test_run_stopped_by_ctrl_c_exits_4_even_as_a_background_job(
    tmp_path, sigint_ignored
):
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "p.json"
    proc = start("run", "--target", str(target), *TWO, "--out", str(out),
                 sigint_ignored=sigint_ignored)  # fmt: skip
    wait_for_fio(str(target), also="fio-rand-write")
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert tool_processes(str(target)) == []
    assert list(target.iterdir()) == []
    assert "SIGINT" in json.loads(out.read_text())["stop_reason"]


def test_a_guest_run_stops_itself_when_its_host_side_is_gone(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    beat = tmp_path / "heartbeat"
    beat.write_bytes(b"")
    out = tmp_path / "g.json"
    started = time.monotonic()
    proc = start("run", "--target", str(target), *LONG, "--out", str(out),
                 "--heartbeat", str(beat), "--heartbeat-timeout", "3")  # fmt: skip
    _out, err = proc.communicate(timeout=120)
    # Nobody touched the heartbeat: stopped well before fio's 20 s, before
    # its first test finished (so nothing measured, nothing written).
    assert proc.returncode == 4, err
    assert time.monotonic() - started < 18
    assert "not touched for 3 s" in err
    assert "stopped by SIGTERM" in err and "nothing was measured" in err
    assert not out.exists()
    assert tool_processes(str(target)) == [] and list(target.iterdir()) == []


@pytest.fixture
def fake_qemu(tmp_path):
    """A process whose command line is a QEMU's with one raw drive (nothing
    emulated: `vm` reads the configuration from /proc and runs the host
    baseline next to the image; the VM has no guest agent)."""
    image = tmp_path / "images" / "vm.raw"
    image.parent.mkdir()
    image.write_bytes(b"\0" * 2**20)
    python = os.path.realpath(sys.executable)
    drive = f"file={image},if=none,id=bench,format=raw,cache=none"
    proc = subprocess.Popen(
        ["bash", "-c", f'exec -a qemu-system-x86_64 "{python}" -c '
         f'"import time; time.sleep(600)" -name fakevm -drive {drive} '
         "-device virtio-blk-pci,drive=bench"]
    )  # fmt: skip
    time.sleep(0.3)
    try:
        yield proc.pid, image.parent
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
)
def test_vm_stopped_by_a_signal_exits_4_and_leaves_nothing(
    fake_qemu, tmp_path, sig, sigint_ignored
):
    pid, images = fake_qemu
    out_dir = tmp_path / "out"
    proc = start("vm", "--qemu-pid", str(pid), "--disk", "bench", "--guest-dir",
                 "/mnt", *TWO, "--out-dir", str(out_dir),
                 sigint_ignored=sigint_ignored)  # fmt: skip
    wait_for_fio(str(images), also="fio-rand-write")
    time.sleep(0.5)
    os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert tool_processes(str(images), also="--filename=") == []  # not the QEMU
    # The host baseline's scratch folder is gone; the image is untouched.
    assert sorted(p.name for p in images.iterdir()) == ["vm.raw"]
    (host,) = [json.loads(p.read_text()) for p in Path(out_dir).glob("*-host.json")]
    assert host["partial"] is True
