"""Read a VM's disk configuration on the host and turn it into tags.

What matters is the effective value, not the configuration text: the stacks
default differently.  Proxmox VE passes ``cache=none`` when a disk line has no
``cache=`` (qemu-server); plain QEMU and libvirt default to writeback; where a
value is left to a layer the agent cannot read, the tag says ``default``.

Sources: Proxmox ``qm config VMID`` disk lines and ``/etc/pve/storage.cfg``;
libvirt ``virsh dumpxml`` ``<driver cache= io= type=>`` and ``<source>``; Xen
``xl list -l`` JSON; a running QEMU's command line (``-drive`` with cache=,
aio=, format=, or ``-blockdev`` with cache.direct / cache.no-flush).
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET

# QEMU's -drive cache= modes as (cache.writeback, cache.direct, cache.no-flush).
CACHE_FLAGS = {
    (True, True, False): "none",
    (False, False, False): "writethrough",
    (True, False, False): "writeback",
    (False, True, False): "directsync",
    (True, False, True): "unsafe",
    (True, True, True): "unsafe",
}
PROXMOX_DISK = re.compile(
    r"^(?P<bus>scsi|virtio|sata|ide|efidisk|tpmstate)(?P<n>\d+):\s*(?P<spec>.+)$"
)
PROXMOX_BUS = {
    "scsi": "virtio-scsi",
    "virtio": "virtio-blk",
    "sata": "sata",
    "ide": "ide",
}
PROXMOX_STORAGE = {
    "dir": "file",
    "nfs": "nfs",
    "cifs": "other",
    "lvm": "lvm",
    "lvmthin": "lvm-thin",
    "zfspool": "zfs",
    "zfs": "zfs",
    "rbd": "ceph-rbd",
    "cephfs": "file",
    "iscsi": "iscsi",
    "iscsidirect": "iscsi",
    "btrfs": "file",
}


def _kv(spec: str) -> dict:
    out = {}
    for part in spec.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
        else:
            out.setdefault("_volume", part.strip())
    return out


def parse_storage_cfg(text: str) -> dict:
    """storage id -> {"type": ..., options...} from /etc/pve/storage.cfg."""
    storages = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^(\w+):\s*(\S+)", line)
        if m:
            current = {"type": m.group(1)}
            storages[m.group(2)] = current
        elif current is not None:
            parts = line.strip().split(None, 1)
            current[parts[0]] = parts[1] if len(parts) > 1 else ""
    return storages


def proxmox(
    qm_config: str, storage_cfg: str | None = None, disk: str | None = None
) -> dict:
    """Tags for one disk of ``qm config`` output (the first data disk by default)."""
    storages = parse_storage_cfg(storage_cfg) if storage_cfg else {}
    disks = {}
    scsihw = None
    for line in qm_config.splitlines():
        line = line.strip()
        if line.startswith("scsihw:"):
            scsihw = line.split(":", 1)[1].strip()
        m = PROXMOX_DISK.match(line)
        if m and m.group("bus") in PROXMOX_BUS and "media=cdrom" not in line:
            disks[f"{m.group('bus')}{m.group('n')}"] = (
                m.group("bus"),
                _kv(m.group("spec")),
            )
    if not disks:
        raise ValueError(
            "no disk lines (scsiN:, virtioN:, sataN:, ideN:) in the qm config"
        )
    key = disk or next(iter(disks))
    if key not in disks:
        raise ValueError(f"no disk {key!r}; the config has {', '.join(disks)}")
    bus, opts = disks[key]
    volume = opts.get("_volume", "")
    storage_id, _, volname = volume.partition(":")
    storage = storages.get(storage_id, {})
    stype = storage.get("type")
    backend = PROXMOX_STORAGE.get(stype, "unknown") if stype else "unknown"
    if storage_id and "/dev/" in volname and not stype:
        backend = "passthrough"
    if volume.startswith("/dev/"):
        backend = "passthrough"
    fmt = opts.get("format")
    if not fmt:
        m = re.search(r"\.(qcow2|raw|vmdk)$", volname)
        if m:
            fmt = m.group(1)
        elif backend in ("lvm", "lvm-thin", "zfs", "ceph-rbd", "iscsi", "passthrough"):
            fmt = "raw"
    tags = {
        "platform": "proxmox",
        # qemu-server: a disk without cache= runs with cache=none.
        "cache_mode": opts.get("cache", "none"),
        # qemu-server's aio default depends on the storage and QEMU version.
        "aio_mode": opts.get("aio", "default"),
        "iothread": "yes" if opts.get("iothread") == "1" else "no",
        "image_format": fmt or "unknown",
        "storage_backend": backend,
        "disk_bus": PROXMOX_BUS[bus],
    }
    if bus == "scsi" and scsihw and not scsihw.startswith("virtio-scsi"):
        tags["disk_bus"] = "scsi"
    return tags


def libvirt(xml_text: str, target_dev: str | None = None) -> dict:
    """Tags for one disk of ``virsh dumpxml`` (the first disk by default)."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not libvirt domain XML: {exc}") from None
    disks = [d for d in root.iter("disk") if d.get("device", "disk") == "disk"]
    if not disks:
        raise ValueError("no <disk device='disk'> in the domain XML")
    disk = disks[0]
    if target_dev:
        matches = [
            d
            for d in disks
            if (
                d.find("target") is not None
                and d.find("target").get("dev") == target_dev
            )
        ]
        if not matches:
            raise ValueError(f"no disk with target dev {target_dev!r}")
        disk = matches[0]
    driver = disk.find("driver")
    target = disk.find("target")
    source = disk.find("source")
    dtype = disk.get("type", "file")
    bus = target.get("bus") if target is not None else None
    controller_model = None
    for ctl in root.iter("controller"):
        if ctl.get("type") == "scsi":
            controller_model = ctl.get("model")
    bus_tag = {"virtio": "virtio-blk", "sata": "sata", "ide": "ide", "usb": "usb"}.get(
        bus or "", "unknown"
    )
    if bus == "scsi":
        bus_tag = "virtio-scsi" if controller_model == "virtio-scsi" else "scsi"
    if bus == "nvme":
        bus_tag = "nvme"
    backend = {
        "file": "file",
        "block": "passthrough",
        "network": "other",
        "volume": "other",
    }.get(dtype, "unknown")
    if source is not None:
        dev = source.get("dev") or ""
        if dev.startswith("/dev/mapper/") or re.match(r"^/dev/[^/]+/[^/]+$", dev):
            backend = "lvm"
        if source.get("protocol") == "rbd":
            backend = "ceph-rbd"
        elif source.get("protocol") == "iscsi":
            backend = "iscsi"
        elif source.get("protocol") == "nfs":
            backend = "nfs"
    cache = driver.get("cache") if driver is not None else None
    io = driver.get("io") if driver is not None else None
    return {
        "platform": "libvirt",
        # libvirt leaves cache= to QEMU, whose default is writeback.
        "cache_mode": cache or "writeback",
        "aio_mode": io or "default",
        "iothread": "yes" if driver is not None and driver.get("iothread") else "no",
        "image_format": (driver.get("type") if driver is not None else None)
        or "unknown",
        "storage_backend": backend,
        "disk_bus": bus_tag,
    }


