"""Disks of a QEMU command line, with the values QEMU really runs.

The rules (QEMU's qemu-options.hx, block.c, blockdev.c, hw/block/block.c):

- ``-drive``: ``cache=`` sets three flags (writeback, direct, no-flush);
  ``cache.direct=`` / ``cache.no-flush=`` / ``cache.writeback=`` override them;
  no ``cache=`` is writeback.  ``aio=`` defaults to threads.
- ``-blockdev``: a node has ``cache.direct`` and ``cache.no-flush`` (absent =
  off); an inline child (``"file": {...}``) inherits them from its parent when
  it does not set them, a node referenced by name does not.  The flags that
  decide host I/O are the protocol node's (the leaf the chain ends in:
  ``file``, ``host_device``, ``rbd``, ...): the reader follows node-name
  references and inline children through filters (throttle) and the format
  node down to it.
- The guest device's ``write-cache=on|off`` overrides the drive's writeback
  flag (auto = the drive's, which is on for ``-blockdev``): ``write-cache=off``
  turns ``cache=none`` into directsync.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Dict, List, Optional, Tuple

from .model import DEVICE_WRITE_CACHE, MODE_FLAGS, SET, Disk

FORMAT_DRIVERS = {
    "raw": "raw",
    "qcow2": "qcow2",
    "qcow": "unknown",
    "qed": "unknown",
    "vmdk": "vmdk",
    "vpc": "vhd",
    "vhdx": "vhdx",
    "vdi": "vdi",
    "parallels": "unknown",
    "luks": "unknown",
    "bochs": "unknown",
    "cloop": "unknown",
    "dmg": "unknown",
}
FILTER_DRIVERS = {
    "throttle",
    "copy-on-read",
    "preallocate",
    "compress",
    "blkdebug",
    "blkverify",
    "blklogwrites",
    "copy-before-write",
    "alloc-track",
    "snapshot-access",
}
# Protocol drivers that do host file I/O and take aio=.
FILE_DRIVERS = {"file", "host_device", "host_cdrom"}

# Options that take no argument (everything else starting with '-' takes one
# unless the next word is another option).
FLAGS = {
    "S",
    "nodefaults",
    "enable-kvm",
    "no-shutdown",
    "no-reboot",
    "daemonize",
    "snapshot",
    "nographic",
    "no-user-config",
    "no-hpet",
    "no-acpi",
    "full-screen",
    "enable-fips",
    "preconfig",
    "old-param",
    "win2k-hack",
    "no-fd-bootchk",
    "no-kvm",
}

# Options that take a value, to tell an unknown flag (-s, ...) from an option.
OPTIONS_WITH_VALUE = {
    "drive",
    "device",
    "blockdev",
    "machine",
    "M",
    "accel",
    "object",
    "m",
    "smp",
    "name",
    "cpu",
    "chardev",
    "mon",
    "qmp",
    "netdev",
    "nic",
    "display",
    "vnc",
    "serial",
    "boot",
    "global",
    "uuid",
    "pidfile",
    "hda",
    "hdb",
    "hdc",
    "hdd",
    "cdrom",
    "kernel",
    "initrd",
    "append",
    "rtc",
    "msg",
    "sandbox",
    "overcommit",
    "audiodev",
    "iscsi",
    "vga",
    "smbios",
    "fw_cfg",
}

SCSI_HBAS = {
    "virtio-scsi-pci": "virtio-scsi",
    "virtio-scsi-pci-non-transitional": "virtio-scsi",
    "virtio-scsi-device": "virtio-scsi",
    "virtio-scsi-ccw": "virtio-scsi",
    "virtio-scsi": "virtio-scsi",
    "pvscsi": "vmware-pvscsi",
}
VIRTIO_BLK = {
    "virtio-blk-pci",
    "virtio-blk",
    "virtio-blk-device",
    "virtio-blk-ccw",
    "virtio-blk-pci-non-transitional",
    "vhost-user-blk-pci",
}


def split_command(text: str) -> List[str]:
    """argv of a command line as text.

    Accepts ``/proc/PID/cmdline`` (NUL-separated), a shell command line with
    environment prefix words and backslash-newline continuations (libvirt's
    ``.args``, ``qm showcmd --pretty``; a continuation may fall inside a word),
    or one argument per line.  Leading ``VAR=value`` words and ``env`` are
    dropped, so argv[0] is the QEMU binary.
    """
    if "\0" in text:
        argv = [a for a in text.split("\0") if a]
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        continued = any(ln.rstrip("\r").endswith("\\") for ln in lines)
        if len(lines) > 1 and not continued:
            argv = [_unquote_line(ln.strip()) for ln in lines]
        else:
            joined = re.sub(r"\\\r?\n", "", text)
            try:
                argv = shlex.split(joined)
            except ValueError as exc:
                if not _unquoted_json(joined.split()):
                    raise ValueError(f"cannot split the command line: {exc}") from None
                argv = joined.split()
            if not _json_ok(argv) and _unquoted_json(joined.split()):
                # `ps` output: nothing is quoted, JSON arguments keep their quotes
                argv = joined.split()
    while argv and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]) or argv[0] == "env"):
        argv.pop(0)
    if not argv:
        raise ValueError("empty command line")
    return argv


def _json_ok(argv: List[str]) -> bool:
    for arg in argv:
        if arg.startswith("{"):
            try:
                json.loads(arg)
            except ValueError:
                return False
    return True


def _unquoted_json(words: List[str]) -> bool:
    """Whitespace-split words hold JSON arguments that parse (``ps`` output)."""
    found = [w for w in words if w.startswith("{")]
    return bool(found) and _json_ok(found)


def _unquote_line(line: str) -> str:
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
        try:
            words = shlex.split(line)
        except ValueError:
            return line
        if len(words) == 1:
            return words[0]
    return line


def split_opts(text: str, implied: Optional[str] = None) -> List[Tuple[str, str]]:
    """QEMU's key=value,key=value with ',,' for a literal comma."""
    out = []
    parts, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == ",":
            if i + 1 < len(text) and text[i + 1] == ",":
                cur.append(",")
                i += 2
                continue
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    for n, part in enumerate(parts):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), v))
        elif n == 0 and implied:
            out.append((implied, part))
        else:
            out.append((part, "on"))
    return out


