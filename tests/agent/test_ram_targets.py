"""RAM is never reported as disk: targets are followed to their backing store
(tmpfs, overlay upper directories, bind mounts, loop devices without direct
I/O) and refused, or measured buffered under --allow-buffered and marked so.

Needs root for mounts and loop devices; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchdb_agent import bundle, safety

AGENT = [sys.executable, "-m", "benchdb_agent"]
TINY = [
    "--size",
    "8M",
    "--runtime",
    "1",
    "--repeats",
    "1",
    "--max-repeats",
    "1",
    "--test",
    "fio-rand-read-4k-q1t1",
]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("losetup"),
    reason="needs root for mounts and loop devices",
)


def sh(*cmd):
    return subprocess.run(
        [str(c) for c in cmd], check=True, capture_output=True, text=True
    )


@pytest.fixture
def undo():
    steps = []
    yield steps
    for step in reversed(steps):
        subprocess.run([str(c) for c in step], capture_output=True)


@pytest.fixture
def overlay_on_tmpfs(tmp_path, undo):
    ram = tmp_path / "ram"
    ram.mkdir()
    # Large enough for the free-space margin; tmpfs only uses what is written.
    sh("mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", ram)
    undo.append(["umount", ram])
    (ram / "upper").mkdir()
    (ram / "work").mkdir()
    lower = tmp_path / "lower"  # on the disk
    lower.mkdir()
    merged = tmp_path / "merged"
    merged.mkdir()
    sh(
        "mount",
        "-t",
        "overlay",
        "overlay",
        "-o",
        f"lowerdir={lower},upperdir={ram / 'upper'},workdir={ram / 'work'}",
        merged,
    )
    undo.append(["umount", merged])
    return merged


def test_an_overlay_whose_upper_dir_is_tmpfs_is_found(overlay_on_tmpfs):
    (reason,) = safety.memory_backing(str(overlay_on_tmpfs))
    assert "overlay" in reason and "upper directory" in reason and "tmpfs" in reason


def test_an_overlay_on_tmpfs_is_refused(overlay_on_tmpfs, tmp_path):
    out = tmp_path / "b.json"
    proc = subprocess.run(
        [*AGENT, "run", "--target", str(overlay_on_tmpfs), *TINY, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "overlay" in proc.stderr and "tmpfs" in proc.stderr
    assert "not disk figures" in proc.stderr
    assert not out.exists() and list(overlay_on_tmpfs.iterdir()) == []


def test_allow_buffered_marks_the_figures_and_keys_them_apart(
    overlay_on_tmpfs, tmp_path
):
    out = tmp_path / "b.json"
    proc = subprocess.run(
        [
            *AGENT,
            "run",
            "--target",
            str(overlay_on_tmpfs),
            *TINY,
            "--allow-buffered",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    assert doc["buffered"] is True
    (test,) = doc["tests"]
    assert test["buffered"] is True
    assert test["options"]["direct"] == "0"
    assert "--direct=0" in test["command"] and "--direct=1" not in test["command"]
    assert test["comparability_key"].endswith("|buffered")
    codes = {w["code"] for w in doc["warnings"]}
    assert {"ram-backed-target", "buffered-io"} <= codes
    assert "overlay" in " ".join(doc["environment"]["memory_backing"])
    assert "buffered" in proc.stderr  # the table says so too


def test_a_bind_mount_of_tmpfs_is_found(tmp_path, undo):
    ram = tmp_path / "ram"
    ram.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", ram)
    undo.append(["umount", ram])
    (ram / "inner").mkdir()
    bound = tmp_path / "bound"
    bound.mkdir()
    sh("mount", "--bind", ram / "inner", bound)
    undo.append(["umount", bound])
    (reason,) = safety.memory_backing(str(bound))
    assert "tmpfs" in reason


def loop_with_ext4(tmp_path, undo, direct_io: str) -> tuple:
    img = tmp_path / f"loop-{direct_io}.img"
    with open(img, "wb") as fh:
        fh.truncate(64 * 2**20)
    dev = sh("losetup", "-f", "--show", f"--direct-io={direct_io}", img).stdout.strip()
    undo.append(["losetup", "-d", dev])
    sh("mkfs.ext4", "-q", "-F", dev)
    point = tmp_path / f"mnt-{direct_io}"
    point.mkdir()
    sh("mount", dev, point)
    undo.append(["umount", point])
    dio = Path(f"/sys/block/{Path(dev).name}/loop/dio").read_text().strip()
    return dev, point, dio


def test_a_loop_device_without_direct_io_is_ram(tmp_path, undo):
    dev, point, dio = loop_with_ext4(tmp_path, undo, "off")
    assert dio == "0"
    reasons = safety.memory_backing(str(point))
    assert any(
        f"{Path(dev).name} is a loop device without direct I/O" in r for r in reasons
    ), reasons
    proc = subprocess.run(
        [*AGENT, "run", "--target", str(point), *TINY, "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "loop/dio=0" in proc.stderr


def test_a_loop_device_with_direct_io_on_a_disk_is_not(tmp_path, undo):
    _dev, point, dio = loop_with_ext4(tmp_path, undo, "on")
    if dio != "1":
        pytest.skip("the backing filesystem refused direct I/O for the loop device")
    assert safety.memory_backing(str(point)) == []


def test_a_loop_device_backed_by_a_tmpfs_file_is_ram_even_with_direct_io(
    tmp_path, undo
):
    ram = tmp_path / "ram"
    ram.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", ram)
    undo.append(["umount", ram])
    img = ram / "disk.img"
    with open(img, "wb") as fh:
        fh.truncate(64 * 2**20)
    dev = sh("losetup", "-f", "--show", img).stdout.strip()
    undo.insert(1, ["losetup", "-d", dev])
    st = os.stat(dev)
    reasons = safety.block_memory_backing(
        f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    )
    assert any("tmpfs" in r for r in reasons), reasons


@pytest.mark.skipif(
    not Path("/sys/block/zram0").exists(), reason="no zram device on this kernel"
)
def test_zram_is_ram():
    # Read-only: only sysfs is consulted, the device is neither opened nor set up.
    devno = Path("/sys/block/zram0/dev").read_text().strip()
    assert safety.block_memory_backing(devno) == ["zram0 is a zram (compressed RAM)"]
