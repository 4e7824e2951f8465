"""detect on file trees captured verbatim from the real QEMU guests.

``tests/samples/detect/real-guest-<bus>.json`` holds what ``guest_main.py``
copied out of a real guest booted by the harness (DMI strings, cpuinfo,
clocksource, the disk's sysfs files, the device path and the drivers above
it).  Rebuilding that tree and pointing the agent's detector at it checks
detection against what real guests show, quickly and without QEMU, and
without systemd-detect-virt (the tree is not ``/``), so the DMI and
clocksource path is the one exercised here.  The session's real boots
(test_real_guests.py) check the same detector live.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchdb_agent import detect

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "detect"
CAPTURES = {
    "virtio-blk": ("real-guest-virtio-blk.json", "write back"),
    "virtio-scsi": ("real-guest-virtio-scsi.json", "write through"),
    "sata": ("real-guest-sata.json", "write back"),
    "ide": ("real-guest-ide.json", "write through"),
}


def rebuild(capture: dict, root: Path) -> Path:
    """Lay a captured guest out under ``root`` as the kernel lays out /sys."""
    block_link = next(k for k in capture["links"] if k.count("/") == 3)
    device_link = block_link + "/device"
    block_real = capture["links"][block_link]
    device_real = capture["links"][device_link]

    def place(path: str) -> Path:
        # Files read through the /sys/block/<disk> symlinks live at the real
        # device paths, as in sysfs.
        if path.startswith(device_link + "/"):
            path = device_real + path[len(device_link) :]
        elif path.startswith(block_link + "/"):
            path = block_real + path[len(block_link) :]
        return root / path.lstrip("/")

    for path, text in capture["files"].items():
        target = place(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    (root / block_real.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / device_real.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "sys/block").mkdir(parents=True, exist_ok=True)
    os.symlink(root / block_real.lstrip("/"), root / block_link.lstrip("/"))
    device = root / block_real.lstrip("/") / "device"
    if not device.exists():
        os.symlink(root / device_real.lstrip("/"), device)
    for path, info in capture["drivers"].items():
        folder = root / path.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        driver_dir = root / "sys/bus/drivers" / info["driver"]
        driver_dir.mkdir(parents=True, exist_ok=True)
        os.symlink(driver_dir, folder / "driver")
        if info["class"] is not None:
            (folder / "class").write_text(info["class"] + "\n")
    return root


@pytest.mark.parametrize("bus", sorted(CAPTURES))
def test_detect_on_a_captured_real_guest(bus, tmp_path):
    name, write_cache = CAPTURES[bus]
    capture = json.loads((SAMPLES / name).read_text())
    root = rebuild(capture, tmp_path)

    env = detect.detect(target="/mnt/bench", root=root, run_tools=False)

    # TCG guest: QEMU's DMI strings and no kvm-clock.
    assert env["virtualization"]["type"] == "qemu-tcg"
    assert env["cpu"]["model"] == "QEMU Virtual CPU version 2.5+"
    target = env["target"]
    assert target["disk_bus"] == bus
    assert target["filesystem"] == "ext4"
    assert target["write_cache"] == write_cache
    assert target["size_bytes"] == 1024**3
    assert target["rotational"] is True