def xen(xl_json: str) -> dict:
    """Tags from ``xl list -l DOMAIN`` (JSON)."""
    try:
        doc = json.loads(xl_json)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not xl list -l JSON: {exc}") from None
    if isinstance(doc, list):
        doc = doc[0] if doc else {}
    config = doc.get("config", doc)
    disks = config.get("disks") or []
    if not disks:
        raise ValueError("no disks in the xl configuration")
    disk = disks[0]
    fmt = (disk.get("format") or "raw").lower()
    backend_type = (disk.get("backend") or "").lower()
    pdev = disk.get("pdev_path") or ""
    if pdev.startswith("/dev/"):
        storage = (
            "lvm" if re.match(r"^/dev/(mapper/|[^/]+/[^/]+$)", pdev) else "passthrough"
        )
    else:
        storage = "file"
    c_info = config.get("c_info", {})
    kind = (c_info.get("type") or "").lower()
    return {
        "platform": "xen",
        "virtualization": {"pv": "xen-pv", "hvm": "xen-hvm", "pvh": "xen-hvm"}.get(
            kind, "unknown"
        ),
        "image_format": {"raw": "raw", "qcow2": "qcow2", "vhd": "vhd"}.get(
            fmt, "unknown"
        ),
        "storage_backend": storage,
        "disk_bus": "xen-blkfront",
        # Xen's blkback/qdisk caching is not a QEMU cache= mode.
        "cache_mode": "default",
        "aio_mode": "default",
        "note": f"xl backend {backend_type or 'default'}",
    }


