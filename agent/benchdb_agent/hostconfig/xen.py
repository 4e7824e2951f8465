"""Disks of a Xen domain: xl.cfg ``disk = [...]`` specs, ``xl list -l`` JSON.

The disk spec syntax is xl-disk-configuration(5): comma-separated
``key=value`` pairs, flags and positional parameters (target, format, vdev,
access, in that order); ``target=`` eats the rest of the string, so it is the
way to give a target with commas or colons; the deprecated prefixes ``raw:``
``qcow:`` ``qcow2:`` ``vhd:`` set the format, ``iscsi:`` ``nbd:`` ``enbd:``
``drbd:`` set ``script=block-...``, ``phy:`` ``file:`` ``tap:`` ``tap2:``
``tapdisk:`` ``aio:`` ``ioemu:`` are ignored; ``hdc:cdrom`` is the deprecated
form of ``vdev=hdc,devtype=cdrom``.  A CD-ROM is read-only and removable; with
no target it is empty.

Xen has no cache or aio setting for a disk: ``phy`` disks are served by the
dom0 kernel's blkback (libxl picks it for raw files and block devices),
``qdisk`` by QEMU (other formats), which libxl runs without O_DIRECT unless
``direct-io-safe`` is given.  So cache_mode and aio_mode are ``default``.

The guest's bus (docs/misc/vbd-interface.txt, libxl_dm.c): a PV or PVH domain
sees every disk only as a Xen VBD (blkfront).  An HVM domain also gets, from
libxl's QEMU, an emulated copy of each ``sd*`` disk (SCSI) and of the first
four other disks (IDE, AHCI with ``hdtype=ahci``) with ``cache=writeback``;
the guest uses blkfront once its PV drivers unplug the emulated copy, which
the host cannot see: that bus is unknown, and says why.
"""

from __future__ import annotations

import json
import re
from typing import Dict, List, Optional, Sequence, Union

from .model import SET, Disk
from .qemu import backend_of_path

FORMATS = {"": "raw", "raw": "raw", "qcow": "qcow", "qcow2": "qcow2", "vhd": "vhd"}
FORMATS.update({"empty": "empty", "qed": "qed"})
BACKENDTYPES = ("phy", "tap", "qdisk", "standalone")
NOT_CONFIGURABLE = "not configurable in Xen (no per-disk cache or aio setting)"


class SpecError(ValueError):
    pass


def _new() -> dict:
    return {
        "pdev_path": None,
        "vdev": None,
        "backend": None,
        "format": None,
        "script": None,
        "removable": 0,
        "readwrite": 1,
        "is_cdrom": 0,
        "direct_io_safe": 0,
        "discard_enable": None,
        "trusted": None,
        "specification": None,
        "backend_domname": None,
        "_access_set": False,
        "_depr": False,
    }


def _save(disk: dict, key: str, value: str, what: str) -> None:
    if disk.get(key):
        raise SpecError(f"{what} respecified: {value!r}")
    disk[key] = value


def _format(disk: dict, value: str) -> None:
    if value not in FORMATS:
        raise SpecError(f"unknown value for format: {value!r}")
    if disk["format"] is not None:
        raise SpecError(f"format respecified: {value!r}")
    disk["format"] = FORMATS[value]


def _access(disk: dict, value: str) -> None:
    if value in ("r", "ro"):
        disk["readwrite"] = 0
    elif value in ("w", "rw", ""):
        disk["readwrite"] = 1
    else:
        raise SpecError(f"unknown value for access: {value!r}")


def _vdev_devtype(disk: dict, item: str) -> bool:
    if ":" not in item:
        return False
    vdev, devtype = item.rsplit(":", 1)
    _save(disk, "vdev", vdev, "vdev")
    if devtype == "cdrom":
        disk["is_cdrom"] = 1
    elif devtype == "disk":
        disk["is_cdrom"] = 0
    else:
        raise SpecError(f"unknown deprecated type: {devtype!r}")
    return True


_KNOWN_PREFIX = re.compile(
    r"^(raw|qcow2?|vhd|iscsi|e?nbd|drbd|tapdisk|tap2?|aio|ioemu|file|phy):"
)
_PREFIX = re.compile(r"^([a-z][a-z0-9]*):(?=[^a-z0-9]|$)")
_FLAGS = {
    "cdrom": ("is_cdrom", 1),
    "devtype=cdrom": ("is_cdrom", 1),
    "devtype=disk": ("is_cdrom", 0),
    "direct-io-safe": ("direct_io_safe", 1),
    "discard": ("discard_enable", True),
    "no-discard": ("discard_enable", False),
    "trusted": ("trusted", True),
    "untrusted": ("trusted", False),
    "colo": (None, None),
    "no-colo": (None, None),
    "grant_usage=1": (None, None),
    "grant_usage=0": (None, None),
}