def opts_dict(text: str, implied: Optional[str] = None) -> Dict[str, str]:
    return dict(split_opts(text, implied))


def device_opts(text: str) -> Dict[str, str]:
    """-device options, key=value or JSON, as strings (booleans on/off)."""
    if text.strip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"-device JSON: {exc}") from None
        out = {}
        for k, v in doc.items():
            if isinstance(v, bool):
                out[k] = "on" if v else "off"
            elif isinstance(v, (dict, list)):
                out[k] = json.dumps(v)
            else:
                out[k] = str(v)
        return out
    return opts_dict(text, "driver")


def _nest(flat: Dict[str, str]) -> dict:
    """Dotted keys (file.driver=file) to nested dicts, as QEMU's keyval does."""
    out: dict = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = {} if nxt is None else {"_ref": nxt}
                node[p] = nxt
            node = nxt
        last = parts[-1]
        if isinstance(node.get(last), dict):
            node[last]["_ref"] = value
        else:
            node[last] = value
    return out


def parse_blockdev(text: str) -> dict:
    text = text.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"-blockdev JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError("-blockdev JSON is not an object")
        return doc
    return _nest(opts_dict(text))


def to_bool(value, default: Optional[bool] = None) -> Optional[bool]:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("on", "true", "yes", "1"):
        return True
    if v in ("off", "false", "no", "0"):
        return False
    return default


def backend_of_path(path: str) -> Tuple[str, str]:
    """(storage_backend, why) of a file name or device path: what its form
    shows (a protocol, a zvol, a file), and for LVM-looking device paths what
    lvs on this host says (:mod:`.lvm`; unknown elsewhere)."""
    if not path:
        return "unknown", "no path"
    why = "from the path"
    if path.startswith(("rbd:", "/dev/rbd")):
        return "ceph-rbd", why
    if path.startswith("iscsi:"):
        return "iscsi", why
    if path.startswith("nfs:"):
        return "nfs", why
    if re.match(r"^(nbd|gluster|ssh|https?|ftps?|sheepdog)[:+]", path):
        return "other", why
    if re.match(r"^/dev/disk/by-path/ip-.*-iscsi-", path):
        return "iscsi", why
    if path.startswith("/dev/zvol/"):
        return "zfs", why
    if path.startswith("/dev/mapper/") or re.match(
        r"^/dev/(?!disk/|md/|cdrom|sr\d)[^/]+/[^/]+$", path
    ):
        from . import lvm

        return lvm.backend(path)
    if path.startswith("/dev/"):
        return "passthrough", why
    return "file", why


