"""Disks of a libvirt domain XML (``virsh dumpxml``), as QEMU runs them.

libvirt's defaults are QEMU's: with no ``cache=`` (or ``cache='default'``)
libvirt passes no cache mode, so the disk runs writeback; with no ``io=`` it
passes no aio, so file and block disks run ``threads``; a disk with no driver
``type`` is raw (libvirt does not let QEMU probe formats).  ``device='lun'``
is a SCSI passthrough of the host device (scsi-block).  ``bus='sata'`` is an
AHCI controller (on q35 the built-in one).  iothreads come from
``<driver iothread='N'>`` or ``<driver><iothreads>`` on virtio disks, and from
the virtio-scsi controller's ``<driver iothread='N'>`` for scsi disks.

A ``<domain type='xen'>`` is run by libvirt's libxl driver, not by QEMU: each
``<disk>`` becomes a libxl disk the way ``libxlMakeDisk`` (src/libxl/
libxl_conf.c) makes it, and is read by the Xen rules (:mod:`.xen`): driver
``phy`` is blkback, ``qemu`` and ``file`` are qdisk, ``tap``/``tap2`` blktap
(qdisk for qcow/qcow2/qed), no driver name is raw with the backend left to
libxl; ``cache=`` and ``io=`` have no effect there.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Dict, List, Optional

from .model import MODE_FLAGS, Disk
from .qemu import backend_of_path, set_scsi_block

NETWORK_BACKEND = {
    "rbd": "ceph-rbd",
    "iscsi": "iscsi",
    "nfs": "nfs",
}
SCSI_MODELS = {
    "virtio-scsi": "virtio-scsi",
    "virtio-transitional": "virtio-scsi",
    "virtio-non-transitional": "virtio-scsi",
    "vmpvscsi": "vmware-pvscsi",
}
FORMATS = {"raw": "raw", "qcow2": "qcow2", "vmdk": "vmdk", "vpc": "vhd", "vdi": "vdi"}


def _letters_index(dev: str, prefix_len: int = 2) -> Optional[int]:
    """vda -> 0, vdb -> 1, vdaa -> 26 (libvirt's virDiskNameToIndex)."""
    tail = dev[prefix_len:]
    if not tail.isalpha():
        return None
    idx = 0
    for ch in tail:
        idx = idx * 26 + (ord(ch) - ord("a") + 1)
    return idx - 1


def disks(xml_text: str) -> List[Disk]:
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not libvirt domain XML: {exc}") from None
    if root.tag != "domain":
        raise ValueError(f"not libvirt domain XML: the root is <{root.tag}>")
    dom_type = root.get("type", "")
    if dom_type == "xen":
        return _xen_disks(root)
    os_type = root.find("os/type")
    machine = os_type.get("machine", "") if os_type is not None else ""
    q35 = "q35" in machine
    controllers: Dict[tuple, ET.Element] = {}
    for ctl in root.iter("controller"):
        controllers[(ctl.get("type"), ctl.get("index", "0"))] = ctl
    groups = {
        (g.findtext("group_name") or "").strip(): _limits(g)
        for g in root.findall("throttlegroups/throttlegroup")
    }
    out: List[Disk] = []
    for el in root.iter("disk"):
        disk = _disk(el, dom_type, q35, controllers)
        for f in el.findall("throttlefilters/throttlefilter"):
            limits = groups.get(f.get("group", ""), {})
            if limits:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(limits.items()))
                disk.notes.append(
                    f"throttled by throttle group {f.get('group')}: {shown}"
                )
        iotune = el.find("iotune")
        if iotune is not None and _limits(iotune):
            shown = ", ".join(f"{k}={v}" for k, v in sorted(_limits(iotune).items()))
            disk.notes.append(f"throttled by <iotune>: {shown}")
        out.append(disk)
    if not out:
        raise ValueError("no <disk> in the domain XML")
    return out


def _limits(el: ET.Element) -> Dict[str, str]:
    """The non-zero limits (total_bytes_sec, read_iops_sec, ...) of an
    <iotune> or <throttlegroup>."""
    return {
        child.tag: (child.text or "").strip()
        for child in el
        if child.tag != "group_name" and (child.text or "").strip() not in ("", "0")
    }