def _lex(disk: dict, spec: str) -> None:
    rest = spec
    while rest:
        rest = rest.lstrip(" \t\n")
        if not rest:
            break
        if rest.startswith("target="):
            value = rest[len("target=") :]
            if value.endswith(","):
                value = value[:-1]
            if disk["pdev_path"]:
                raise SpecError("target respecified")
            disk["pdev_path"] = value
            return
        m = _KNOWN_PREFIX.match(rest)
        if m:
            prefix = m.group(1)
            disk["_depr"] = True
            if prefix in ("raw", "qcow", "qcow2", "vhd"):
                _format(disk, prefix)
            elif prefix in ("iscsi", "nbd", "enbd", "drbd"):
                _save(disk, "script", f"block-{prefix}", "script")
            rest = rest[m.end() :]
            continue
        m = _PREFIX.match(rest)
        if m:
            raise SpecError(f"unknown deprecated disk prefix: {m.group(0)!r}")
        item, comma, rest = rest.partition(",")
        if item in _FLAGS:
            key, value = _FLAGS[item]
            if key:
                disk[key] = value
            continue
        key, eq, value = item.partition("=")
        if eq:
            if key == "format":
                _format(disk, value)
            elif key == "access":
                _access(disk, value)
                disk["_access_set"] = True
            elif key == "backend":
                _save(disk, "backend_domname", value, "backend")
            elif key == "backendtype":
                if value not in BACKENDTYPES:
                    raise SpecError(f"unknown value for backendtype: {value!r}")
                disk["backend"] = value
            elif key == "specification":
                if value not in ("xen", "virtio"):
                    raise SpecError(f"unknown value for specification: {value!r}")
                disk["specification"] = value
            elif key in ("vdev", "script"):
                _save(disk, key, value, key)
            elif key == "devtype":
                raise SpecError(f"unknown value for type: {value!r}")
            elif key in ("colo-host", "colo-port", "colo-export"):
                pass
            elif key in ("active-disk", "hidden-disk"):
                pass
            elif re.match(r"^[a-z][-a-z0-9]*$", key):
                raise SpecError(f"unknown parameter: {item!r}")
            else:
                raise SpecError(f"bad disk syntax: {item!r}")
            continue
        # a positional parameter
        if disk["pdev_path"] is None:
            disk["pdev_path"] = item
        elif not disk["_depr"] and disk["format"] is None:
            if disk["pdev_path"] == "" and _vdev_devtype(disk, item):
                disk["format"] = "empty"
            else:
                _format(disk, item)
        elif not disk["vdev"]:
            if not _vdev_devtype(disk, item):
                _save(disk, "vdev", item, "vdev")
        elif not disk["_access_set"]:
            disk["_access_set"] = True
            _access(disk, item)
        else:
            raise SpecError(f"too many positional parameters: {item!r}")
        if not comma:
            break


def parse_disk_spec(specs: Union[str, Sequence[str]]) -> dict:
    """One disk spec (a string, or the several strings of ``xl block-attach``)
    as libxl_device_disk fields.  SpecError (a ValueError) on bad syntax."""
    if isinstance(specs, str):
        specs = [specs]
    disk = _new()
    for spec in specs:
        _lex(disk, spec)
    if disk["format"] is None:
        disk["format"] = "raw"
    if disk["is_cdrom"]:
        disk["removable"] = 1
        disk["readwrite"] = 0
        if not disk["pdev_path"]:
            disk["format"] = "empty"
    if not disk["vdev"]:
        raise SpecError(f"no vdev specified in {', '.join(specs)!r}")
    if disk["pdev_path"] is None and not disk["removable"]:
        raise SpecError("no target specified (and device not removable)")
    return {k: v for k, v in disk.items() if not k.startswith("_")}


# -- xl.cfg ----------------------------------------------------------------

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPES.update({"v": "\v", '"': '"', "'": "'", "\\": "\\"})