class Command:
    """The parts of a QEMU command line that concern disks."""

    def __init__(self, argv: List[str]):
        self.argv = list(argv)
        self.program = os.path.basename(argv[0]) if argv else ""
        self.drives: List[dict] = []
        self.blockdevs: Dict[str, dict] = {}
        self.blockdev_order: List[str] = []
        self.devices: List[Dict[str, str]] = []
        self.machine: Dict[str, str] = {}
        self.accel: Optional[str] = None
        self.accel_source = ""
        self.snapshot = False
        self.objects: List[dict] = []
        self._parse()

    def _parse(self) -> None:
        argv = self.argv
        i = 1
        while i < len(argv):
            arg = argv[i]
            if not arg.startswith("-"):
                # qemu-system-x86_64 disk.img: the same as -hda
                self._add_drive({"file": arg, "if": "ide", "index": "0"}, "-hda")
                i += 1
                continue
            name = arg.lstrip("-")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            if (
                name in FLAGS
                or "=" in name
                or (nxt.startswith("-") and nxt.lstrip("-") in OPTIONS_WITH_VALUE)
            ):
                # a flag, or an option we do not know followed by a known one
                value = None
                i += 1
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 2
            else:
                value = None
                i += 1
            if name == "enable-kvm":
                self.accel, self.accel_source = "kvm", "-enable-kvm"
            elif name == "snapshot":
                self.snapshot = True
            elif value is None:
                continue
            elif name == "drive":
                self._add_drive(opts_dict(value), "-drive")
            elif name in ("hda", "hdb", "hdc", "hdd"):
                idx = "abcd".index(name[2])
                self._add_drive(
                    {"file": value, "if": "ide", "index": str(idx)}, f"-{name}"
                )
            elif name == "cdrom":
                self._add_drive(
                    {"file": value, "if": "ide", "index": "2", "media": "cdrom"},
                    "-cdrom",
                )
            elif name in ("fda", "fdb"):
                self._add_drive(
                    {"file": value, "if": "floppy", "index": "ab".index(name[2])},
                    f"-{name}",
                )
            elif name == "pflash":
                self._add_drive({"file": value, "if": "pflash"}, "-pflash")
            elif name == "blockdev":
                node = parse_blockdev(value)
                nn = str(node.get("node-name") or f"#blockdev{len(self.blockdevs)}")
                self.blockdevs[nn] = node
                self.blockdev_order.append(nn)
            elif name == "device":
                self.devices.append(device_opts(value))
            elif name in ("machine", "M"):
                opts = opts_dict(value, "type")
                self.machine.update(opts)
                if "accel" in opts:
                    self.accel = opts["accel"]
                    self.accel_source = f"-machine accel={opts['accel']}"
            elif name == "accel":
                acc = opts_dict(value, "accel").get("accel", "")
                if self.accel and self.accel_source.startswith("-accel"):
                    self.accel += ":" + acc
                else:
                    self.accel = acc
                self.accel_source = f"-accel {self.accel}"
            elif name == "object":
                if value.strip().startswith("{"):
                    try:
                        obj = json.loads(value)
                        if isinstance(obj, dict):
                            self.objects.append(obj)
                    except ValueError:
                        pass
                else:
                    self.objects.append(_nest(opts_dict(value, "qom-type")))

    def _add_drive(self, opts: dict, option: str) -> None:
        opts = dict(opts)
        opts["_option"] = option
        self.drives.append(opts)

    # -- facts --------------------------------------------------------------

    def throttle_limits(self, group: str) -> Dict[str, str]:
        """The non-zero limits of ``-object throttle-group,id=GROUP`` (its
        ``limits`` object, or the older ``x-bps-total=``... properties)."""
        for obj in self.objects:
            if obj.get("qom-type") == "throttle-group" and obj.get("id") == group:
                limits = obj.get("limits")
                flat = dict(limits) if isinstance(limits, dict) else {}
                for key, value in obj.items():
                    if key.startswith("x-"):
                        flat[key[2:]] = value
                return {
                    k: str(v)
                    for k, v in flat.items()
                    if k != "_ref" and str(v) not in ("0", "", "None")
                }
        return {}

    @property
    def machine_type(self) -> str:
        return self.machine.get("type", "")

    @property
    def is_q35(self) -> bool:
        return "q35" in self.machine_type

    def accelerators(self) -> Tuple[List[str], str]:
        """The accelerators QEMU tries, in order, and why."""
        if self.accel:
            return [a for a in re.split(r"[:,]", self.accel) if a], self.accel_source
        if self.program.endswith("kvm"):
            return (
                ["kvm", "tcg"],
                f"QEMU default for a binary named {self.program!r} (kvm, else tcg)",
            )
        return ["tcg", "kvm"], "QEMU default (tcg) with no -accel or -enable-kvm"