def qemu_cmdline(cmdline, drive_id: str | None = None) -> dict:
    """Tags from a QEMU command line (a string, or the argv list).

    ``drive_id`` picks the drive (-drive id=... or -blockdev node-name=...);
    by default the last data drive, which is where benchmark disks are added.
    """
    argv = shlex.split(cmdline) if isinstance(cmdline, str) else list(cmdline)
    drives, blockdevs, devices = [], [], []
    accel = None
    machine = "pc"
    for i, arg in enumerate(argv):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if arg in ("-drive", "--drive"):
            drives.append(_kv(value))
        elif arg in ("-blockdev", "--blockdev"):
            blockdevs.append(_blockdev(value))
        elif arg in ("-device", "--device"):
            devices.append(_kv(value))
        elif arg in ("-accel",):
            accel = value.split(",")[0]
        elif arg in ("-machine", "-M"):
            opts = _kv(value)
            machine = opts.get("type", opts.get("_volume", machine))
            if "accel" in opts:
                accel = opts["accel"].split(":")[0]
        elif arg == "-enable-kvm":
            accel = "kvm"
    candidates = [
        d for d in drives if d.get("media") != "cdrom" and d.get("if") != "pflash"
    ]
    if not candidates and not blockdevs:
        raise ValueError("no -drive or -blockdev in the QEMU command line")
    virt = {"kvm": "kvm", "tcg": "qemu-tcg"}.get(accel or "tcg", "unknown")
    if candidates and not blockdevs:
        drive = candidates[-1]
        if drive_id:
            found = [d for d in candidates if d.get("id") == drive_id]
            if not found:
                raise ValueError(f"no -drive with id={drive_id}")
            drive = found[0]
        cache = drive.get("cache", "writeback")  # QEMU's default
        if cache not in ("none", "writethrough", "writeback", "directsync", "unsafe"):
            raise ValueError(f"unknown cache mode {cache!r}")
        bus = _bus_for(drive.get("if", "ide"), drive.get("id"), devices, machine)
        return {
            "platform": "qemu",
            "virtualization": virt,
            "cache_mode": cache,
            "aio_mode": drive.get("aio", "threads"),
            "image_format": drive.get("format", "unknown"),
            "storage_backend": _backend_of(drive.get("file", "")),
            "disk_bus": bus,
            "iothread": "no",
        }
    # -blockdev: the format node on top of a protocol node.
    nodes = {b.get("node-name"): b for b in blockdevs}
    fmt_nodes = [
        b
        for b in blockdevs
        if b.get("driver") in ("qcow2", "raw", "vmdk", "vpc", "vdi")
    ]
    top = fmt_nodes[-1] if fmt_nodes else blockdevs[-1]
    if drive_id:
        top = nodes.get(drive_id) or top
    proto = nodes.get(top.get("file")) if isinstance(top.get("file"), str) else None
    proto = proto or top
    direct = _flag(top, proto, "cache.direct", False)
    no_flush = _flag(top, proto, "cache.no-flush", False)
    dev = next((d for d in devices if d.get("drive") == top.get("node-name")), {})
    writeback = dev.get("write-cache", "on") != "off"
    cache = CACHE_FLAGS.get((writeback, direct, no_flush), "unknown")
    return {
        "platform": "qemu",
        "virtualization": virt,
        "cache_mode": cache,
        "aio_mode": proto.get("aio", "threads"),
        "image_format": top.get("driver")
        if top.get("driver") in ("qcow2", "raw", "vmdk")
        else "unknown",
        "storage_backend": _backend_of(proto.get("filename", "")),
        "disk_bus": _device_bus(dev.get("_volume", "")),
        "iothread": "yes" if dev.get("iothread") else "no",
    }


def _blockdev(value: str) -> dict:
    value = value.strip()
    if value.startswith("{"):
        doc = json.loads(value)
        flat = {}

        def walk(prefix, obj):
            for k, v in obj.items():
                if isinstance(v, dict):
                    walk(f"{prefix}{k}.", v)
                else:
                    flat[f"{prefix}{k}"] = v

        walk("", doc)
        if isinstance(doc.get("file"), dict):
            flat["_inline_file"] = doc["file"]
        return flat
    return _kv(value)


def _flag(top: dict, proto: dict, key: str, default: bool) -> bool:
    for node in (top, proto):
        if key in node:
            v = node[key]
            return v is True or str(v).lower() in ("on", "true", "1")
    return default


def _backend_of(path: str) -> str:
    if path.startswith("/dev/mapper/") or re.match(r"^/dev/[^/]+/[^/]+$", path or ""):
        return "lvm"
    if path.startswith("/dev/"):
        return "passthrough"
    if path.startswith(("rbd:", "iscsi:", "nfs:")):
        return {"rbd": "ceph-rbd", "iscsi": "iscsi", "nfs": "nfs"}[path.split(":")[0]]
    return "file" if path else "unknown"


def _device_bus(driver: str) -> str:
    return {
        "virtio-blk-pci": "virtio-blk",
        "virtio-blk": "virtio-blk",
        "scsi-hd": "virtio-scsi",
        "ide-hd": "sata",
        "nvme": "nvme",
        "usb-storage": "usb",
    }.get(driver, "unknown")


def _bus_for(interface: str, drive_id, devices: list, machine: str = "pc") -> str:
    if interface == "none":
        dev = next((d for d in devices if d.get("drive") == drive_id), {})
        driver = dev.get("_volume", "")
        if driver == "ide-hd":
            bus = dev.get("bus", "")
            # ide-hd on an AHCI controller: an added ich9-ahci ("ahci0.0"), or
            # q35's built-in AHCI, whose buses are named "ide.N".
            q35 = "q35" in machine
            return (
                "sata" if ("ahci" in bus or (q35 and bus.startswith("ide."))) else "ide"
            )
        if driver == "scsi-hd":
            drivers = {d.get("_volume") for d in devices}
            return "virtio-scsi" if "virtio-scsi-pci" in drivers else "scsi"
        return _device_bus(driver)
    if interface == "ide" and "q35" in machine:
        return "sata"  # q35's -drive if=ide lands on its AHCI controller
    known = {"virtio": "virtio-blk", "ide": "ide", "scsi": "scsi", "sd": "other"}
    return known.get(interface, "unknown")
