"""Disks as QEMU itself reports them over QMP.

``query-block`` gives, per guest-visible drive, the root node and its cache
flags ``{writeback, direct, no-flush}``.  ``writeback`` is the BlockBackend's,
i.e. the device's write-cache: exact.  ``direct`` and ``no-flush`` are the
*root* node's, and the root may be a filter (Proxmox puts a throttle node on
top) or a format node opened without the flags its protocol node has: host I/O
is done by the protocol node at the bottom of the chain.  So when the node
graph is known (``x-debug-query-block-graph`` with ``query-named-block-nodes``,
both asked on a live socket) the reader follows the ``file`` edges down to the
protocol node and takes its flags; from ``query-block`` alone it takes the
root's and says so.  QMP does not report aio at all.
"""

from __future__ import annotations

import json
import socket
from typing import Dict, List, Optional

from .model import FROM_QMP, Disk
from .qemu import (
    FILE_DRIVERS,
    FILTER_DRIVERS,
    FORMAT_DRIVERS,
    SCSI_HBAS,
    VIRTIO_BLK,
    backend_of_path,
    set_scsi_block,
)


def _documents(data) -> list:
    """All JSON values in ``data`` (text with one or more JSON documents, or
    already decoded)."""
    if not isinstance(data, str):
        return [data]
    docs, dec, i = [], json.JSONDecoder(), 0
    text = data.strip()
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            break
        try:
            doc, i = dec.raw_decode(text, i)
        except ValueError as exc:
            raise ValueError(f"not QMP JSON: {exc}") from None
        docs.append(doc)
    return docs


def split_replies(*inputs) -> Dict[str, object]:
    """Recognise QMP replies by their shape.

    Each input may be JSON text or decoded; a reply may be bare, wrapped in
    ``{"return": ...}``, a list of such replies, a QMP transcript (greeting,
    events and replies, one per line) or an object keyed by command name
    (``{"query-block": [...], "query-iothreads": [...]}``).  Returns a dict
    keyed by command name.
    """
    found: Dict[str, object] = {}

    def visit(value, depth=0):
        if depth > 4:
            return
        if isinstance(value, dict):
            if "return" in value and len(value) <= 2:
                visit(value["return"], depth + 1)
                return
            if "nodes" in value and "edges" in value:
                found.setdefault("x-debug-query-block-graph", value)
                return
            if set(value) >= {"enabled", "present"}:
                found.setdefault("query-kvm", value)
                return
            for key, sub in value.items():
                if key.startswith(("query-", "x-debug-")):
                    visit(sub, depth + 1)
            return
        if isinstance(value, list):
            if value and all(isinstance(v, dict) for v in value):
                first = value[0]
                if "device" in first and ("locked" in first or "inserted" in first):
                    found.setdefault("query-block", value)
                    return
                if "thread-id" in first:
                    found.setdefault("query-iothreads", value)
                    return
                if "drv" in first and "node-name" in first:
                    found.setdefault("query-named-block-nodes", value)
                    return
                for v in value:
                    visit(v, depth + 1)
            elif value == []:
                # an empty reply: only query-iothreads is empty in practice
                found.setdefault("query-iothreads", value)

    for data in inputs:
        if data is None:
            continue
        for doc in _documents(data):
            visit(doc)
    return found


def _leaf(root: str, graph: dict, named: Dict[str, dict]) -> List[dict]:
    """The chain of named-node infos from ``root`` down its file edges."""
    ids = {n["id"]: n["name"] for n in graph.get("nodes", [])}
    by_name = {n["name"]: n["id"] for n in graph.get("nodes", [])}
    edges: Dict[int, Dict[str, int]] = {}
    for e in graph.get("edges", []):
        edges.setdefault(e["parent"], {})[e["name"]] = e["child"]
    chain = []
    node = by_name.get(root)
    seen = set()
    while node is not None and node not in seen:
        seen.add(node)
        info = named.get(ids.get(node))
        if info is None:
            break
        chain.append(info)
        if _is_protocol(info.get("drv")):
            break
        node = edges.get(node, {}).get("file")
    return chain