def _strings(text: str, start: int):
    """Quoted strings of an xl.cfg list starting at text[start] == '['."""
    i, out = start + 1, []
    while i < len(text):
        c = text[i]
        if c == "]":
            return out, i + 1
        if c == "#":
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        if c in "'\"":
            buf, i = [], i + 1
            while i < len(text) and text[i] != c:
                if text[i] == "\n":
                    raise ValueError("xl.cfg: newline in a quoted string")
                if text[i] == "\\" and i + 1 < len(text):
                    nc = text[i + 1]
                    if nc in _ESCAPES:
                        buf.append(_ESCAPES[nc])
                        i += 2
                    elif nc == "x":
                        buf.append(chr(int(text[i + 2 : i + 4], 16)))
                        i += 4
                    elif nc.isdigit():
                        m = re.match(r"[0-7]{1,3}", text[i + 1 :])
                        buf.append(chr(int(m.group(0), 8)))
                        i += 1 + len(m.group(0))
                    else:
                        raise ValueError(f"xl.cfg: invalid escape \\{nc}")
                else:
                    buf.append(text[i])
                    i += 1
            if i >= len(text):
                raise ValueError("xl.cfg: unterminated string")
            out.append("".join(buf))
            i += 1
            continue
        i += 1
    raise ValueError("xl.cfg: unterminated list")


def _setting(text: str, key: str) -> Optional[str]:
    m = re.search(
        rf"^\s*{key}\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|(\S+?))\s*;?\s*(#.*)?$",
        text,
        re.M,
    )
    if not m:
        return None
    return next(g for g in m.groups()[:3] if g is not None)


def from_xl_cfg(text: str) -> List[Disk]:
    """Disks of an xl.cfg (``disk = [ '...', ... ]``), or bare disk specs one
    per line when there is no ``disk =``."""
    m = re.search(r"^\s*disk\s*=\s*\[", text, re.M)
    if m:
        specs, _end = _strings(text, m.end() - 1)
        kind = (_setting(text, "type") or "").lower()
        builder = (_setting(text, "builder") or "").lower()
        if kind in ("hvm", "pv", "pvh"):
            virt = (
                "xen-pv" if kind == "pv" else "xen-hvm",
                f"set in the config (type={kind})",
            )
        elif builder == "hvm":
            virt = ("xen-hvm", "set in the config (builder=hvm)")
        else:
            virt = ("xen-pv", "xl default (no type=: pv)")
    else:
        specs = [
            ln.strip().strip("'\"")
            for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")
        ]
        virt = ("unknown", "a bare disk spec does not say")
    if not specs:
        raise ValueError("no disk specs (disk = [ ... ]) in the xl config")
    out = []
    for spec in specs:
        try:
            parsed = parse_disk_spec(spec)
        except SpecError as exc:
            raise ValueError(f"disk spec {spec!r}: {exc}") from None
        domain_type = {"xen-pv": "pv", "xen-hvm": "hvm"}.get(virt[0])
        disk = disk_from_libxl(parsed, SET, domain_type)
        disk.set("virtualization", virt[0], virt[1])
        out.append(disk)
    _unique(out)
    return out


_VDEV = re.compile(r"^(xvd|hd|sd)([a-z]+)(\d*)$")


def _disk_number(vdev: str):
    """(disk number, partition) of a vdev (vbd-interface.txt), or None."""
    m = _VDEV.match(vdev)
    if m:
        number = 0
        for ch in m.group(2):
            number = number * 26 + (ord(ch) - ord("a") + 1)
        return number - 1, int(m.group(3) or 0)
    m = re.match(r"^d(\d+)(?:p(\d+))?$", vdev)
    if m:
        return int(m.group(1)), int(m.group(2) or 0)
    return None


def _bus(disk: Disk, d: dict, domain_type: Optional[str]) -> None:
    vdev = disk.id
    if d.get("specification") == "virtio":
        disk.set("bus", "virtio-blk", "specification=virtio")
        return
    if domain_type in ("pv", "pvh"):
        disk.set(
            "bus",
            "xen-blkfront",
            f"a {domain_type.upper()} domain sees every disk only as a Xen VBD "
            "(blkfront; Xen docs/misc/vbd-interface.txt)",
        )
        return
    number = _disk_number(vdev)
    emulated = number is not None and number[1] == 0
    emulated = emulated and (vdev.startswith("sd") or number[0] < 4)
    if domain_type == "hvm" and number is not None and not emulated:
        disk.set(
            "bus",
            "xen-blkfront",
            f"HVM: libxl emulates only sd* and the first four whole disks; {vdev} "
            "is a Xen VBD only (blkfront)",
        )
    elif domain_type == "hvm":
        copy = (
            "SCSI (lsi53c895a)"
            if vdev.startswith("sd")
            else "IDE (AHCI with hdtype=ahci)"
        )
        disk.set(
            "bus",
            "unknown",
            f"HVM: libxl's QEMU also emulates {vdev} as {copy} beside the Xen "
            "VBD; the guest uses blkfront once its PV drivers unplug the "
            "emulated disk, which the host cannot see (libxl_dm.c, "
            "vbd-interface.txt)",
        )
        disk.notes.append(
            f"HVM: {vdev} is also an emulated disk (QEMU cache=writeback) "
            "until the guest's PV drivers unplug it"
        )
    else:
        disk.set(
            "bus",
            "unknown",
            "the domain type is not given: an HVM domain may see an emulated "
            "disk, a PV one only the Xen VBD (blkfront)",
        )


