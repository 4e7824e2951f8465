"""detect on fixture trees built like real guests, and on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchdb_agent import detect

CPUINFO_TCG = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: QEMU Virtual CPU version 2.5+
physical id\t: 0
cpu cores\t: 1
flags\t\t: fpu de pse tsc msr pae hypervisor lahf_lm
"""


def tree(tmp_path: Path, files: dict) -> Path:
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return tmp_path


def qemu_guest(
    tmp_path: Path,
    clock: str,
    disk: str = "vdb",
    bus_dir: str = "virtio1",
    write_cache: str = "write back",
) -> Path:
    # /sys/block/<disk> links into the device tree, as the kernel's does.
    dev = f"sys/devices/pci0000:00/0000:00:04.0/{bus_dir}/block/{disk}"
    os_release = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
    root = tree(
        tmp_path,
        {
            "proc/cpuinfo": CPUINFO_TCG,
            "proc/meminfo": "MemTotal:         503112 kB\n",
            "proc/mounts": f"/dev/{disk} /mnt/bench ext4 rw,relatime 0 0\n",
            "etc/os-release": os_release,
            "sys/class/dmi/id/sys_vendor": "QEMU\n",
            "sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
            "sys/devices/system/clocksource/clocksource0/current_clocksource": clock,
            f"{dev}/queue/rotational": "1\n",
            f"{dev}/queue/write_cache": write_cache + "\n",
            f"{dev}/queue/scheduler": "[mq-deadline] none\n",
            f"{dev}/size": "2097152\n",
            "sys/class/net/eth0/address": "bc:24:11:aa:bb:cc\n",
        },
    )
    (root / "sys/block").mkdir(parents=True)
    os.symlink(
        root / f"sys/devices/pci0000:00/0000:00:04.0/{bus_dir}/block/{disk}",
        root / f"sys/block/{disk}",
    )
    return root


def test_a_tcg_guest_with_virtio_blk(tmp_path):
    root = qemu_guest(tmp_path, "tsc")
    env = detect.detect("/mnt/bench", root=root, run_tools=False)
    assert env["virtualization"]["type"] == "qemu-tcg"
    assert "DMI sys_vendor: QEMU" in env["virtualization"]["evidence"]
    target = env["target"]
    assert target["device"] == "vdb" and target["disk_bus"] == "virtio-blk"
    assert target["filesystem"] == "ext4"
    assert target["size_bytes"] == 2097152 * 512
    assert target["rotational"] is True and target["scheduler"] == "mq-deadline"
    assert env["cache_mode_evidence"]["compatible"] == ["none", "writeback", "unsafe"]
    assert env["memory_bytes"] == 503112 * 1024
    # Proxmox is a hint with its evidence, never the detected platform.
    assert env["platform"]["value"] == "unknown"
    assert {"platform": "proxmox", "evidence": "MAC prefix BC:24:11"} in env[
        "platform"
    ]["hints"]
    assert "identifiers" not in env


def test_kvm_clock_means_kvm(tmp_path):
    env = detect.detect(None, root=qemu_guest(tmp_path, "kvm-clock"), run_tools=False)
    assert env["virtualization"]["type"] == "kvm"


def test_virtio_scsi_disk(tmp_path):
    root = qemu_guest(
        tmp_path, "tsc", disk="sda", bus_dir="virtio2/host0/target0:0:0/0:0:0:0"
    )
    (root / "sys/block/sda/device").mkdir(exist_ok=True)
    (root / "sys/block/sda/device/vendor").write_text("QEMU\n")
    (root / "sys/block/sda/device/model").write_text("QEMU HARDDISK\n")
    env = detect.detect("/mnt/bench", root=root, run_tools=False)
    assert env["target"]["disk_bus"] == "virtio-scsi"
    assert env["target"]["model"] == "QEMU HARDDISK"


def test_write_through_contradicts_a_declared_writeback(tmp_path):
    root = qemu_guest(tmp_path, "tsc", write_cache="write through")
    env = detect.detect("/mnt/bench", root=root, run_tools=False)
    evidence = env["cache_mode_evidence"]
    assert evidence["compatible"] == ["writethrough", "directsync"]
    assert "contradicts" in detect.check_declared_cache_mode("writeback", evidence)
    assert detect.check_declared_cache_mode("directsync", evidence) is None


def test_xen_pv_has_no_dmi(tmp_path):
    root = tree(
        tmp_path,
        {
            "proc/cpuinfo": CPUINFO_TCG,
            "sys/hypervisor/type": "xen\n",
            "sys/hypervisor/guest_type": "PV\n",
        },
    )
    assert detect.virtualization(root, run_tools=False)["type"] == "xen-pv"


def test_missing_files_degrade_to_none(tmp_path):
    env = detect.detect("/nowhere", root=tmp_path, run_tools=False)
    assert env["virtualization"]["type"] == "unknown"
    assert env["memory_bytes"] is None and env["cpu"]["model"] is None
    assert env["target"]["disk_bus"] is None


def test_this_machine(tmp_path):
    """The real machine: answers must match what its files say."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchdb_agent", "detect", "--target", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    env = json.loads(proc.stdout)
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    assert env["memory_bytes"] == int(meminfo[1]) * 1024
    assert env["cpu"]["threads"] == os.cpu_count()
    hv = (
        " hypervisor "
        in " " + Path("/proc/cpuinfo").read_text().replace("\n", " ") + " "
    )
    assert env["virtualization"]["type"] != ("none" if hv else "kvm")
    dev = env["target"]["device"]
    if dev:
        wc = Path(f"/sys/block/{dev}/queue/write_cache").read_text().strip()
        assert env["target"]["write_cache"] == wc
    assert "identifiers" not in env


def test_a_kvm_guest_seen_from_a_container_is_kvm_with_a_container(tmp_path):
    # systemd-detect-virt checks containers first: in a docker container on a
    # KVM guest it says "docker", and "kvm" only with --vm.
    root = qemu_guest(tmp_path, "kvm-clock")
    answers = {"plain": "docker", "vm": "kvm", "container": "docker"}
    virt = detect.virtualization(root, tool_answers=answers)
    assert virt["type"] == "kvm" and virt["container"] == "docker"
    assert "systemd-detect-virt --vm: kvm" in virt["evidence"]
    # Without --vm (an old systemd), DMI, the clock and the CPUID hypervisor
    # flag still say KVM; the container is reported apart.
    virt = detect.virtualization(root, tool_answers={"plain": "docker"})
    assert virt["type"] == "kvm" and virt["container"] == "docker"


def test_a_container_on_bare_metal_is_a_container(tmp_path):
    root = tree(
        tmp_path,
        {"proc/cpuinfo": "processor\t: 0\nflags\t\t: fpu de pse tsc msr\n"},
    )
    answers = {"plain": "docker", "vm": "none", "container": "docker"}
    virt = detect.virtualization(root, tool_answers=answers)
    assert virt["type"] == "container" and virt["container"] == "docker"