def virtualization(cmd: Command, pid: Optional[int] = None) -> Tuple[str, str]:
    """kvm or qemu-tcg, and why.  With a pid, the process's open file
    descriptors decide (a KVM VM fd is there only when KVM really runs it)."""
    accels, why = cmd.accelerators()
    if pid is not None:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = None
        if fds is not None:
            for fd in fds:
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("anon_inode:kvm-vm"):
                    return "kvm", "the QEMU process has a KVM VM open"
            if accels and accels[0] in ("kvm", "tcg") and "tcg" in accels:
                return "qemu-tcg", "the QEMU process has no KVM VM open: TCG"
    first = accels[0] if accels else "tcg"
    if first == "kvm":
        extra = " (falls back to TCG without /dev/kvm)" if "tcg" in accels else ""
        return "kvm", why + extra
    if first == "tcg":
        return "qemu-tcg", why
    if first in ("xen",):
        return "xen-hvm", why
    return "other", why


# -- disks ------------------------------------------------------------------

_IF_MAX_DEVS = {"ide": 2, "scsi": 7}


def _legacy_id(interface: str, index: int, media: str) -> str:
    """QEMU's drive id for a -drive without id= (blockdev.c drive_new)."""
    if interface in _IF_MAX_DEVS:
        bus, unit = divmod(index, _IF_MAX_DEVS[interface])
        return f"{interface}{bus}-{'cd' if media == 'cdrom' else 'hd'}{unit}"
    return f"{interface}{index}"


def disks(
    cmd: Command, pid: Optional[int] = None, platform: str = "qemu"
) -> List[Disk]:
    """Every disk of the command line, in command-line order."""
    virt, virt_why = virtualization(cmd, pid)
    out: List[Disk] = []
    by_drive_id: Dict[str, Disk] = {}
    used_index: Dict[str, set] = {}
    for opts in cmd.drives:
        interface = opts.get("if", "ide")
        media = opts.get("media", "disk")
        if "index" in opts:
            index = int(opts["index"])
        elif "bus" in opts or "unit" in opts:
            index = int(opts.get("bus", 0)) * _IF_MAX_DEVS.get(interface, 1) + int(
                opts.get("unit", 0)
            )
        else:
            index = 0
            while index in used_index.get(interface, set()):
                index += 1
        used_index.setdefault(interface, set()).add(index)
        drive_id = opts.get("id") or (
            f"none{index}"
            if interface == "none"
            else _legacy_id(interface, index, media)
        )
        disk = _drive_disk(cmd, opts, drive_id, interface, media, index)
        by_drive_id[drive_id] = disk
        out.append(disk)
    # Nodes referenced by other nodes are parts of a chain, not disks.
    referenced = set()
    for node in cmd.blockdevs.values():
        _collect_refs(node, referenced)
    attached: Dict[str, Disk] = {}
    for dev in cmd.devices:
        ref = dev.get("drive")
        if not ref:
            continue
        if ref in by_drive_id:
            disk = by_drive_id[ref]
            _apply_device(cmd, disk, dev, blockdev=False)
        elif ref in cmd.blockdevs:
            disk = _blockdev_disk(cmd, ref)
            _apply_device(cmd, disk, dev, blockdev=True)
            attached[ref] = disk
            out.append(disk)
    for unit_key, kind in (("pflash0", "pflash"), ("pflash1", "efivars")):
        ref = cmd.machine.get(unit_key)
        if ref and ref in cmd.blockdevs and ref not in attached:
            disk = _blockdev_disk(cmd, ref)
            disk.kind = kind
            disk.set("bus", "other", f"-machine {unit_key}=")
            disk.set_cache(
                True,
                disk.cache_flags["direct"],
                disk.cache_flags["no-flush"],
                disk.sources["cache_mode"],
            )
            attached[ref] = disk
            out.append(disk)
    for disk in out:
        if disk.bus == "unknown" and not disk.sources.get("bus"):
            disk.notes.append("not attached to any guest device")
            disk.sources["bus"] = "no -device uses this drive"
        disk.platform = platform
        disk.set("virtualization", virt, virt_why)
        if cmd.snapshot and disk.kind == "disk":
            disk.notes.append(
                "-snapshot: writes go to a temporary overlay with cache=unsafe"
            )
    return out


