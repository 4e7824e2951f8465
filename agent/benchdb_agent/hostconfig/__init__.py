"""Read a VM's disk configuration on the host: what QEMU (or Xen) really runs.

Public API (stable; other agent commands call it)::

    from benchdb_agent import hostconfig

    disks = hostconfig.for_qemu_pid(pid)                 # a running QEMU
    disks = hostconfig.for_qemu_cmdline(text_or_argv, pid=None)  # showcmd, .args
    disks = hostconfig.for_proxmox(conf_text, storage_cfg_text, qemu_version=None)
    disks = hostconfig.for_libvirt_xml(xml_text)
    disks = hostconfig.for_qmp(query_block_json, query_iothreads_json=None,
                               named_nodes=None)  # or one document with all
    disks = hostconfig.for_qmp_socket(path)
    disks = hostconfig.for_xl_cfg(xl_cfg_text)           # disk = [ ... ]
    disks = hostconfig.for_xl_json(xl_list_l_text)
    disks = hostconfig.read(kind, text_or_path)          # kind: one of KINDS

    disk = hostconfig.pick(disks, "scsi0")   # ValueError listing the ids
    disk.to_tags()    # {"cache_mode": "none", "aio_mode": "io_uring", ...}
    disk.sources      # {"cache_mode": "Proxmox default (cache=none)", ...}
    disk.to_dict()    # JSON-ready: id, kind, target, bus, path, tags, sources
                      # (keyed by tag name), notes
    hostconfig.tags_line(disk)   # "--tag cache_mode=none ...", shell-quoted

Field names on Disk: ``aio`` and ``bus``; the tag names are ``aio_mode`` and
``disk_bus`` (``to_tags()`` and ``to_dict()`` use the tag names).

Every reader returns a list of :class:`Disk` (see :mod:`.model`): every disk of
the VM under the id its source uses (``scsi0``, ``vda``, a drive id or
node-name, ``xvda``), with ``bus``, ``cache_mode``, ``aio``, ``iothread``,
``image_format``, ``storage_backend``, ``path``/``volume``, ``kind`` /
``is_target`` (CD-ROMs, EFI vars, pflash, TPM state and cloud-init disks are
listed but are not benchmark targets) and ``sources`` (where each value came
from).  Values are words of :mod:`benchdb_agent.vocab`.  Bad input raises
ValueError with a message fit for a user.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional, Union

from . import qemu
from .model import Disk, cache_mode, select

__all__ = [
    "Disk",
    "KINDS",
    "cache_mode",
    "for_libvirt_xml",
    "for_proxmox",
    "for_qemu_cmdline",
    "for_qemu_pid",
    "for_qmp",
    "for_qmp_socket",
    "for_xl_cfg",
    "for_xl_json",
    "pick",
    "read",
    "select",
    "tags_line",
]


def for_qemu_cmdline(cmdline: Union[str, List[str]], pid: Optional[int] = None):
    """Disks of a QEMU command line: argv list, or text in any form
    :func:`qemu.split_command` reads (NUL-separated, shell with continuations
    and environment words, one argument per line)."""
    argv = qemu.split_command(cmdline) if isinstance(cmdline, str) else list(cmdline)
    return qemu.from_argv(argv, pid)


def for_qemu_pid(pid: int) -> List[Disk]:
    """Disks of a running QEMU, from /proc/PID/cmdline (virtualization from
    the process's open KVM file descriptors)."""
    try:
        raw = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the command line of pid {pid}: {exc}") from None
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    if not argv:
        raise ValueError(f"pid {pid} has no command line (a kernel thread or gone)")
    return qemu.from_argv(argv, int(pid))


def for_proxmox(
    conf_text: str,
    storage_cfg_text: Optional[str] = None,
    qemu_version: Optional[str] = None,
):
    """Disks of a Proxmox VM config (``qm config`` or ``/etc/pve/qemu-server/N.conf``;
    snapshot sections are ignored) with ``/etc/pve/storage.cfg``.
    ``qemu_version`` (``"9.2"``) is the installed QEMU's, which an unpinned VM
    runs as its machine version; on a Proxmox VE host it is asked from
    ``kvm --version`` when not given."""
    from . import proxmox

    return proxmox.disks(conf_text, storage_cfg_text, qemu_version)


def for_libvirt_xml(xml_text: str) -> List[Disk]:
    """Disks of a libvirt domain XML (``virsh dumpxml``)."""
    from . import libvirt

    return libvirt.disks(xml_text)


def for_qmp(query_block, query_iothreads=None, named_nodes=None) -> List[Disk]:
    """Disks from QMP replies (JSON text or decoded): ``query-block`` (required),
    ``query-iothreads`` and ``query-named-block-nodes`` (optional).  A single
    document may also hold several replies, see :func:`qmp.split_replies`."""
    from . import qmp

    return qmp.disks(query_block, query_iothreads, named_nodes)


def for_qmp_socket(path: str, timeout: float = 5.0) -> List[Disk]:
    """Disks of a live QEMU, asked over its QMP unix socket."""
    from . import qmp

    return qmp.from_socket(path, timeout)


def for_xl_cfg(text: str) -> List[Disk]:
    """Disks of a Xen xl.cfg (its ``disk = [ ... ]``) or bare disk spec lines."""
    from . import xen

    return xen.from_xl_cfg(text)


def for_xl_json(text: str) -> List[Disk]:
    """Disks of ``xl list -l`` JSON or a libxl domain config JSON."""
    from . import xen

    return xen.from_xl_json(text)


KINDS = {
    "qemu-cmdline": for_qemu_cmdline,
    "qemu-pid": for_qemu_pid,
    "proxmox": for_proxmox,
    "libvirt-xml": for_libvirt_xml,
    "qmp-json": for_qmp,
    "qmp-socket": for_qmp_socket,
    "xl-cfg": for_xl_cfg,
    "xl-json": for_xl_json,
}


def read(kind: str, text_or_path, *args, **kwargs) -> List[Disk]:
    """Dispatch by ``kind`` (a key of KINDS).  A Path is read as a file;
    strings are the input text (a pid or socket path for those kinds)."""
    if kind not in KINDS:
        raise ValueError(f"unknown source kind {kind!r}; one of {', '.join(KINDS)}")
    if isinstance(text_or_path, Path):
        text_or_path = text_or_path.read_text()
    return KINDS[kind](text_or_path, *args, **kwargs)


def pick(disks: List[Disk], disk_id: str) -> Disk:
    """The one disk named ``disk_id`` (id or unambiguous alias); ValueError
    listing the ids otherwise."""
    return select(disks, disk_id)[0]


def tags_line(disk: Disk) -> str:
    """``--tag key=value ...`` for a shell (every word shlex-quoted)."""
    return " ".join(
        "--tag " + shlex.quote(f"{k}={v}") for k, v in disk.to_tags().items()
    )