def _disk(el: ET.Element, dom_type: str, q35: bool, controllers) -> Disk:
    dtype = el.get("type", "file")
    device = el.get("device", "disk")
    target = el.find("target")
    driver = el.find("driver")
    source = el.find("source")
    dev = target.get("dev", "") if target is not None else ""
    bus = target.get("bus", "") if target is not None else ""
    disk = Disk(id=dev or f"disk{len(controllers)}", platform="libvirt")
    alias = el.find("alias")
    if alias is not None and alias.get("name"):
        disk.aliases.append(alias.get("name"))
    if dom_type == "kvm":
        disk.set("virtualization", "kvm", "<domain type='kvm'>")
    elif dom_type == "qemu":
        disk.set("virtualization", "qemu-tcg", "<domain type='qemu'> (TCG)")
    disk.kind = {"cdrom": "cdrom", "floppy": "floppy"}.get(device, "disk")
    drv = driver.attrib if driver is not None else {}
    # path and storage
    if dtype == "file":
        path = source.get("file", "") if source is not None else ""
        backend, why = ("file", "<disk type='file'>") if path else ("unknown", "")
    elif dtype == "block":
        path = source.get("dev", "") if source is not None else ""
        backend, why = backend_of_path(path)
        why = f"<disk type='block'>, {why}"
    elif dtype == "network":
        proto = source.get("protocol", "") if source is not None else ""
        path = f"{proto}:{source.get('name', '')}" if source is not None else ""
        backend = NETWORK_BACKEND.get(proto, "other")
        why = f"<source protocol='{proto}'>"
    elif dtype == "volume":
        pool = source.get("pool", "") if source is not None else ""
        vol = source.get("volume", "") if source is not None else ""
        path = f"{pool}/{vol}"
        disk.volume = path
        backend, why = "unknown", f"storage pool {pool!r}: its type is not in the XML"
    elif dtype == "nvme":
        addr = source.find("address") if source is not None else None
        a = addr.attrib if addr is not None else {}
        path = "nvme://{}:{}:{}.{}/{}".format(
            a.get("domain", "0x0000")[2:],
            a.get("bus", "0x00")[2:],
            a.get("slot", "0x00")[2:],
            a.get("function", "0x0")[2:],
            source.get("namespace", "1") if source is not None else "1",
        )
        backend, why = "passthrough", "<disk type='nvme'>: a host NVMe device"
    else:
        path, backend, why = "", "other", f"<disk type='{dtype}'>"
    disk.path = path
    if path or dtype in ("volume", "nvme"):
        disk.set("storage_backend", backend, why)
    else:
        disk.set("storage_backend", "unknown", "no medium")
    # format
    fmt = drv.get("type")
    if fmt:
        disk.set("image_format", FORMATS.get(fmt, "unknown"), "set in the config")
    elif path:
        disk.set("image_format", "raw", "libvirt default (no driver type: raw)")
    # cache
    cache = drv.get("cache")
    if cache and cache != "default":
        if cache not in MODE_FLAGS:
            raise ValueError(f"{dev}: unknown cache mode {cache!r}")
        wb, direct, no_flush = MODE_FLAGS[cache]
        disk.set_cache(wb, direct, no_flush, f"set in the config (cache='{cache}')")
    else:
        what = "cache='default'" if cache else "no cache="
        disk.set_cache(
            True,
            False,
            False,
            f"QEMU default ({what}: libvirt passes no cache mode, so writeback)",
        )
    # aio
    io = drv.get("io")
    if dtype in ("network", "nvme"):
        disk.set("aio", "default", f"the {dtype} driver does its own I/O; no aio")
    elif io:
        disk.set("aio", io, f"set in the config (io='{io}')")
        if io == "native" and not (disk.cache_flags or {}).get("direct"):
            disk.notes.append("io='native' needs cache none or directsync")
    elif path or dtype == "volume":
        disk.set("aio", "threads", "QEMU default (no io=: libvirt passes no aio)")
    else:
        disk.set("aio", "unknown", "no medium")
    # bus and iothread
    _bus(disk, el, bus, device, q35, controllers, drv, driver)
    return disk


def _bus(disk, el, bus, device, q35, controllers, drv, driver) -> None:
    addr = el.find("address")
    ctl_index = addr.get("controller", "0") if addr is not None else "0"
    iothreads: List[str] = []
    if drv.get("iothread"):
        iothreads.append(drv["iothread"])
    if driver is not None:
        for it in driver.findall("iothreads/iothread"):
            if it.get("id"):
                iothreads.append(it.get("id"))
    if bus == "virtio":
        disk.set("bus", "virtio-blk", "<target bus='virtio'>")
        if iothreads:
            disk.iothread_id = ",".join(f"iothread{i}" for i in iothreads)
            disk.set("iothread", "yes", "set in the config (<driver iothread>)")
        else:
            disk.set("iothread", "no", "no iothread in the disk's <driver>")
        return
    disk.set("iothread", "no", f"bus {bus}: no iothread")
    if bus == "scsi":
        ctl = controllers.get(("scsi", ctl_index))
        model = ctl.get("model") if ctl is not None else None
        if model in SCSI_MODELS:
            disk.set(
                "bus",
                SCSI_MODELS[model],
                f"SCSI controller {ctl_index} model='{model}'",
            )
            ctl_driver = ctl.find("driver")
            mapped = (
                [] if ctl_driver is None else ctl_driver.findall("iothreads/iothread")
            )
            if ctl_driver is not None and ctl_driver.get("iothread"):
                disk.iothread_id = f"iothread{ctl_driver.get('iothread')}"
                disk.set(
                    "iothread",
                    "yes",
                    "set in the config (virtio-scsi controller <driver iothread>)",
                )
            elif mapped:
                disk.iothread_id = ",".join(f"iothread{t.get('id')}" for t in mapped)
                disk.set(
                    "iothread",
                    "yes",
                    "set in the config (virtio-scsi controller <driver><iothreads>)",
                )
        elif model:
            disk.set("bus", "scsi", f"SCSI controller {ctl_index} model='{model}'")
        else:
            disk.set("bus", "scsi", "libvirt default SCSI controller (lsi on x86)")
        if device == "lun":
            # libvirt runs device='lun' as scsi-block
            set_scsi_block(disk)
    elif bus == "sata":
        disk.set("bus", "sata", "<target bus='sata'> (AHCI)")
    elif bus == "ide":
        if q35:
            disk.set("bus", "sata", "bus='ide' on q35: the built-in AHCI (SATA)")
        else:
            disk.set("bus", "ide", "<target bus='ide'>")
    elif bus == "nvme":
        disk.set("bus", "nvme", "<target bus='nvme'>")
    elif bus == "usb":
        disk.set("bus", "usb", "<target bus='usb'>")
        flags = disk.cache_flags
        if flags and not flags["writeback"]:
            # libvirt gives usb-storage write-cache=off on -blockdev, which
            # QEMU does not apply (see qemu.py; measured with QEMU 7.2)
            disk.set_cache(
                True,
                flags["direct"],
                flags["no-flush"],
                disk.sources["cache_mode"] + "; but usb-storage on -blockdev "
                "does not apply write-cache=off: the guest gets a write cache",
            )
    elif bus == "xen":
        disk.set("bus", "xen-blkfront", "<target bus='xen'>")
    elif bus:
        disk.set("bus", "other", f"<target bus='{bus}'>")
    if bus == "fdc" or device == "floppy":
        disk.kind = "floppy"