def _collect_refs(node: dict, refs: set) -> None:
    for key, value in node.items():
        if key in ("file", "backing", "data-file", "image", "target"):
            if isinstance(value, str):
                refs.add(value)
        if isinstance(value, dict):
            if "_ref" in value:
                refs.add(value["_ref"])
            _collect_refs(value, refs)


def _drive_disk(
    cmd: Command, opts: dict, drive_id: str, interface: str, media: str, index: int
) -> Disk:
    disk = Disk(id=drive_id)
    option = opts.get("_option", "-drive")
    path = opts.get("file", "") or opts.get("file.filename", "")
    disk.path = path
    kind = "disk"
    if media == "cdrom":
        kind = "cdrom"
    elif interface == "pflash":
        kind = "efivars" if index >= 1 else "pflash"
    elif interface == "floppy":
        kind = "floppy"
    if "cloudinit" in path or "cloud-init" in path:
        kind = "cloudinit" if media == "cdrom" or kind == "disk" else kind
    disk.kind = kind
    # Cache flags: cache= first, then the single flags.
    if "cache" in opts:
        mode = opts["cache"]
        if mode == "off":
            mode = "none"
        if mode not in MODE_FLAGS:
            raise ValueError(f"{option} {drive_id}: unknown cache mode {mode!r}")
        wb, direct, no_flush = MODE_FLAGS[mode]
        why = f"set in the config ({option} cache={opts['cache']})"
    else:
        wb, direct, no_flush = MODE_FLAGS["writeback"]
        why = f"QEMU default ({option} without cache= is writeback)"
    single = []
    for key in ("cache.writeback", "cache.direct", "cache.no-flush"):
        for prefix in ("", "file."):
            if prefix + key in opts:
                single.append(f"{prefix}{key}={opts[prefix + key]}")
    if single:
        wb = to_bool(opts.get("cache.writeback"), wb)
        direct = to_bool(
            opts.get("file.cache.direct", opts.get("cache.direct")), direct
        )
        no_flush = to_bool(
            opts.get("file.cache.no-flush", opts.get("cache.no-flush")), no_flush
        )
        why = f"set in the config ({option} {','.join(single)})"
    disk.set_cache(wb, direct, no_flush, why)
    # Protocol driver: explicit, or what the file name says.
    proto = opts.get("file.driver") or _protocol_of(path)
    fmt = opts.get("format") or opts.get("driver")
    if fmt:
        disk.set("image_format", FORMAT_DRIVERS.get(fmt, "unknown"), SET)
    elif not path:
        disk.set("image_format", "unknown", "no medium")
    else:
        disk.set(
            "image_format",
            "unknown",
            "no format=: QEMU probes the image (raw unless it has a header)",
        )
    aio = opts.get("aio") or opts.get("file.aio")
    if proto in FILE_DRIVERS:
        if aio:
            disk.set("aio", aio, f"set in the config ({option} aio={aio})")
        else:
            disk.set("aio", "threads", f"QEMU default ({option} without aio=)")
        if aio == "native" and not direct:
            disk.notes.append(
                "aio=native without cache.direct=on: QEMU refuses to start this"
            )
    elif path:
        disk.set("aio", "default", f"the {proto} driver does its own I/O; no aio")
    else:
        disk.set("aio", "unknown", "no medium")
    backend, bwhy = backend_of_path(path)
    disk.set("storage_backend", backend, bwhy)
    disk.set("iothread", "no", f"QEMU default ({option} has no iothread)")
    if interface != "none":
        bus, bwhy = _legacy_bus(cmd, interface)
        disk.set("bus", bus, bwhy)
        disk.aliases.append(f"{interface}{index}")
    return disk