def disk_from_libxl(d: dict, origin: str, domain_type: Optional[str]) -> Disk:
    """A Disk from libxl_device_disk fields (``xl list -l``, a parsed disk
    spec, or what libvirt's libxl driver makes of a ``<disk>``).  ``origin``
    says where explicitly set fields come from; ``domain_type`` is pv, pvh,
    hvm or None (unknown)."""
    vdev = d.get("vdev") or ""
    disk = Disk(id=vdev, platform="xen")
    disk.path = d.get("pdev_path") or ""
    fmt = (d.get("format") or "raw").lower()
    cdrom = bool(d.get("is_cdrom"))
    disk.kind = "cdrom" if cdrom else "disk"
    script = d.get("script") or ""
    backend = (d.get("backend") or "").lower()
    if backend in ("", "unknown"):
        if fmt == "empty":
            backend, bwhy = "", "empty CD-ROM"
        elif fmt == "raw" or script:
            backend, bwhy = "phy", "libxl picks phy (blkback) for raw images"
        else:
            backend, bwhy = "qdisk", f"libxl picks qdisk (QEMU) for {fmt}"
    else:
        bwhy = origin
    if backend:
        disk.notes.append(f"Xen backend {backend}: {bwhy}")
    _bus(disk, d, domain_type)
    disk.set(
        "image_format",
        {"raw": "raw", "qcow2": "qcow2", "vhd": "vhd"}.get(fmt, "unknown"),
        origin if fmt != "empty" else "empty CD-ROM",
    )
    driver_domain = d.get("backend_domname") or ""
    if driver_domain not in ("", "0", "dom0", "Domain-0"):
        disk.set(
            "storage_backend",
            "unknown",
            f"served by the driver domain {driver_domain!r}: "
            f"{disk.path or 'the device'} is that domain's device, not one of "
            "this host's dom0",
        )
    elif script:
        sb = {"block-iscsi": "iscsi", "block-drbd": "other", "block-nbd": "other"}
        disk.set("storage_backend", sb.get(script, "other"), f"script={script}")
    elif disk.path:
        b, why = backend_of_path(disk.path)
        disk.set("storage_backend", b, why)
    else:
        disk.set("storage_backend", "unknown", "no medium")
    if backend == "phy":
        why = "not configurable in Xen: phy is the dom0 kernel's blkback"
    elif backend == "qdisk":
        direct = "O_DIRECT" if d.get("direct_io_safe") else "no O_DIRECT"
        why = f"not configurable in Xen: qdisk is QEMU, run with {direct} by libxl"
    else:
        why = NOT_CONFIGURABLE
    disk.set("cache_mode", "default", why)
    disk.set("aio", "default", NOT_CONFIGURABLE)
    disk.set("iothread", "no", "Xen has no iothread setting")
    return disk


def _unique(disks: List[Disk]) -> None:
    seen: Dict[str, int] = {}
    for d in disks:
        seen[d.id] = seen.get(d.id, 0) + 1
    dup = [i for i, n in seen.items() if n > 1]
    if dup:
        raise ValueError(f"vdev {', '.join(dup)} used by more than one disk")


def from_xl_json(text: str) -> List[Disk]:
    """``xl list -l`` output (a list of {domid, config}) or one libxl domain
    config (with c_info and disks)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not xl list -l JSON: {exc}") from None
    domains = doc if isinstance(doc, list) else [doc]
    out: List[Disk] = []
    for dom in domains:
        if not isinstance(dom, dict):
            raise ValueError("not xl list -l JSON: expected objects")
        config = dom.get("config", dom)
        c_info = config.get("c_info") or {}
        name = c_info.get("name") or str(dom.get("domid", ""))
        kind = (c_info.get("type") or "").lower()
        virt = {"pv": "xen-pv", "hvm": "xen-hvm", "pvh": "xen-hvm"}.get(kind, "unknown")
        for d in config.get("disks") or []:
            disk = disk_from_libxl(d, "xl list -l", kind or None)
            disk.set("virtualization", virt, f"c_info type {kind or 'absent'}")
            if len(domains) > 1:
                disk.aliases.append(disk.id)
                disk.id = f"{name}/{disk.id}"
            out.append(disk)
    if not out:
        raise ValueError("no disks in the xl configuration")
    _unique(out)
    return out