# libxlMakeDisk: driver name -> (backend, {driver type: libxl format})
_LIBXL_DRIVERS = {
    "tap": {
        "qcow": "qdisk",
        "qcow2": "qdisk",
        "qed": "qdisk",
        "vhd": "tap",
        "raw": "tap",
    },
    "qemu": {f: "qdisk" for f in ("qcow", "qcow2", "qed", "vhd", "raw")},
    "file": {"raw": "qdisk"},
    "phy": {"raw": "phy"},
}
_LIBXL_DRIVERS["tap2"] = _LIBXL_DRIVERS["tap"]
_XEN_OS_TYPES = {"hvm": "hvm", "linux": "pv", "xen": "pv", "xenpvh": "pvh"}


def _xen_disks(root: ET.Element) -> List[Disk]:
    from . import xen

    os_type = (root.findtext("os/type") or "").strip()
    domain_type = _XEN_OS_TYPES.get(os_type)
    virt = {"pv": "xen-pv", "pvh": "xen-hvm", "hvm": "xen-hvm"}.get(
        domain_type or "", "unknown"
    )
    out: List[Disk] = []
    for el in root.iter("disk"):
        d = _libxl_disk(el)
        disk = xen.disk_from_libxl(d, "set in the config (libxl driver)", domain_type)
        disk.platform = "libvirt"
        disk.set(
            "virtualization",
            virt,
            f"<domain type='xen'> with <os><type>{os_type}</type>",
        )
        drv = el.find("driver")
        for attr in ("cache", "io"):
            if drv is not None and drv.get(attr) not in (None, "default"):
                disk.notes.append(
                    f"{attr}='{drv.get(attr)}' is not passed to Xen by libvirt's "
                    "libxl driver"
                )
        out.append(disk)
    if not out:
        raise ValueError("no <disk> in the domain XML")
    return out


def _libxl_disk(el: ET.Element) -> dict:
    """The libxl_device_disk fields libvirt's libxl driver makes of a <disk>."""
    dtype = el.get("type", "file")
    source = el.find("source")
    target = el.find("target")
    driver = el.find("driver")
    src = source.attrib if source is not None else {}
    vdev = target.get("dev", "") if target is not None else ""
    name = driver.get("name") if driver is not None else None
    fmt = (driver.get("type") if driver is not None else None) or "raw"
    if dtype == "network":
        if name != "qemu":
            raise ValueError(
                f"{vdev}: only the 'qemu' driver can be used with network disks"
            )
        path = f"{src.get('protocol', '')}:{src.get('name', '')}"
    else:
        path = src.get("file") or src.get("dev") or ""
    if name is None:
        backend, fmt = "unknown", "raw"  # libxl picks the backend
    elif name in _LIBXL_DRIVERS:
        backend = _LIBXL_DRIVERS[name].get(fmt)
        if backend is None:
            raise ValueError(
                f"{vdev}: libxenlight does not support disk format {fmt} with "
                f"disk driver {name}"
            )
    else:
        raise ValueError(f"{vdev}: libxenlight does not support disk driver {name}")
    cdrom = el.get("device") == "cdrom"
    domain = el.find("backenddomain")
    script = el.find("script")
    return {
        "pdev_path": path or None,
        "vdev": vdev,
        "backend": backend,
        "format": "empty" if cdrom and not path else fmt,
        "script": script.get("path") if script is not None else None,
        "removable": 1,
        # libvirt makes a CD-ROM read-only whether or not it says <readonly/>
        "readwrite": 0 if cdrom or el.find("readonly") is not None else 1,
        "is_cdrom": 1 if cdrom else 0,
        "backend_domname": domain.get("name") if domain is not None else None,
    }
