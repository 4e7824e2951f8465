"""The disk record every host-config reader returns, and QEMU's cache rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import vocab

# Where a value came from: one short phrase, shown next to the value.
SET = "set in the config"
QEMU_DEFAULT = "QEMU default"
DEVICE_WRITE_CACHE = "the device's write-cache overrides the drive"
FROM_QMP = "reported by QEMU (QMP)"

# Disk kinds.  Only "disk" is a benchmark target.
KINDS = ("disk", "cdrom", "efivars", "pflash", "tpmstate", "cloudinit", "floppy")

# A disk's tags: (tag, Disk field), the closed ones the host reads.
TAG_FIELDS = tuple(
    (tag, {"aio_mode": "aio", "disk_bus": "bus"}.get(tag, tag))
    for tag in vocab.HOST_TAGS
    if vocab.TAG_VOCABULARIES[tag] is not None
)

# QEMU cache modes as (cache.writeback, cache.direct, cache.no-flush)
# (qemu-options.hx, -drive cache=).
MODE_FLAGS = {
    "writeback": (True, False, False),
    "none": (True, True, False),
    "writethrough": (False, False, False),
    "directsync": (False, True, False),
    "unsafe": (True, False, True),
}


def cache_mode(writeback: bool, direct: bool, no_flush: bool) -> str:
    """The cache= mode QEMU runs for these three flags.

    no-flush makes flushes no-ops, so every combination with it loses data the
    guest believed written on a host power loss: that is ``unsafe`` whatever the
    other two flags say.
    """
    if no_flush:
        return "unsafe"
    for mode, flags in MODE_FLAGS.items():
        if flags == (writeback, direct, False):
            return mode
    raise AssertionError("unreachable")


@dataclass
class Disk:
    """One disk of a VM, with the values QEMU (or Xen) really runs.

    Every value is a word from :mod:`benchdb_agent.vocab` (``bus`` from
    DISK_BUS, ``cache_mode`` from CACHE_MODE, ``aio`` from AIO_MODE, ...).
    ``sources`` maps a field name (``cache_mode``, ``aio``, ``iothread``,
    ``image_format``, ``storage_backend``, ``bus``, ``virtualization``) to where
    its value came from ("set in the config", "QEMU default", "Proxmox default
    for LVM storage", ...).  ``kind`` is ``disk`` for a benchmark target and
    ``cdrom``, ``efivars``, ``pflash``, ``tpmstate``, ``cloudinit`` or ``floppy``
    otherwise; ``is_target`` says the same as a bool.
    """

    id: str
    bus: str = "unknown"
    kind: str = "disk"
    cache_mode: str = "unknown"
    aio: str = "unknown"
    iothread: str = "unknown"
    image_format: str = "unknown"
    storage_backend: str = "unknown"
    path: str = ""
    volume: str = ""
    platform: str = "unknown"
    virtualization: str = "unknown"
    iothread_id: str = ""
    cache_flags: Optional[Dict[str, bool]] = None
    aliases: List[str] = field(default_factory=list)
    sources: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    @property
    def is_target(self) -> bool:
        return self.kind == "disk"

    def set(self, name: str, value: str, source: str) -> None:
        setattr(self, name, value)
        self.sources[name] = source

    def set_cache(
        self, writeback: bool, direct: bool, no_flush: bool, source: str
    ) -> None:
        self.cache_flags = {
            "writeback": bool(writeback),
            "direct": bool(direct),
            "no-flush": bool(no_flush),
        }
        self.set("cache_mode", cache_mode(writeback, direct, no_flush), source)

    def to_tags(self) -> dict:
        """The bundle tags (``benchdb-agent run --tag key=value``) of this disk."""
        tags = {}
        for tag, attr in TAG_FIELDS:
            value = getattr(self, attr)
            allowed = vocab.values(vocab.TAG_VOCABULARIES[tag])
            tags[tag] = value if value in allowed else "unknown"
        return tags

    def to_dict(self) -> dict:
        """JSON-ready: id, kind, target, path, tags, sources, notes."""
        out = {
            "id": self.id,
            "kind": self.kind,
            "target": self.is_target,
            "bus": self.bus,
            "path": self.path,
        }
        if self.volume:
            out["volume"] = self.volume
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.iothread_id:
            out["iothread_id"] = self.iothread_id
        if self.cache_flags is not None:
            out["cache_flags"] = dict(self.cache_flags)
        out["tags"] = self.to_tags()
        out["sources"] = {
            tag: self.sources[attr] for tag, attr in TAG_FIELDS if attr in self.sources
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def select(disks: List[Disk], disk_id: Optional[str]) -> List[Disk]:
    """All disks, or the one named ``disk_id`` (its id or an unambiguous alias).

    An id that names no disk (or several) is a ValueError listing the ids there
    are: never another disk's values.
    """
    if not disk_id:
        return list(disks)
    exact = [d for d in disks if d.id == disk_id]
    if len(exact) == 1:
        return exact
    alias = [d for d in disks if disk_id in d.aliases]
    if len(alias) == 1 and not exact:
        return alias
    ids = ", ".join(d.id for d in disks) or "none"
    if len(exact) + len(alias) > 1:
        raise ValueError(f"disk id {disk_id!r} is ambiguous; the disks are: {ids}")
    raise ValueError(f"no disk {disk_id!r}; the disks are: {ids}")
