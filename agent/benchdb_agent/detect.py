"""What the agent can see of its environment, each conclusion with evidence.

Every file read goes through ``root`` (default ``/``) so tests can point the
detector at a fixture tree.  Nothing here needs root privileges or a tool
beyond the standard library; ``systemd-detect-virt`` is asked when present.
A fact that cannot be read is None, never a guess: a guest cannot see the
host's cache mode or storage, so those come from tags (``--tag``) or from
``host-config`` on the host.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

# /sys/block/X/queue/write_cache as a guest sees it, and the QEMU cache modes
# that present it (cache.writeback on => "write back").
WRITE_CACHE_MODES = {
    "write back": ["none", "writeback", "unsafe"],
    "write through": ["writethrough", "directsync"],
}
SYSTEMD_VIRT = {
    "kvm": "kvm",
    "qemu": "qemu-tcg",
    "xen": "xen-hvm",
    "vmware": "vmware",
    "microsoft": "hyper-v",
    "oracle": "virtualbox",
    "none": "none",
    "docker": "container",
    "podman": "container",
    "lxc": "container",
    "lxc-libvirt": "container",
    "openvz": "container",
    "systemd-nspawn": "container",
    "wsl": "container",
}


def read(root: Path, path: str) -> str | None:
    try:
        return (root / path.lstrip("/")).read_text(errors="replace").strip()
    except OSError:
        return None


def virtualization(
    root: Path, run_tools: bool = True, tool_answers: dict | None = None
) -> dict:
    """The hypervisor (``type``) and, apart, a container (``container``).

    ``tool_answers`` stands in for systemd-detect-virt's answers
    ({"plain", "vm", "container"}) when reading a fixture tree."""
    evidence = []
    cpuinfo = read(root, "/proc/cpuinfo") or ""
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    hv_flag = "hypervisor" in flags
    if flags:
        evidence.append(f"cpuinfo hypervisor flag: {'yes' if hv_flag else 'no'}")
    guest_type = read(root, "/sys/hypervisor/guest_type")
    hv_type = read(root, "/sys/hypervisor/type")
    caps = read(root, "/proc/xen/capabilities")
    vendor = read(root, "/sys/class/dmi/id/sys_vendor")
    product = read(root, "/sys/class/dmi/id/product_name")
    clock = read(
        root, "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    )
    for name, value in (
        ("/sys/hypervisor/type", hv_type),
        ("/sys/hypervisor/guest_type", guest_type),
        ("DMI sys_vendor", vendor),
        ("DMI product_name", product),
        ("clocksource", clock),
    ):
        if value:
            evidence.append(f"{name}: {value}")
    answers = tool_answers
    if answers is None:
        answers = _systemd_detect_virt() if run_tools and str(root) == "/" else {}
    for flag, value in answers.items():
        option = "" if flag == "plain" else f" --{flag}"
        evidence.append(f"systemd-detect-virt{option}: {value}")
    # A KVM guest running the agent in a container: plain systemd-detect-virt
    # says "docker" (containers are checked first), --vm says "kvm".  The
    # hypervisor comes from the VM answer (or DMI, clock and the CPUID
    # hypervisor flag), the container is reported apart.
    vm = answers.get("vm")
    plain = answers.get("plain")
    container = answers.get("container")
    if container in (None, "none") and SYSTEMD_VIRT.get(plain) == "container":
        container = plain
    if container == "none":
        container = None
    systemd = vm if vm not in (None, "none") else None
    if systemd is None and plain and SYSTEMD_VIRT.get(plain) != "container":
        systemd = plain
    kind = "unknown"
    if caps is not None and "control_d" in caps:
        kind = "xen-dom0"
    elif guest_type == "PV" or (hv_type == "xen" and not vendor):
        kind = "xen-pv"
    elif guest_type in ("HVM", "PVH") or (vendor or "").startswith("Xen"):
        kind = "xen-hvm"
    elif systemd in SYSTEMD_VIRT:
        kind = SYSTEMD_VIRT[systemd]
    elif vendor in ("QEMU", "Red Hat") or product == "KVM":
        # KVM guests get the kvm-clock paravirtual clock; a TCG guest does not.
        kind = "kvm" if clock == "kvm-clock" else "qemu-tcg"
    elif vendor and "VMware" in vendor:
        kind = "vmware"
    elif vendor == "Microsoft Corporation" and hv_flag:
        kind = "hyper-v"
    elif vendor == "innotek GmbH" or product == "VirtualBox":
        kind = "virtualbox"
    elif flags and not hv_flag:
        kind = "container" if container else "none"
    elif hv_flag:
        kind = "other"
    elif container:
        kind = "container"
    return {"type": kind, "evidence": evidence, "container": container}


def _systemd_detect_virt() -> dict:
    """systemd-detect-virt's answers: plain, --vm and --container (the three
    started at once: a run's start-up waits for the slowest, not the sum)."""
    if not shutil.which("systemd-detect-virt"):
        return {}
    procs = {}
    for key, extra in (("plain", []), ("vm", ["--vm"]), ("container", ["--container"])):
        try:
            procs[key] = subprocess.Popen(
                ["systemd-detect-virt", *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        except OSError:
            continue
    out = {}
    for key, proc in procs.items():
        try:
            stdout, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            continue
        if stdout.strip():
            out[key] = stdout.strip()
    return out


def platform_hints(root: Path, cpu_model: str | None) -> dict:
    """Hints at the platform a guest runs on, never asserted as fact."""
    hints = []
    net = root / "sys/class/net"
    if net.is_dir():
        for iface in sorted(net.iterdir()):
            mac = (read(root, f"/sys/class/net/{iface.name}/address") or "").lower()
            if mac.startswith("bc:24:11"):
                hints.append({"platform": "proxmox", "evidence": "MAC prefix BC:24:11"})
            elif mac.startswith("52:54:00"):
                hints.append({"platform": "libvirt", "evidence": "MAC prefix 52:54:00"})
            elif mac.startswith("00:16:3e"):
                hints.append({"platform": "xen", "evidence": "MAC prefix 00:16:3e"})
    by_id = root / "dev/disk/by-id"
    if by_id.is_dir():
        for entry in sorted(by_id.iterdir()):
            if re.search(r"drive-scsi\d+$", entry.name):
                hints.append(
                    {"platform": "proxmox", "evidence": f"disk id {entry.name}"}
                )
            elif re.search(r"drive-scsi\d+-\d+-\d+-\d+$", entry.name):
                hints.append(
                    {"platform": "libvirt", "evidence": f"disk id {entry.name}"}
                )
    if cpu_model and "Common KVM processor" in cpu_model:
        hints.append(
            {"platform": "proxmox", "evidence": "CPU model 'Common KVM processor'"}
        )
    seen, unique = set(), []
    for h in hints:
        key = (h["platform"], h["evidence"])
        if key not in seen:
            seen.add(key)
            unique.append(h)
    return {"value": "unknown", "hints": unique}


def cpu(root: Path) -> dict:
    text = read(root, "/proc/cpuinfo") or ""
    model = None
    physical, cores = set(), {}
    threads = 0
    phys = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            threads += 1
        elif key == "model name" and model is None:
            model = value
        elif key == "physical id":
            phys = value
            physical.add(value)
        elif key == "cpu cores" and phys is not None:
            cores[phys] = int(value) if value.isdigit() else None
    total_cores = sum(v for v in cores.values() if v) if cores else None
    return {
        "model": model,
        "sockets": len(physical) or None,
        "cores": total_cores or None,
        "threads": threads or None,
    }


def memory_bytes(root: Path) -> int | None:
    for line in (read(root, "/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # the kernel's "kB" is KiB
    return None


def os_info(root: Path) -> dict:
    name = None
    for line in (read(root, "/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            name = line.split("=", 1)[1].strip().strip('"')
    kernel = read(root, "/proc/sys/kernel/osrelease")
    if kernel is None and str(root) == "/":
        kernel = platform.release()
    ident = None
    for line in (read(root, "/etc/os-release") or "").splitlines():
        if line.startswith("ID="):
            ident = line.split("=", 1)[1].strip().strip('"')
    return {"name": name, "id": ident, "kernel": kernel}


def mount_of(path: str, root: Path) -> dict | None:
    """The /proc/mounts entry holding ``path`` (longest mount point prefix)."""
    best = None
    for line in (read(root, "/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        source, point, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        if path == point or path.startswith(point.rstrip("/") + "/") or point == "/":
            if best is None or len(point) > len(best["mount_point"]):
                best = {
                    "source": source,
                    "mount_point": point,
                    "filesystem": fstype,
                    "options": parts[3].split(",") if len(parts) > 3 else None,
                }
    return best


def block_device(
    source: str, root: Path, dev_numbers: tuple | None = None
) -> str | None:
    """The whole-disk name under /sys/block for a mount source or dev numbers."""
    sys_block = root / "sys/block"
    if dev_numbers is not None:
        major, minor = dev_numbers
        link = root / f"sys/dev/block/{major}:{minor}"
        if link.exists():
            resolved = link.resolve()
            name = resolved.name
            if (resolved.parent / "partition").exists() or (
                resolved / "partition"
            ).exists():
                return resolved.parent.name
            if (sys_block / name).exists():
                return name
            return (
                resolved.parent.name
                if (sys_block / resolved.parent.name).exists()
                else name
            )
    name = os.path.basename(source)
    if (sys_block / name).exists():
        return name
    if sys_block.is_dir():
        for disk in sys_block.iterdir():
            if (disk / name).exists():
                return disk.name
    return None


def disk_bus(name: str, root: Path) -> tuple:
    """(bus, evidence) for a whole disk from its name and sysfs attributes."""
    base = f"/sys/block/{name}"
    vendor = read(root, f"{base}/device/vendor")
    model = read(root, f"{base}/device/model")
    devpath = ""
    try:
        devpath = str((root / base.lstrip("/")).resolve())
    except OSError:
        pass
    if name.startswith("vd") or "/virtio" in devpath and not name.startswith("sd"):
        return "virtio-blk", f"{name}: virtio block device"
    if name.startswith("xvd"):
        return "xen-blkfront", f"{name}: Xen virtual block device"
    if name.startswith("nvme"):
        return "nvme", f"{name}: NVMe namespace"
    if name.startswith(("sd", "hd")):
        if "/virtio" in devpath:
            return "virtio-scsi", f"{name}: SCSI disk behind a virtio controller"
        if vendor == "ATA" or "/ata" in devpath:
            if "/ata" in devpath and name.startswith("hd"):
                return "ide", f"{name}: legacy IDE"
            driver = _driver_of_ata(devpath)
            if driver == "ata_piix":
                return "ide", f"{name}: ATA disk on ata_piix (IDE)"
            return "sata", f"{name}: ATA disk ({driver or 'ahci'})"
        if vendor == "Msft":
            return "hyperv-storvsc", f"{name}: vendor Msft"
        if vendor == "VMware":
            return "vmware-pvscsi", f"{name}: vendor VMware"
        if "/usb" in devpath:
            return "usb", f"{name}: USB"
        return "scsi", f"{name}: SCSI disk (vendor {vendor}, model {model})"
    return "unknown", f"{name}: no known bus"


def _driver_of_ata(devpath: str) -> str | None:
    """The PCI driver of the controller above an ATA disk (ahci, ata_piix)."""
    path = Path(devpath)
    for parent in [path, *path.parents]:
        driver = parent / "driver"
        if driver.exists() and (parent / "class").exists():
            try:
                return driver.resolve().name
            except OSError:
                return None
    return None


def target_info(target: str, root: Path = Path("/")) -> dict:
    """Filesystem, block device and disk attributes for a target directory."""
    info = {"path": target}
    real = os.path.realpath(target) if str(root) == "/" else target
    mount = mount_of(real, root)
    if mount:
        info["filesystem"] = mount["filesystem"]
        info["mount_point"] = mount["mount_point"]
        # -o sync, discard, compress=... change what a disk figure means.
        info["mount_options"] = mount["options"]
    dev_numbers = None
    if str(root) == "/":
        try:
            st = os.stat(real)
            dev_numbers = (os.major(st.st_dev), os.minor(st.st_dev))
        except OSError:
            pass
    disk = block_device(mount["source"], root, dev_numbers) if mount else None
    info["device"] = disk
    if disk:
        base = f"/sys/block/{disk}"
        bus, why = disk_bus(disk, root)
        info["disk_bus"] = bus
        info["disk_bus_evidence"] = why
        model = read(root, f"{base}/device/model")
        if model is None and disk.startswith("nvme"):
            ctrl = re.sub(r"n\d+$", "", disk)
            model = read(root, f"/sys/class/nvme/{ctrl}/model")
        info["model"] = model
        rot = read(root, f"{base}/queue/rotational")
        info["rotational"] = None if rot is None else rot == "1"
        size = read(root, f"{base}/size")
        info["size_bytes"] = int(size) * 512 if size and size.isdigit() else None
        sched = read(root, f"{base}/queue/scheduler")
        m = re.search(r"\[(\S+)\]", sched or "")
        info["scheduler"] = m.group(1) if m else sched
        for key in ("logical_block_size", "physical_block_size"):
            value = read(root, f"{base}/queue/{key}")
            info[key] = int(value) if value and value.isdigit() else None
        info["write_cache"] = read(root, f"{base}/queue/write_cache")
    else:
        info["disk_bus"] = None
    return info


def disk_type_of(target: dict) -> str | None:
    """The disk type a host's own view of its disk shows (bus and rotational
    flag), or None.  Only on bare metal: a virtual disk says nothing of what
    backs it (a virtio disk reports rotational=1 on any storage)."""
    if target.get("disk_bus") == "nvme":
        return "nvme-ssd"
    if target.get("rotational") is True:
        return "hdd"
    if target.get("rotational") is False and target.get("disk_bus") in (
        "sata",
        "scsi",
    ):
        return "sata-ssd"
    return None


def cache_mode_evidence(target: dict) -> dict | None:
    wc = (target.get("write_cache") or "").strip().lower()
    if wc not in WRITE_CACHE_MODES:
        return None
    return {"write_cache": wc, "compatible": WRITE_CACHE_MODES[wc]}


def check_declared_cache_mode(
    declared: str | None, evidence: dict | None
) -> str | None:
    """A message when a declared cache mode contradicts what the guest sees."""
    if not declared or not evidence or declared in ("default", "unknown"):
        return None
    if declared not in evidence["compatible"]:
        return (
            f"declared cache mode {declared!r} contradicts the guest's write_cache "
            f"{evidence['write_cache']!r}, which means one of "
            f"{', '.join(evidence['compatible'])}"
        )
    return None


def detect(
    target: str | None = None,
    root: str | Path = "/",
    include_identifiers: bool = False,
    run_tools: bool = True,
) -> dict:
    """Everything the agent can see, as the bundle's ``environment``."""
    root = Path(root)
    c = cpu(root)
    env = {
        "virtualization": virtualization(root, run_tools),
        "platform": platform_hints(root, c.get("model")),
        "cpu": c,
        "memory_bytes": memory_bytes(root),
        "os": os_info(root),
    }
    if target is not None:
        env["target"] = target_info(target, root)
        env["cache_mode_evidence"] = cache_mode_evidence(env["target"])
    if include_identifiers:
        env["identifiers"] = {
            "hostname": read(root, "/proc/sys/kernel/hostname") or platform.node(),
            "product_uuid": read(root, "/sys/class/dmi/id/product_uuid"),
        }
    return env
