"""What the agent says about the target's filesystem (issue 29): its mount
options are in the bundle (a `-o sync` mount measures something else, and is
warned about); a filesystem too small for the profile is refused with how
much is needed and the --size that fits; a ZFS member's refusal is short.

Real ext4 filesystems on loop devices, mounted here; needs root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from benchdb_agent import safety
from tests.agent.test_device_safety import Loops, sh

AGENT = [sys.executable, "-m", "benchdb_agent"]
MiB = 2**20

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("losetup"),
    reason="needs root, losetup and mount for real filesystems",
)


@pytest.fixture
def mounted(tmp_path):
    """mounted(size, options) -> a directory on a fresh ext4 of ``size``."""
    loops = Loops(tmp_path)

    def make(size: int, options: str = "defaults"):
        dev = loops.make(size=size)
        # Direct I/O through to the image, else the agent (rightly) calls the
        # loop device RAM-backed.
        sh("losetup", "--direct-io=on", dev)
        sh("mkfs.ext4", "-q", "-F", dev)
        point = tmp_path / f"mnt{len(loops.devices)}"
        point.mkdir()
        sh("mount", "-o", options, dev, point)
        loops.undo.append(["umount", str(point)])
        return point

    try:
        yield make
    finally:
        loops.close()


def agent(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*AGENT, *args], capture_output=True, text=True, timeout=300)


def test_the_mount_options_are_recorded_and_a_sync_mount_is_warned(mounted, tmp_path):
    target = mounted(128 * MiB, "sync,noatime")
    out = tmp_path / "b.json"
    done = agent(
        "run", "--target", str(target), "--test", "fio-rand-write-4k-q1t1",
        "--size", "16M", "--runtime", "1", "--repeats", "1", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    options = doc["environment"]["target"]["mount_options"]
    assert "sync" in options and "noatime" in options
    warning = next(w for w in doc["warnings"] if w["code"] == "sync-mount")
    assert "sync" in warning["message"]
    plain = mounted(128 * MiB)
    detected = json.loads(agent("detect", "--target", str(plain)).stdout)
    assert "sync" not in detected["target"]["mount_options"]


def test_a_small_filesystem_is_refused_with_what_it_needs_and_what_fits(mounted):
    target = mounted(200 * MiB)
    done = agent("run", "--target", str(target), "--profile", "quick")
    assert done.returncode == 3, done.stderr
    said = done.stderr
    # The quick profile: a 1 GiB test file, dd's 1 GiB and a tenth of them.
    assert "needs 2252 MiB" in said and "1024 MiB test file" in said
    assert "dd's 1024 MiB file" in said and "margin of 204 MiB" in said
    fits = int(re.search(r"--size (\d+)M fits here", said).group(1)) * MiB
    # What it proposes does fit, and one MiB more does not.
    safety.check_free_space(str(target), fits, min(fits, 2**30))
    with pytest.raises(safety.SafetyError):
        safety.check_free_space(str(target), fits + MiB, min(fits + MiB, 2**30))
    assert list(p.name for p in target.iterdir()) == ["lost+found"]


def test_a_zfs_member_is_refused_in_a_few_lines(tmp_path):
    """A pool's four labels each hold a ring of 128 uberblocks; wipefs
    lists every one (509 signatures): the refusal names the kind once, with
    how many and where, and how to clear it."""
    img = tmp_path / "zfs.img"
    size = 64 * MiB
    with open(img, "wb") as fh:
        fh.truncate(size)
        for label in (0, 256 * 1024, size - 512 * 1024, size - 256 * 1024):
            for i in range(128):
                fh.seek(label + 128 * 1024 + i * 1024)
                fh.write(b"\x0c\xb1\xba\x00\x00\x00\x00\x00")
    with pytest.raises(safety.SafetyError) as refused:
        safety.check_device(str(img), allow_write=True)
    said = str(refused.value)
    assert len(said) < 800, len(said)
    assert "ZFS label (at the start" in said and "ZFS label (at the end" in said
    assert said.count("ZFS label (at the end") == 1
    if shutil.which("wipefs"):
        assert re.search(r"zfs_member at \d{3} offsets \(0x", said)
    assert f"wipefs -a {img}" in said
