"""Disks of a Proxmox VE VM config, with qemu-server's effective values.

The defaults follow qemu-server (``src/PVE/QemuServer/Drive.pm``
``drive_uses_cache_direct``, ``aio_cmdline_option``,
``storage_allows_io_uring_default``; ``Blockdev.pm``; ``OVMF.pm``):

- cache: no ``cache=`` means ``cache.direct=on`` (QEMU ``none``), except on a
  CD-ROM and on BTRFS storage without ``nocow`` (no O_DIRECT there: QEMU
  ``writeback``); an EFI disk without ``cache=`` gets ``cache=writeback``.
- aio: ``aio=`` wins; else io_uring, except LVM and CIFS storage and krbd with
  a non-direct cache: there native with O_DIRECT, threads without.  librbd
  (rbd without krbd), ZFS over iSCSI and iSCSI direct are not file I/O: QEMU
  gets no aio for them.
- iothread: ``iothread=1`` on virtio disks, and on scsi disks only with
  ``scsihw: virtio-scsi-single``.
- no ``scsihw:`` is the LSI 53C895A (``lsi``).
- the machine version decides how disks reach QEMU (``QemuServer.pm``: "for
  the switch to -blockdev", ``Machine.pm`` ``get_vm_machine``): 10.0 and later
  ``-blockdev``, earlier ``-drive``.  It only changes the EFI vars disk: on
  ``-drive if=pflash`` qemu-server passes no ``aio=`` (QEMU's default,
  threads) and no ``cache=`` (QEMU's default, writeback).  The version is the
  one pinned in ``machine:``; a Windows VM without one is pinned to 5.1 (or
  ``meta: creation-qemu`` from 9.1 on); otherwise it is the installed QEMU's
  (``qemu_version``, or ``kvm --version`` on a Proxmox VE host).
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Dict, List, Optional, Tuple

from .. import vocab
from . import scsi
from .model import SET, Disk
from .qemu import set_scsi_block

THROTTLE_KEY = re.compile(r"^(bps|iops|mbps)(_rd|_wr)?(_max)?$")
DISK_KEY = re.compile(r"^(?P<bus>ide|sata|scsi|virtio|efidisk|tpmstate)(?P<n>\d+)$")
BACKEND = {
    "dir": "file",
    "btrfs": "file",
    "nfs": "nfs",
    "cifs": "other",
    "cephfs": "file",
    "glusterfs": "other",
    "lvm": "lvm",
    "lvmthin": "lvm-thin",
    "zfspool": "zfs",
    "zfs": "zfs",
    "rbd": "ceph-rbd",
    "iscsi": "iscsi",
    "iscsidirect": "iscsi",
    "pbs": "other",
    "esxi": "other",
}
BLOCK_STORAGES = {"lvm", "lvmthin", "zfspool", "zfs", "rbd", "iscsi", "iscsidirect"}
SCSIHW = {
    "virtio-scsi-pci": ("virtio-scsi", "VirtIO SCSI"),
    "virtio-scsi-single": ("virtio-scsi", "VirtIO SCSI single"),
    "lsi": ("scsi", "LSI 53C895A"),
    "lsi53c810": ("scsi", "LSI 53C810"),
    "megasas": ("scsi", "MegaRAID SAS"),
    "pvscsi": ("vmware-pvscsi", "VMware PVSCSI"),
}
CACHE_MODES = vocab.CACHE_MODES


def parse_config(text: str) -> Dict[str, str]:
    """key -> value of the current config: the part before the first
    ``[section]`` (snapshots, pending changes, cloud-init state follow it)."""
    conf: Dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if not stripped or stripped.startswith("#"):
            continue
        m = re.match(r"^([a-z][a-z0-9_-]*):\s*(.*)$", stripped)
        if m:
            conf[m.group(1)] = m.group(2).strip()
    return conf


def parse_storage_cfg(text: str) -> Dict[str, dict]:
    """storage id -> {"type": ..., property: value} from /etc/pve/storage.cfg."""
    storages: Dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^([a-z][a-z0-9]*):\s*(\S+)\s*$", line)
        if m and not line[0].isspace():
            current = {"type": m.group(1)}
            storages[m.group(2)] = current
        elif current is not None:
            parts = line.strip().split(None, 1)
            current[parts[0]] = parts[1].strip() if len(parts) > 1 else "1"
    return storages


def parse_drive(spec: str) -> Dict[str, str]:
    opts: Dict[str, str] = {}
    for n, part in enumerate(spec.split(",")):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            opts[k.strip()] = v.strip()
        elif n == 0:
            opts["file"] = part
    return opts


def _truthy(value: Optional[str]) -> bool:
    return str(value or "").strip().lower() in ("1", "yes", "on", "true")


def _format(volume: str, opts: dict, stype: Optional[str]) -> Tuple[str, str]:
    if opts.get("format"):
        fmt = opts["format"]
        return (fmt if fmt in ("raw", "qcow2", "vmdk") else "unknown"), SET
    m = re.search(r"\.(raw|qcow2|vmdk|iso)$", volume)
    if m:
        fmt = "raw" if m.group(1) == "iso" else m.group(1)
        return fmt, "from the volume name"
    if stype in BLOCK_STORAGES:
        return "raw", f"{stype} storage holds raw volumes"
    if volume.startswith("/dev/"):
        return "raw", "a block device"
    return "unknown", "no format= and no extension"


_MACHINE_VERSION = re.compile(r"^(?:pc(?:-i440fx|-q35)?|virt)-(\d+)\.(\d+)")
_WINDOWS = re.compile(r"^(wxp|w2k|w2k3|w2k8|wvista|win7|win8|win10|win11)$")


def installed_qemu_version() -> Optional[str]:
    """``kvm --version`` on a Proxmox VE host (``/etc/pve`` present), else None:
    elsewhere the local QEMU is not the one that runs the VM."""
    if not os.path.isdir("/etc/pve"):
        return None
    try:
        out = subprocess.run(
            ["kvm", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\d+\.\d+)", out)
    return m.group(1) if m else None


def machine_version(
    conf: Dict[str, str], qemu_version: Optional[str]
) -> Tuple[Optional[Tuple[int, int]], str]:
    """(major, minor) of the machine version qemu-server starts the VM with,
    and why; None when it is the installed QEMU's and that is not known."""
    machine = conf.get("machine", "")
    machine_type = re.sub(r"^type=", "", machine.split(",")[0])
    m = _MACHINE_VERSION.match(machine_type)
    if m:
        return (int(m.group(1)), int(m.group(2))), f"machine: {machine_type}"
    if _WINDOWS.match(conf.get("ostype", "")):
        meta = re.search(r"creation-qemu=(\d+)\.(\d+)", conf.get("meta", ""))
        if meta and (int(meta.group(1)), int(meta.group(2))) >= (9, 1):
            version = (int(meta.group(1)), int(meta.group(2)))
            return version, "Windows VM pinned to its meta: creation-qemu"
        return (5, 1), "Windows VM without a version or creation-qemu >= 9.1: 5.1"
    qemu_version = qemu_version or installed_qemu_version()
    if qemu_version:
        m = re.match(r"^(\d+)\.(\d+)", qemu_version)
        if not m:
            raise ValueError(f"QEMU version {qemu_version!r} is not MAJOR.MINOR")
        return (int(m.group(1)), int(m.group(2))), f"the installed QEMU {qemu_version}"
    return None, "no machine version pinned and the installed QEMU is not known"


