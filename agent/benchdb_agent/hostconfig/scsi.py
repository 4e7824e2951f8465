"""SCSI passthrough (QEMU ``scsi-block``): what the guest's disk really runs.

With ``scsi-block`` (libvirt ``<disk device='lun'>``, Proxmox ``scsiblock=1``
on a host SCSI disk) QEMU sends the guest's reads and writes to the host disk
as SG_IO ioctls (hw/scsi/scsi-disk.c ``scsi_block_do_sgio``), which
block/file-posix.c runs in its thread pool (``hdev_co_ioctl``) whatever
``aio=`` says, and which bypass the host page cache.  The guest sees the
disk's own write cache and its SYNCHRONIZE CACHE reaches the disk: a disk
with its write cache on behaves as ``cache=none``, one with it off as
``directsync``.  Which one is in the host's sysfs
(``/sys/class/block/NAME/device/scsi_disk/*/cache_type``), so it is known on
the host and unknown elsewhere.

qemu-server uses scsi-block for ``scsiblock=1`` only when an INQUIRY of the
path answers peripheral type 0 (a disk; ``Drive.pm`` ``get_scsi_device_type``),
otherwise scsi-hd; the host's sysfs has the same type
(``/sys/class/block/NAME/device/type``).
"""

from __future__ import annotations

import glob
import os
from typing import Optional, Tuple

SYSFS = "/sys"
THREADS_WHY = (
    "scsi-block: reads and writes are SG_IO ioctls, run in QEMU's thread pool "
    "whatever aio= says (file-posix hdev_co_ioctl)"
)


def _device_dir(path: str) -> Optional[str]:
    name = os.path.basename(os.path.realpath(path)) if path.startswith("/dev/") else ""
    device = os.path.join(SYSFS, "class", "block", name, "device")
    return device if name and os.path.isdir(device) else None


def is_scsi_disk(path: str) -> Tuple[Optional[bool], str]:
    """Whether ``path`` is a SCSI disk (peripheral type 0) on this host, or
    None when the device is not here."""
    device = _device_dir(path)
    if device is None:
        return None, f"{path} is not a device of this machine"
    try:
        with open(os.path.join(device, "type")) as f:
            kind = f.read().strip()
    except OSError:
        return False, f"{path} is not a SCSI device (no SCSI peripheral type)"
    if kind == "0":
        return True, f"{path} is a SCSI disk (peripheral type 0, sysfs)"
    return False, f"{path} has SCSI peripheral type {kind}, not a disk"


def cache(path: str) -> Tuple[str, Optional[bool], str]:
    """(cache_mode, write cache on?, why) of a scsi-block disk."""
    device = _device_dir(path)
    found = sorted(
        glob.glob(os.path.join(device or "", "scsi_disk", "*", "cache_type"))
    )
    if device is None or not found:
        return (
            "unknown",
            None,
            "scsi-block: SG_IO to the host disk, no host page cache; the guest "
            f"sees the disk's own write cache, which is read on the host ({path} "
            "is not a SCSI disk of this machine)",
        )
    with open(found[0]) as f:
        cache_type = f.read().strip()
    write_back = cache_type.startswith("write back")
    mode = "none" if write_back else "directsync"
    return (
        mode,
        write_back,
        f"scsi-block: SG_IO to the host disk, no host page cache, and the guest "
        f"sees the disk's own write cache: {cache_type!r} (sysfs cache_type)",
    )