def disks(
    query_block,
    query_iothreads=None,
    named_nodes=None,
    extra: Optional[dict] = None,
) -> List[Disk]:
    """Disks from QMP replies (see :func:`split_replies` for accepted forms).
    ``extra`` holds what a live socket adds (device types, iothreads, kvm)."""
    found = split_replies(query_block, query_iothreads, named_nodes)
    if "query-block" not in found:
        raise ValueError("no query-block reply in the QMP JSON")
    blocks = found["query-block"]
    iothreads = found.get("query-iothreads")
    named = {n.get("node-name"): n for n in found.get("query-named-block-nodes") or []}
    graph = found.get("x-debug-query-block-graph")
    kvm = found.get("query-kvm")
    extra = extra or {}
    out = []
    for info in blocks:
        inserted = info.get("inserted")
        qdev = info.get("qdev") or ""
        dev_path = (
            qdev[: -len("/virtio-backend")]
            if qdev.endswith("/virtio-backend")
            else qdev
        )
        disk_id = info.get("device") or (inserted or {}).get("node-name") or qdev
        disk = Disk(id=disk_id, platform="qemu")
        if dev_path.startswith("/machine/peripheral/"):
            disk.aliases.append(dev_path.rsplit("/", 1)[-1])
        elif qdev and not qdev.startswith("/"):
            disk.aliases.append(qdev)
        if inserted is None:
            disk.kind = "cdrom" if info.get("removable") else "disk"
            for name in (
                "image_format",
                "cache_mode",
                "aio",
                "iothread",
                "storage_backend",
                "bus",
                "virtualization",
            ):
                disk.set(name, "unknown", "no medium")
            disk.notes.append("no medium inserted")
            out.append(disk)
            continue
        cache = inserted.get("cache") or {}
        root = inserted.get("node-name") or ""
        chain = _leaf(root, graph, named) if graph and named else []
        if not chain and named:
            chain = _leaf_by_filename(inserted, named)
        if not chain and _is_protocol(inserted.get("drv")):
            # the root is the protocol node itself: nothing below it
            chain = [inserted]
        leaf = chain[-1] if chain else inserted
        leaf_cache = leaf.get("cache") or cache
        if chain:
            why = (
                f"{FROM_QMP}: writeback of the drive, direct and no-flush of its "
                f"protocol node {leaf.get('node-name')} ({leaf.get('drv')})"
            )
        else:
            why = (
                f"{FROM_QMP} query-block: the root node's flags (its protocol "
                "node may differ; add query-named-block-nodes to be sure)"
            )
        if not chain and inserted.get("drv") in FILTER_DRIVERS:
            disk.set(
                "cache_mode",
                "unknown",
                f"query-block reports the {inserted.get('drv')} filter node's "
                "flags, not the disk's; add query-named-block-nodes and "
                "x-debug-query-block-graph",
            )
        else:
            disk.set_cache(
                bool(cache.get("writeback", True)),
                bool(leaf_cache.get("direct", False)),
                bool(leaf_cache.get("no-flush", False)),
                why,
            )
        drivers = [n.get("drv") for n in chain] or [inserted.get("drv")]
        fmt = next((d for d in drivers if d in FORMAT_DRIVERS), None)
        if fmt:
            disk.set("image_format", FORMAT_DRIVERS[fmt], FROM_QMP)
        elif chain:
            disk.set(
                "image_format",
                "raw",
                f"{FROM_QMP}: no format node above the {chain[-1].get('drv')} "
                "protocol node, so the guest reads its bytes as they are (raw)",
            )
        else:
            disk.set("image_format", "unknown", f"{FROM_QMP}: root is {drivers[0]}")
        path = leaf.get("file") or inserted.get("file") or ""
        if path.startswith("json:"):
            path = _json_filename(path)
        disk.path = path
        proto = leaf.get("drv") if chain else None
        if proto and proto not in FILE_DRIVERS:
            disk.set("aio", "default", f"the {proto} driver does its own I/O; no aio")
        else:
            disk.set("aio", "unknown", "QMP does not report aio")
        backend, bwhy = backend_of_path(path)
        disk.set("storage_backend", backend, bwhy)
        if info.get("removable") and not extra.get("types", {}).get(disk_id):
            disk.kind = "cdrom"
            disk.notes.append("removable medium (CD-ROM or floppy)")
        if "flash" in qdev or disk_id.startswith("pflash"):
            disk.kind = "pflash"
        # bus and iothread: a live socket knows the device types.
        dev = extra.get("types", {}).get(disk_id)
        if dev:
            _bus_from_types(disk, dev)
        elif qdev.endswith("/virtio-backend"):
            disk.set(
                "bus", "virtio-blk", f"{FROM_QMP}: qdev {qdev} is a virtio block device"
            )
        else:
            disk.set("bus", "unknown", "query-block does not name the device type")
        if dev and dev.get("iothread"):
            disk.iothread_id = dev["iothread"]
            disk.set("iothread", "yes", f"{FROM_QMP} ({dev['iothread_from']})")
        elif dev:
            disk.set("iothread", "no", f"{FROM_QMP}: no iothread on the device")
        elif iothreads == []:
            disk.set("iothread", "no", f"{FROM_QMP}: query-iothreads lists none")
        else:
            disk.set(
                "iothread",
                "unknown",
                "QMP JSON does not say which device uses which iothread",
            )
        if kvm is not None:
            virt = "kvm" if kvm.get("enabled") else "qemu-tcg"
            disk.set("virtualization", virt, f"{FROM_QMP} query-kvm")
        else:
            disk.set("virtualization", "unknown", "no query-kvm reply")
        out.append(disk)
    return out