def disks(
    text: str, storage_cfg: Optional[str] = None, qemu_version: Optional[str] = None
) -> List[Disk]:
    conf = parse_config(text)
    storages = parse_storage_cfg(storage_cfg) if storage_cfg else None
    version, version_why = machine_version(conf, qemu_version)
    scsihw = conf.get("scsihw")
    machine = conf.get("machine", "")
    q35 = "q35" in machine
    kvm_off = conf.get("kvm") == "0"
    out: List[Disk] = []
    for key, value in conf.items():
        m = DISK_KEY.match(key)
        if not m:
            continue
        iface = m.group("bus")
        opts = parse_drive(value)
        volume = opts.get("file", "")
        disk = Disk(id=key, platform="proxmox", volume=volume)
        disk.aliases.append(f"drive-{key}")
        if conf.get("template") == "1":
            disk.notes.append(
                "template: never started as a VM (qemu-server attaches IDE/SATA "
                "disks as ide-cd for backups)"
            )
        if conf.get("template") == "1":
            disk.set(
                "virtualization",
                "qemu-tcg",
                "template: qemu-server starts it with accel=tcg, for backups only",
            )
        elif kvm_off:
            disk.set("virtualization", "qemu-tcg", "set in the config (kvm: 0)")
        else:
            disk.set("virtualization", "kvm", "Proxmox default (kvm: 1)")
        limits = {
            k: v
            for k, v in opts.items()
            if THROTTLE_KEY.match(k) and v.strip() not in ("", "0")
        }
        if limits:
            shown = ", ".join(f"{k}={v}" for k, v in sorted(limits.items()))
            disk.notes.append(f"throttled (qemu-server's throttle-group): {shown}")
        cdrom = opts.get("media") == "cdrom"
        if iface == "efidisk":
            disk.kind = "efivars"
        elif iface == "tpmstate":
            disk.kind = "tpmstate"
        elif "cloudinit" in volume:
            disk.kind = "cloudinit"
        elif cdrom:
            disk.kind = "cdrom"
        # Storage
        storage_id, sep, volname = volume.partition(":")
        scfg: Optional[dict] = None
        stype: Optional[str] = None
        if volume == "cdrom":
            volume = "/dev/cdrom"  # the host's CD drive
        if volume.startswith("/"):
            disk.path = volume
            backend = "passthrough" if volume.startswith("/dev/") else "file"
            disk.set("storage_backend", backend, "a path, not a storage volume")
        elif volume in ("none", ""):
            disk.set("storage_backend", "unknown", "no medium")
        elif not sep:
            disk.set("storage_backend", "unknown", f"not a volume id: {volume}")
        elif storages is None:
            disk.set(
                "storage_backend",
                "unknown",
                f"storage {storage_id!r}: no storage.cfg given",
            )
        elif storage_id not in storages:
            raise ValueError(
                f"{key}: storage {storage_id!r} is not in storage.cfg "
                f"(it has {', '.join(storages) or 'none'})"
            )
        else:
            scfg = storages[storage_id]
            stype = scfg["type"]
            why = f"{stype} storage {storage_id!r}"
            if stype == "zfs":
                why += " (ZFS over iSCSI)"
            disk.set("storage_backend", BACKEND.get(stype, "other"), why)
        storage_known = scfg is not None or volume.startswith("/")
        fmt, fwhy = _format(volname or volume, opts, stype)
        disk.set("image_format", fmt, fwhy)
        # EFI vars on -drive if=pflash: qemu-server passes neither cache= nor
        # aio= there (only cache=writeback for librbd), whatever the config says
        legacy_efi = (
            disk.kind == "efivars" and version is not None and version < (10, 0)
        )
        legacy_why = (
            f"qemu-server's -drive if=pflash (machine version "
            f"{version[0]}.{version[1]} < 10.0, {version_why})"
            if legacy_efi
            else ""
        )
        # Cache
        cache = opts.get("cache")
        if legacy_efi:
            direct = False
            disk.set("cache_mode", "writeback", f"QEMU default on {legacy_why}")
        elif cache:
            if cache not in CACHE_MODES:
                raise ValueError(f"{key}: unknown cache mode {cache!r}")
            direct = cache in ("none", "directsync")
            disk.set("cache_mode", cache, f"set in the config (cache={cache})")
        elif disk.kind == "efivars":
            direct = False
            disk.set("cache_mode", "writeback", "Proxmox default for EFI disks")
        elif disk.kind in ("cdrom", "cloudinit") and cdrom:
            direct = False
            disk.set(
                "cache_mode",
                "writeback",
                "Proxmox default for CD-ROMs (host page cache; QEMU default)",
            )
        elif disk.kind == "tpmstate":
            direct = False
            disk.set("cache_mode", "unknown", "TPM state is used by swtpm, not QEMU")
        elif stype == "btrfs" and not _truthy(scfg.get("nocow")):
            direct = False
            disk.set(
                "cache_mode",
                "writeback",
                "Proxmox default for BTRFS storage (no O_DIRECT): QEMU writeback",
            )
        elif not storage_known and volume not in ("none", ""):
            direct = True
            disk.set(
                "cache_mode",
                "unknown",
                "Proxmox default: none, or writeback on BTRFS storage; "
                "give --storage-cfg to know which",
            )
        else:
            direct = True
            what = f" for {stype} storage" if stype else ""
            disk.set("cache_mode", "none", f"Proxmox default{what} (cache=none)")
        if disk.cache_mode in ("none", "writeback", "writethrough", "directsync"):
            wb = disk.cache_mode in ("none", "writeback")
            disk.cache_flags = {"writeback": wb, "direct": direct, "no-flush": False}
        elif disk.cache_mode == "unsafe":
            disk.cache_flags = {"writeback": True, "direct": False, "no-flush": True}
        # aio
        if volume in ("none", ""):
            disk.set("aio", "unknown", "no medium")
        elif disk.kind == "efivars" and version is None:
            disk.set(
                "aio",
                "unknown",
                "EFI disk: io_uring on -blockdev (machine version 10.0 and "
                "later), threads on -drive if=pflash before; "
                + version_why
                + " (give the QEMU version)",
            )
        elif legacy_efi:
            no_aio = {k: v for k, v in opts.items() if k != "aio"}
            _aio(disk, no_aio, stype, scfg, direct, storage_known)
            if disk.aio not in ("default", "unknown"):
                disk.set("aio", "threads", f"QEMU default: no aio= on {legacy_why}")
        else:
            _aio(disk, opts, stype, scfg, direct, storage_known)
        # bus
        _bus(disk, iface, scsihw, q35)
        if iface == "scsi" and _truthy(opts.get("scsiblock")) and disk.kind == "disk":
            _scsiblock(disk, volume)
        # iothread
        if _truthy(opts.get("iothread")):
            if iface == "virtio" or (
                iface == "scsi" and scsihw == "virtio-scsi-single"
            ):
                disk.set("iothread", "yes", "set in the config (iothread=1)")
                prefix = "virtioscsi" if iface == "scsi" else iface
                disk.iothread_id = f"iothread-{prefix}{m.group('n')}"
            else:
                disk.set(
                    "iothread",
                    "no",
                    "iothread=1 is ignored here: only virtio disks and scsi "
                    "disks on virtio-scsi-single get one",
                )
        else:
            disk.set("iothread", "no", "Proxmox default (no iothread)")
        out.append(disk)
    if not out:
        raise ValueError(
            "no disk lines (scsiN:, virtioN:, sataN:, ideN:, efidisk0:) in the "
            "Proxmox config"
        )
    return out


