"""Interim adapters: the earlier single-disk readers as Disk lists."""

from __future__ import annotations

import re
from typing import List

from . import _old
from .model import Disk

_FIELDS = {
    "cache_mode": "cache_mode",
    "aio_mode": "aio",
    "iothread": "iothread",
    "image_format": "image_format",
    "storage_backend": "storage_backend",
    "disk_bus": "bus",
    "platform": "platform",
    "virtualization": "virtualization",
}


def _disk(disk_id: str, tags: dict) -> Disk:
    d = Disk(id=disk_id)
    for tag, attr in _FIELDS.items():
        if tag in tags:
            d.set(attr, tags[tag], "set in the config or its default")
    return d


def proxmox(conf: str, storage: str = None) -> List[Disk]:
    ids = [
        m.group(1)
        for m in re.finditer(
            r"^((?:scsi|virtio|sata|ide)\d+):(?!.*media=cdrom)", conf, re.M
        )
    ]
    if not ids:
        _old.proxmox(conf, storage)
    return [_disk(i, _old.proxmox(conf, storage, i)) for i in ids]


def libvirt(xml: str) -> List[Disk]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"not libvirt domain XML: {exc}") from None
    ids = [
        t.get("dev")
        for d in root.iter("disk")
        if d.get("device", "disk") == "disk"
        for t in d.findall("target")
    ]
    return [_disk(i, _old.libvirt(xml, i)) for i in ids]


def xen(text: str) -> List[Disk]:
    return [_disk("xvda", _old.xen(text))]