def _is_protocol(drv) -> bool:
    """A protocol driver (file, host_device, rbd, nbd, ...): not a format
    driver and not a filter, so no node lies under it."""
    return bool(drv) and drv not in FORMAT_DRIVERS and drv not in FILTER_DRIVERS


def _leaf_by_filename(inserted: dict, named: Dict[str, dict]) -> List[dict]:
    """Without the node graph: the one protocol node with the root's file name."""
    path = inserted.get("file") or ""
    if path.startswith("json:"):
        path = _json_filename(path)
    leaves = [
        n
        for n in named.values()
        if _is_protocol(n.get("drv")) and n.get("file") == path
    ]
    if len(leaves) != 1:
        return []
    return [inserted, leaves[0]]


def _json_filename(path: str) -> str:
    try:
        node = json.loads(path[5:])
    except ValueError:
        return path
    while isinstance(node, dict):
        if "filename" in node:
            return str(node["filename"])
        node = node.get("file")
    return path


def _bus_from_types(disk: Disk, dev: dict) -> None:
    kind = dev.get("type", "")
    ctl = dev.get("controller_type", "")
    if kind in VIRTIO_BLK:
        disk.set("bus", "virtio-blk", f"{FROM_QMP}: {kind}")
    elif kind.startswith("scsi-") and ctl.startswith("usb-"):
        disk.set("bus", "usb", f"{FROM_QMP}: {kind} inside {ctl}")
    elif kind.startswith("scsi-"):
        bus = SCSI_HBAS.get(ctl, "scsi" if ctl != "pvscsi" else "vmware-pvscsi")
        disk.set("bus", bus, f"{FROM_QMP}: {kind} on {ctl or 'a SCSI bus'}")
        if kind == "scsi-cd":
            disk.kind = "cdrom"
        if kind == "scsi-block":
            set_scsi_block(disk)
    elif kind.startswith("ide-"):
        sata = "ahci" in ctl
        disk.set(
            "bus", "sata" if sata else "ide", f"{FROM_QMP}: {kind} on {ctl or 'IDE'}"
        )
        if kind == "ide-cd":
            disk.kind = "cdrom"
    elif kind in ("nvme", "nvme-ns"):
        disk.set("bus", "nvme", f"{FROM_QMP}: {kind}")
    elif kind in ("usb-storage", "usb-uas"):
        disk.set("bus", "usb", f"{FROM_QMP}: {kind}")
    elif kind:
        disk.set("bus", "other", f"{FROM_QMP}: {kind}")
    if kind not in ("ide-cd", "scsi-cd") and disk.kind == "cdrom":
        disk.kind = "disk"
        disk.notes = [n for n in disk.notes if not n.startswith("removable")]