def _protocol_of(path: str) -> str:
    m = re.match(r"^([a-z][a-z0-9+_-]*):", path)
    if m and not path.startswith("/"):
        proto = m.group(1)
        if proto.startswith("json"):
            try:
                doc = json.loads(path[5:])
                return _leaf(doc, {})[0].get("driver", "unknown")
            except (ValueError, AttributeError):
                return "unknown"
        return proto
    if path.startswith("/dev/"):
        return "host_device"
    return "file" if path else "none"


def _legacy_bus(cmd: Command, interface: str) -> Tuple[str, str]:
    if interface == "virtio":
        return "virtio-blk", "-drive if=virtio"
    if interface == "ide":
        if cmd.is_q35:
            return "sata", "-drive if=ide on q35: its built-in AHCI (SATA) controller"
        return "ide", "-drive if=ide"
    if interface == "scsi":
        return "scsi", "-drive if=scsi: QEMU adds an LSI 53C895A controller"
    if interface == "pflash":
        return "other", "-drive if=pflash"
    if interface in ("sd", "mtd", "floppy"):
        return "other", f"-drive if={interface}"
    return "unknown", f"-drive if={interface}"


def _leaf(node: dict, nodes: Dict[str, dict], inherit=None):
    """Follow a -blockdev node down to its protocol node.

    Returns (protocol node, format driver or None, effective direct,
    effective no-flush, direct_explicit, chain of driver names).
    """
    inherit = dict(inherit or {})
    chain = []
    fmt = None
    explicit = False
    seen = set()
    while True:
        cache = node.get("cache") if isinstance(node.get("cache"), dict) else {}
        direct = to_bool(cache.get("direct", node.get("cache.direct")))
        no_flush = to_bool(cache.get("no-flush", node.get("cache.no-flush")))
        if direct is None:
            direct = inherit.get("direct", False)
        else:
            explicit = True
        if no_flush is None:
            no_flush = inherit.get("no-flush", False)
        else:
            explicit = True
        driver = str(node.get("driver", ""))
        chain.append(driver)
        if driver in FORMAT_DRIVERS and fmt is None:
            fmt = driver
        child = node.get("file")
        if driver not in FORMAT_DRIVERS and driver not in FILTER_DRIVERS:
            return node, fmt, direct, no_flush, explicit, chain
        if isinstance(child, dict) and set(child) == {"_ref"}:
            child = child["_ref"]
        if isinstance(child, str):
            if child in seen or child not in nodes:
                return node, fmt, direct, no_flush, explicit, chain
            seen.add(child)
            node = nodes[child]
            inherit = {}  # a separately defined node inherits nothing
            continue
        if isinstance(child, dict):
            node = child
            inherit = {"direct": direct, "no-flush": no_flush}
            continue
        return node, fmt, direct, no_flush, explicit, chain


def _throttle_notes(cmd: Command, node, disk: Disk) -> None:
    """A note per throttle filter with limits above the disk: a benchmark of
    a throttled disk measures the throttle."""
    seen = set()
    while isinstance(node, dict) and id(node) not in seen:
        seen.add(id(node))
        if node.get("driver") == "throttle":
            group = str(node.get("throttle-group", ""))
            limits = cmd.throttle_limits(group)
            if limits:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(limits.items()))
                disk.notes.append(f"throttled by throttle-group {group}: {shown}")
        child = node.get("file")
        if isinstance(child, dict) and set(child) == {"_ref"}:
            child = child["_ref"]
        node = cmd.blockdevs.get(child) if isinstance(child, str) else child