def _scsiblock(disk: Disk, volume: str) -> None:
    """scsiblock=1: qemu-server attaches a path that answers INQUIRY as a
    SCSI disk (type 0) with scsi-block, anything else with scsi-hd."""
    if not volume.startswith("/"):
        disk.notes.append(
            "scsiblock=1 has no effect on a storage volume (qemu-server asks "
            "INQUIRY only of a path)"
        )
        return
    is_scsi, why = scsi.is_scsi_disk(volume)
    if is_scsi:
        set_scsi_block(disk)
        disk.sources["aio"] += f"; scsiblock=1 and {why}"
    elif is_scsi is None:
        for name in ("cache_mode", "aio"):
            disk.set(
                name,
                "unknown",
                f"scsiblock=1: scsi-block (the disk's own write cache, SG_IO in "
                f"QEMU's thread pool) if {volume} is a SCSI disk, else scsi-hd "
                f"({getattr(disk, name)}); {why}",
            )
        disk.cache_flags = None
    else:
        disk.notes.append(f"scsiblock=1 gives scsi-hd here: {why}")


def _aio(disk, opts, stype, scfg, direct, storage_known) -> None:
    aio = opts.get("aio")
    no_file_io = {
        "zfs": "ZFS over iSCSI: QEMU's iscsi driver (libiscsi) does its own I/O",
        "iscsidirect": "iSCSI direct: QEMU's iscsi driver does its own I/O",
    }
    if stype == "rbd" and not _truthy(scfg.get("krbd")):
        disk.set("aio", "default", "librbd: QEMU's rbd driver does its own I/O")
        return
    if stype in no_file_io:
        disk.set("aio", "default", no_file_io[stype])
        return
    if disk.kind == "tpmstate":
        disk.set("aio", "unknown", "TPM state is used by swtpm, not QEMU")
        return
    if aio:
        disk.set("aio", aio, f"set in the config (aio={aio})")
        if aio == "native" and not direct:
            disk.notes.append(
                "aio=native without O_DIRECT (cache none/directsync): QEMU "
                "refuses to start this disk"
            )
        return
    if not storage_known:
        disk.set(
            "aio",
            "unknown",
            "Proxmox default depends on the storage type; give --storage-cfg",
        )
        return
    if stype == "rbd" and not direct:
        why = "Proxmox default for krbd with a cache that is not direct"
    elif stype == "lvm":
        why = "Proxmox default for LVM storage"
    elif stype == "cifs":
        why = "Proxmox default for CIFS storage"
    else:
        disk.set("aio", "io_uring", "Proxmox default (io_uring)")
        return
    if direct:
        disk.set("aio", "native", why + " (native with O_DIRECT)")
    else:
        disk.set("aio", "threads", why + " (threads without O_DIRECT)")


def _bus(disk: Disk, iface: str, scsihw: Optional[str], q35: bool) -> None:
    if iface == "scsi":
        hw = scsihw or "lsi"
        bus, name = SCSIHW.get(hw, ("scsi", hw))
        if scsihw:
            disk.set("bus", bus, f"set in the config (scsihw: {hw}, {name})")
        else:
            disk.set("bus", bus, "Proxmox default: no scsihw: is lsi (LSI 53C895A)")
    elif iface == "virtio":
        disk.set("bus", "virtio-blk", "virtioN: disk")
    elif iface == "sata":
        disk.set("bus", "sata", "sataN: disk (AHCI)")
    elif iface == "ide":
        if q35:
            disk.set("bus", "sata", "ideN: on q35, the built-in AHCI (SATA)")
        else:
            disk.set("bus", "ide", "ideN: disk")
    else:
        disk.set("bus", "other", f"{iface}: not a guest disk bus")