class Client:
    """A minimal QMP client over a unix socket."""

    def __init__(self, path: str, timeout: float = 5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as exc:
            self.sock.close()
            raise ValueError(f"cannot connect to QMP socket {path}: {exc}") from None
        self.file = self.sock.makefile("rwb")
        greeting = self._read()
        if "QMP" not in greeting:
            self.close()
            raise ValueError(f"{path} is not a QMP socket")
        self.execute("qmp_capabilities")

    def _read(self) -> dict:
        while True:
            line = self.file.readline()
            if not line:
                raise ValueError("the QMP socket closed")
            try:
                msg = json.loads(line)
            except ValueError:
                raise ValueError(f"not QMP: {line[:80]!r}") from None
            if "event" not in msg:
                return msg

    def execute(self, command: str, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg).encode() + b"\n")
        self.file.flush()
        reply = self._read()
        if "error" in reply:
            raise KeyError(reply["error"].get("desc", "error"))
        return reply.get("return")

    def try_execute(self, command: str, **arguments):
        try:
            return self.execute(command, **arguments)
        except KeyError:
            return None

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.sock.close()


def from_socket(path: str, timeout: float = 5.0) -> List[Disk]:
    """Ask a live QEMU: query-block, the node graph, iothreads, kvm, and each
    drive's device type, controller and iothread (qom-get)."""
    try:
        client = Client(path, timeout)
    except socket.timeout:
        raise ValueError(f"QMP socket {path}: no answer (another client?)") from None
    try:
        replies = {
            "query-block": client.execute("query-block"),
            "query-named-block-nodes": client.try_execute("query-named-block-nodes"),
            "query-iothreads": client.try_execute("query-iothreads"),
            "query-kvm": client.try_execute("query-kvm"),
        }
        graph = client.try_execute("x-debug-query-block-graph")
        if graph:
            replies["x-debug-query-block-graph"] = graph
        types = {}
        for info in replies["query-block"] or []:
            qdev = info.get("qdev") or ""
            disk_id = (
                info.get("device")
                or (info.get("inserted") or {}).get("node-name")
                or qdev
            )
            if not qdev.startswith("/"):
                qdev = f"/machine/peripheral/{qdev}" if qdev else ""
            if not qdev:
                continue
            types[disk_id] = _device_facts(client, qdev)
    except (OSError, socket.timeout) as exc:
        raise ValueError(f"QMP socket {path}: {exc}") from None
    finally:
        client.close()
    replies = {k: v for k, v in replies.items() if v is not None}
    found = disks(replies, extra={"types": types})
    for disk in found:
        if disk.platform == "qemu":
            disk.sources.setdefault("bus", FROM_QMP)
    return found


def _qom(client: Client, path: str, prop: str):
    return client.try_execute("qom-get", path=path, property=prop)


def _iothread_of(client: Client, paths, kind: str):
    """(iothread ids, which property) of the first of ``paths`` that has
    ``iothread`` or ``iothread-vq-mapping`` (QEMU 9.0+), else None."""
    for path in paths:
        iothread = _qom(client, path, "iothread")
        if iothread:
            return str(iothread).rsplit("/", 1)[-1], f"{kind} iothread"
    for path in paths:
        mapping = _qom(client, path, "iothread-vq-mapping")
        if isinstance(mapping, list) and mapping:
            ids = ",".join(str(m.get("iothread")) for m in mapping)
            return ids, f"{kind} iothread-vq-mapping"
    return None


def _device_facts(client: Client, qdev: str) -> dict:
    dev = qdev[: -len("/virtio-backend")] if qdev.endswith("/virtio-backend") else qdev
    facts = {"type": _qom(client, dev, "type") or ""}
    found = _iothread_of(client, (qdev, dev), facts["type"])
    if found:
        facts["iothread"], facts["iothread_from"] = found
    bus = _qom(client, qdev, "parent_bus") or ""
    if bus and facts["type"].startswith(("scsi-", "ide-")):
        ctl = bus.rsplit("/", 1)[0]
        facts["controller_type"] = _qom(client, ctl, "type") or ""
        if facts["type"].startswith("scsi-") and not facts.get("iothread"):
            found = _iothread_of(client, (ctl,), facts["controller_type"])
            if found:
                facts["iothread"], facts["iothread_from"] = found
    return facts