def _blockdev_disk(cmd: Command, name: str) -> Disk:
    top = cmd.blockdevs[name]
    disk = Disk(id=name)
    proto, fmt, direct, no_flush, explicit, chain = _leaf(top, cmd.blockdevs)
    driver = str(proto.get("driver", "unknown"))
    path = str(proto.get("filename") or "")
    if not path and driver == "rbd":
        path = f"rbd:{proto.get('pool', '')}/{proto.get('image', '')}"
    elif not path and driver == "iscsi":
        path = f"iscsi://{proto.get('portal', '')}/{proto.get('target', '')}"
    elif not path and driver in ("nbd", "nfs", "gluster", "ssh", "http", "https"):
        path = f"{driver}:{proto.get('export') or proto.get('path') or ''}"
    disk.path = path
    _throttle_notes(cmd, top, disk)
    where = " -> ".join(chain)
    if explicit:
        why = f"set in the config (-blockdev {where})"
    else:
        why = "QEMU default (-blockdev without cache.direct / cache.no-flush: off)"
    # writeback comes from the device (write-cache=auto is on for -blockdev).
    disk.set_cache(True, direct, no_flush, why)
    if fmt:
        disk.set("image_format", FORMAT_DRIVERS.get(fmt, "unknown"), SET)
    else:
        disk.set("image_format", "raw", "no format node: the guest sees the bytes")
    if driver in FILE_DRIVERS:
        aio = proto.get("aio")
        if aio:
            disk.set("aio", str(aio), f"set in the config (-blockdev {driver} aio)")
        else:
            disk.set("aio", "threads", "QEMU default (-blockdev without aio)")
        if aio == "native" and not direct:
            disk.notes.append("aio=native without cache.direct: QEMU refuses this")
        backend, bwhy = backend_of_path(path)
    else:
        disk.set("aio", "default", f"the {driver} driver does its own I/O; no aio")
        if driver == "nvme" and not path:
            path = f"nvme://{proto.get('device', '')}/{proto.get('namespace', '')}"
            disk.path = path
        backend, bwhy = {
            "nvme": ("passthrough", "-blockdev driver nvme (a host NVMe device)"),
            "rbd": ("ceph-rbd", "-blockdev driver rbd (librbd)"),
            "iscsi": ("iscsi", "-blockdev driver iscsi (libiscsi)"),
            "nfs": ("nfs", "-blockdev driver nfs (libnfs)"),
        }.get(driver, ("other", f"-blockdev driver {driver}"))
    disk.set("storage_backend", backend, bwhy)
    disk.set("iothread", "no", "QEMU default (no iothread= on the device)")
    if driver == "host_cdrom":
        disk.kind = "cdrom"
    return disk


def _controller(cmd: Command, bus_ref: str, kinds) -> Optional[Dict[str, str]]:
    """The -device whose id names the bus ``bus_ref`` (``scsihw0.0`` -> scsihw0)."""
    ctl_id = bus_ref.rsplit(".", 1)[0] if bus_ref else ""
    for dev in cmd.devices:
        if ctl_id and dev.get("id") == ctl_id:
            return dev
    if not ctl_id:
        for dev in cmd.devices:
            if dev.get("driver") in kinds:
                return dev
    return None


_OTHER_SCSI = {
    "lsi",
    "lsi53c895a",
    "lsi53c810",
    "megasas",
    "megasas-gen2",
    "mptsas1068",
    "am53c974",
    "dc390",
}


def _iothreads(disk: Disk, dev: Dict[str, str], where: str) -> None:
    """iothread= or iothread-vq-mapping= of a virtio-blk or virtio-scsi
    device (each virtqueue served by the iothread the mapping names)."""
    if dev.get("iothread"):
        disk.iothread_id = dev["iothread"]
        disk.set("iothread", "yes", f"set in the config ({where} iothread=)")
    elif dev.get("iothread-vq-mapping"):
        try:
            mapping = json.loads(dev["iothread-vq-mapping"])
            ids = [str(m.get("iothread")) for m in mapping]
        except (ValueError, AttributeError):
            ids = []
        disk.iothread_id = ",".join(ids)
        disk.set("iothread", "yes", f"set in the config ({where} iothread-vq-mapping)")


def set_scsi_block(disk: Disk) -> None:
    """A scsi-block disk's cache and aio: the host disk's, by SG_IO."""
    from . import scsi

    mode, write_back, why = scsi.cache(disk.path)
    if write_back is None:
        disk.set("cache_mode", mode, why)
        disk.cache_flags = None
    else:
        disk.set_cache(write_back, True, False, why)
    disk.set("aio", "threads", scsi.THREADS_WHY)
    disk.notes.append("scsi-block: SCSI passthrough of the host disk")


def _apply_device(cmd: Command, disk: Disk, dev: Dict[str, str], blockdev: bool):
    driver = dev.get("driver", "")
    where = f"-device {driver}"
    if dev.get("id"):
        disk.aliases.append(dev["id"])
    if driver in VIRTIO_BLK:
        disk.set("bus", "virtio-blk", where)
        _iothreads(disk, dev, where)
    elif driver.startswith("scsi-"):
        ctl = _controller(cmd, dev.get("bus", ""), set(SCSI_HBAS) | _OTHER_SCSI)
        ctl_driver = (ctl or {}).get("driver", "")
        if ctl_driver in SCSI_HBAS:
            disk.set("bus", SCSI_HBAS[ctl_driver], f"{driver} on {ctl_driver}")
        elif ctl_driver:
            disk.set("bus", "scsi", f"{driver} on {ctl_driver}")
        else:
            disk.set("bus", "scsi", f"{driver} (controller not found)")
        if ctl and ctl_driver in SCSI_HBAS:
            _iothreads(disk, ctl, f"-device {ctl_driver}")
        if driver == "scsi-cd":
            disk.kind = "cdrom"
        if driver == "scsi-block":
            set_scsi_block(disk)
            return
    elif driver.startswith("ide-"):
        bus = dev.get("bus", "")
        ctl = _controller(cmd, bus, {"ich9-ahci", "ahci"}) if bus else None
        if ctl and ctl.get("driver") in ("ich9-ahci", "ahci"):
            disk.set("bus", "sata", f"{driver} on {ctl['driver']}")
        elif cmd.is_q35:
            disk.set("bus", "sata", f"{driver} on q35's built-in AHCI (SATA)")
        else:
            disk.set("bus", "ide", f"{driver} on the IDE controller")
        if driver == "ide-cd":
            disk.kind = "cdrom"
    elif driver in ("nvme", "nvme-ns"):
        disk.set("bus", "nvme", where)
    elif driver == "usb-storage" or driver == "usb-uas":
        disk.set("bus", "usb", where)
    elif driver == "floppy":
        disk.set("bus", "other", where)
        disk.kind = "floppy"
    else:
        disk.set("bus", "other", where)
    wc = dev.get("write-cache")
    flags = disk.cache_flags or {"writeback": True, "direct": False, "no-flush": False}
    if driver == "usb-storage" and blockdev:
        # usb-storage hands a -blockdev node to an inner SCSI disk, which opens
        # it with the write cache on: its own write-cache is not applied
        # (measured with QEMU 7.2's query-block; with -drive it is applied).
        disk.sources["cache_mode"] += (
            f"; usb-storage on -blockdev: write-cache={wc or 'auto'} is not "
            "applied, the guest gets a write cache (QEMU 7.2 query-block)"
        )
        return
    if wc in ("on", "off"):
        wb = wc == "on"
        if wb != flags["writeback"] or blockdev:
            why = (
                DEVICE_WRITE_CACHE + f" ({driver} write-cache={wc})"
                if wb != flags["writeback"]
                else disk.sources["cache_mode"] + f"; {driver} write-cache={wc}"
            )
            disk.set_cache(wb, flags["direct"], flags["no-flush"], why)
    elif blockdev:
        disk.sources["cache_mode"] += (
            f"; {driver} write-cache=auto: on (QEMU default for -blockdev)"
        )


def from_argv(argv: List[str], pid: Optional[int] = None) -> List[Disk]:
    cmd = Command(argv)
    found = disks(cmd, pid, platform_of(argv))
    if not found:
        raise ValueError("no -drive or -blockdev disk in the QEMU command line")
    return found


def platform_of(argv: List[str]) -> str:
    """proxmox for qemu-server's command lines, libvirt for libvirt's, else qemu."""
    joined = " ".join(argv[:8])
    if os.path.basename(argv[0]) == "kvm" and "-id" in argv:
        return "proxmox"
    if "/var/run/qemu-server/" in " ".join(argv) or "qemu-server" in joined:
        return "proxmox"
    if "guest=" in joined and "debug-threads" in joined or "libvirt" in " ".join(argv):
        return "libvirt"
    return "qemu"
