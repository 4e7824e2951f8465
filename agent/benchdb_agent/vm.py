"""``benchdb-agent vm``: measure a VM's disk and the storage under it, paired.

Run as root on the KVM host.  The VM is named by its Proxmox VMID, libvirt
domain or QEMU pid, the disk by its id.  The agent

1. reads that disk's effective settings with the host-config reader (so the
   tags are the configuration, not what somebody remembered);
2. runs the suite natively on the storage under the disk (a scratch folder
   on the image's filesystem, never the image or volume itself): the host
   baseline;
3. copies itself into the guest through the QEMU guest agent and runs the
   same profile there against the directory or blank disk the user names,
   tagged with the host's values (marked ``host-config`` in the bundle's
   ``tag_sources``) and with the same pair id;
4. with ``--cache-modes``, repeats step 3 per cache mode: change the disk's
   cache mode (``qm set``, libvirt XML through ``virsh define``, or a plain
   QEMU restarted with the changed command line), restart the VM, wait for
   its guest agent, measure; all runs share a sweep id.  The modes run in
   rounds (``--rounds``, default 3), every mode once per round, each round in
   a fresh random order (``sweep_plan``); each guest run records its round
   and its place in the sweep, and the seed is printed.  The original
   configuration is restored at the end, on failure and on Ctrl-C/SIGTERM.
   Before anything is changed it is also saved in a state file,
   ``<state dir>/vm-restore-<kind>-<id>.json`` (``--state-dir``, else
   ``$BENCHDB_AGENT_STATE_DIR``, else ``/var/lib/benchdb-agent``), removed
   after a successful restore; an agent killed mid-sweep (SIGKILL, power
   loss) leaves it, ``vm ... --restore`` restores from it, and a new sweep
   of that VM is refused until then.

Without a guest agent it prints the command to run inside the guest instead,
with the tags and the pair id filled in.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET

from . import (
    DEFAULT_STATE_DIR,
    SWEEP_ROUNDS,
    detect,
    hostconfig,
    qga,
    runner,
    stats,
    suite,
    vocab,
    zipapp_build,
)
from . import bundle as bundle_mod
from .contract import MAX_SWEEP_RUNS
from .hostconfig.model import MODE_FLAGS

CACHE_MODES = vocab.CACHE_MODES
HOST_TAGS = vocab.HOST_TAGS
GUEST_DIR = "/tmp"
# The agent's exit code for a partial run (cli.EXIT_PARTIAL).
EXIT_PARTIAL = 4


class VmError(RuntimeError):
    """What went wrong, in words the user can act on."""


# --- reading a disk's configuration -------------------------------------------


class DiskConfig:
    """One virtual disk as the host runs it: tags, image path, where read.

    ``details`` says where each value came from (the host-config reader's
    ``sources``: "set in the config", "QEMU default", ...).
    """

    def __init__(
        self, disk_id: str, tags: dict, path, source: str, details=None
    ) -> None:
        self.id = disk_id
        self.tags = {
            k: v for k, v in tags.items() if k in HOST_TAGS and v and v != "unknown"
        }
        self.path = path or None
        self.source = source
        self.details = dict(details or {})

    def __repr__(self) -> str:
        return f"DiskConfig({self.id!r}, {self.tags!r}, {self.path!r})"


def read_disk(kind: str, text, disk_id: str, source: str, **extra) -> DiskConfig:
    """One disk through the host-config reader (hostconfig's public API)."""
    try:
        if kind == "qemu":
            disks = hostconfig.for_qemu_cmdline(text, extra.get("pid"))
        elif kind == "libvirt":
            disks = hostconfig.for_libvirt_xml(text)
        else:
            disks = hostconfig.for_proxmox(text, extra.get("storage_cfg"))
        disk = hostconfig.pick(disks, disk_id)
    except ValueError as exc:
        raise VmError(str(exc)) from None
    if not disk.is_target:
        raise VmError(f"disk {disk_id} is a {disk.kind}, not a disk to measure")
    details = disk.to_dict().get("sources", {})
    return DiskConfig(disk_id, disk.to_tags(), disk.path, source, details)


def host_filesystem(path: str | None) -> str | None:
    """The filesystem type holding ``path`` (longest mount point match)."""
    if not path:
        return None
    real = os.path.realpath(path)
    best, fstype = "", None
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        return None
    return fstype


# --- plain QEMU -----------------------------------------------------------------


def _split_opts(value: str) -> list:
    """QEMU option string -> parts (``,,`` is an escaped comma)."""
    parts, current, i = [], "", 0
    while i < len(value):
        if value[i] == ",":
            if value[i + 1 : i + 2] == ",":
                current += ",,"
                i += 2
                continue
            parts.append(current)
            current = ""
        else:
            current += value[i]
        i += 1
    parts.append(current)
    return parts


def qemu_drive_index(argv: list, drive_id: str) -> int:
    """Index in argv of the value of ``-drive ...,id=drive_id``."""
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-drive", "--drive"):
            if f"id={drive_id}" in _split_opts(argv[i + 1]):
                return i + 1
    if any(a in ("-blockdev", "--blockdev") for a in argv):
        raise VmError(
            f"no -drive with id={drive_id}; changing the cache mode of a -blockdev "
            "disk is not supported (its cache is spread over cache.direct, "
            "cache.no-flush and the device's write-cache)"
        )
    raise VmError(f"no -drive with id={drive_id} in the QEMU command line")


def qemu_with_cache(argv: list, drive_id: str, mode: str) -> list:
    """The command line with ``cache=mode`` on the drive (nothing else moves)."""
    if mode not in CACHE_MODES:
        raise VmError(f"unknown cache mode {mode!r}; one of {', '.join(CACHE_MODES)}")
    index = qemu_drive_index(argv, drive_id)
    parts = [p for p in _split_opts(argv[index]) if not p.startswith("cache=")]
    parts.append(f"cache={mode}")
    out = list(argv)
    out[index] = ",".join(parts)
    return out


def _drive_file(argv: list, drive_id: str) -> str | None:
    try:
        index = qemu_drive_index(argv, drive_id)
    except VmError:
        return None
    for part in _split_opts(argv[index]):
        if part.startswith("file="):
            return part[5:].replace(",,", ",")
    return None


def _qmp_socket(argv: list) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-qmp", "--qmp") and argv[i + 1].startswith("unix:"):
            return _split_opts(argv[i + 1][5:])[0]
    return None


def _process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited


def qmp_command(path: str, command: str, arguments=None, timeout: float = 10.0):
    """One QMP command; returns its ``return`` value."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        reader = sock.makefile("rb")
        json.loads(reader.readline())
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        for msg in ({"execute": "qmp_capabilities"}, message):
            sock.sendall(json.dumps(msg).encode() + b"\n")
            while True:
                line = reader.readline()
                if not line:
                    raise OSError("QMP closed the connection")
                answer = json.loads(line)
                if "return" in answer or "error" in answer:
                    break
            if "error" in answer:
                raise VmError(f"QMP {msg['execute']}: {answer['error']}")
        return answer["return"]


def check_running_mode(running: str | None, configured: str | None):
    """Compare QEMU's query-block with the configuration.

    The host side (O_DIRECT, ignored flushes) must match: else VmError.  The
    ``writeback`` flag of query-block is the write cache the *guest* sees,
    which the guest may switch off or on (hdparm -W, sysfs cache_type); a
    difference there is the guest's doing, returned as a warning text.
    """
    if running is None or configured not in MODE_FLAGS:
        return None
    want, got = MODE_FLAGS[configured], MODE_FLAGS[running]
    if want[1:] != got[1:]:
        raise VmError(
            f"QEMU's query-block says cache={running}, the configuration says "
            f"cache={configured}"
        )
    if want[0] != got[0]:
        state = "on" if got[0] else "off"
        return (
            f"the guest switched its disk's write cache {state} (QEMU runs "
            f"cache={configured}, the guest sees {running}'s write cache)"
        )
    return None


class QemuVm:
    """A plain QEMU process: its command line is its configuration."""

    kind = "qemu"

    def __init__(self, pid: int, qmp: str | None = None, qga_socket=None, log=None):
        self.log = log or (lambda m: None)
        self.proc = None
        self._load(pid)
        self.original = list(self.argv)
        self.qmp_arg, self.qga_arg = qmp, qga_socket
        self.pids = [pid]

    @classmethod
    def from_state(cls, doc: dict, log=None):
        """The VM as saved, for a restore when its QEMU is no longer running."""
        self = cls.__new__(cls)
        self.log = log or (lambda m: None)
        self.proc = None
        self.argv = list(doc["argv"])
        self.cwd, self.env = doc["cwd"], dict(doc["env"])
        self.pid = doc["pids"][-1]
        self.pids = list(doc["pids"])
        self.qmp_arg, self.qga_arg = doc.get("qmp"), doc.get("qga_socket")
        self.apply_state(doc)
        return self

    @property
    def state_name(self) -> str:
        return str(self.pids[0])

    def state(self, disk_id: str) -> dict:
        """What restore needs (QEMU's environment too: it is restarted in it)."""
        return {
            "argv": self.original,
            "cwd": self.cwd,
            "env": self.env,
            "pids": self.pids,
            "qmp": self.qmp_arg,
            "qga_socket": self.qga_arg,
        }

    def matches(self, doc: dict) -> bool:
        """This process is the saved VM: a pid it had, or its command line with
        only the swept drive's cache mode changed."""
        if self.pid in doc.get("pids", []):
            return True
        if self.cwd != doc.get("cwd"):
            return False
        saved = doc.get("argv") or []
        if self.argv == saved:
            return True
        try:
            return any(
                qemu_with_cache(saved, doc["disk"], m) == self.argv for m in CACHE_MODES
            )
        except (VmError, KeyError):
            return False

    def apply_state(self, doc: dict) -> None:
        self.original = list(doc["argv"])
        self.cwd, self.env = doc["cwd"], dict(doc["env"])

    def _load(self, pid: int) -> None:
        try:
            raw = open(f"/proc/{pid}/cmdline", "rb").read()
            self.cwd = os.readlink(f"/proc/{pid}/cwd")
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError as exc:
            raise VmError(
                f"cannot read QEMU process {pid}: {exc} (run as root)"
            ) from None
        self.argv = [a.decode() for a in raw.split(b"\0") if a]
        if not self.argv or "qemu" not in os.path.basename(self.argv[0]):
            raise VmError(f"process {pid} is not QEMU ({self.argv[:1]})")
        self.env = dict(
            e.decode(errors="replace").split("=", 1)
            for e in env.split(b"\0")
            if b"=" in e
        )
        self.pid = pid

    @property
    def name(self) -> str:
        return f"QEMU pid {self.pid}"

    def _abs(self, path: str | None) -> str | None:
        if not path:
            return None
        return path if os.path.isabs(path) else os.path.join(self.cwd, path)

    def disk(self, disk_id: str) -> DiskConfig:
        if _process_alive(self.pid):
            self._load(self.pid)  # what the process runs now, not our idea of it
        disk = read_disk("qemu", self.argv, disk_id, "qemu-cmdline", pid=self.pid)
        disk.path = self._abs(disk.path or _drive_file(self.argv, disk_id))
        return disk

    def qmp_path(self) -> str | None:
        return self._abs(self.qmp_arg or _qmp_socket(self.argv))

    def running_cache_mode(self, disk_id: str) -> str | None:
        """What QEMU itself says (QMP query-block), when a QMP socket is known."""
        path = self.qmp_path()
        if not path:
            return None
        try:
            blocks = qmp_command(path, "query-block")
        except (OSError, ValueError) as exc:
            raise VmError(f"QMP query-block on {path}: {exc}") from None
        for block in blocks:
            names = (block.get("device"), block.get("qdev"))
            if disk_id in names and block.get("inserted"):
                flags = block["inserted"]["cache"]
                return hostconfig.cache_mode(
                    flags["writeback"], flags["direct"], flags["no-flush"]
                )
        return None

    def guest(self):
        path = self._abs(self.qga_arg or qga.socket_from_cmdline(self.argv))
        if not path:
            return None
        return qga.Guest(qga.SocketChannel(path))

    def change_commands(self, disk_id: str, mode: str) -> list:
        new = qemu_with_cache(self.argv, disk_id, mode)
        index = qemu_drive_index(new, disk_id)
        return [
            f"stop QEMU pid {self.pid} (the guest is asked to power off)",
            f"start it again from {self.cwd} with -drive {new[index]}",
        ]

    def set_cache_mode(self, disk_id: str, mode: str, guest) -> None:
        self._restart(qemu_with_cache(self.argv, disk_id, mode), guest)

    def restore(self, guest) -> bool:
        if self.argv == self.original and _process_alive(self.pid):
            return False
        self._restart(self.original, guest)
        return True

    def _stop(self, guest, timeout: float = 120.0) -> None:
        if not _process_alive(self.pid):
            return
        asked = False
        if guest is not None:
            guest.close()  # a fresh channel: an interrupted call may be half-read
            try:
                guest.shutdown()
                asked = True
            except qga.QgaError:
                pass
            guest.close()
        if not asked and self.qmp_path():
            try:
                qmp_command(self.qmp_path(), "system_powerdown")
            except (OSError, ValueError, VmError):
                pass
        if self._wait_exit(timeout):
            return
        self.log(f"QEMU pid {self.pid} did not power off in {timeout:.0f} s: SIGTERM")
        os.kill(self.pid, signal.SIGTERM)
        if not self._wait_exit(30):
            os.kill(self.pid, signal.SIGKILL)
            self._wait_exit(30)

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        asked_status = 0.0
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.pid == self.pid:
                self.proc.poll()  # reap our own child
            if not _process_alive(self.pid):
                return True
            if self.qmp_path() and time.monotonic() - asked_status > 2:
                asked_status = time.monotonic()
                self._quit_if_powered_off()
            time.sleep(0.2)
        return False

    def _quit_if_powered_off(self) -> None:
        """With -no-shutdown QEMU stays up after the guest powered off: the
        guest is down, so ending QEMU now loses nothing."""
        try:
            status = qmp_command(self.qmp_path(), "query-status", timeout=5)
            # prelaunch: started with -S and never run, no guest to lose.
            if status.get("status") in ("shutdown", "prelaunch"):
                qmp_command(self.qmp_path(), "quit", timeout=5)
        except (OSError, ValueError, VmError):
            pass  # QEMU is exiting, or its QMP is busy: the wait goes on

    def _restart(self, argv: list, guest) -> None:
        self._stop(guest)
        log = open(os.path.join(tempfile.gettempdir(), "benchdb-vm-qemu.log"), "ab")
        try:
            # A session of its own: the VM outlives the agent, as before.
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        except OSError as exc:
            raise VmError(f"could not start QEMU again: {exc}") from None
        finally:
            log.close()
        pid = proc.pid
        if "-daemonize" in argv:
            proc.wait(120)
            pidfile = argv[argv.index("-pidfile") + 1] if "-pidfile" in argv else None
            if proc.returncode != 0 or not pidfile:
                raise VmError("a daemonized QEMU needs -pidfile to be followed")
            pid = int(open(self._abs(pidfile)).read().strip())
        else:
            time.sleep(0.5)
            if proc.poll() is not None:
                raise VmError(
                    f"QEMU exited at once (rc {proc.returncode}); see {log.name}"
                )
        self.proc, self.pid, self.argv = proc, pid, list(argv)
        self.pids.append(pid)
        self.log(f"QEMU started again: pid {pid}")


# --- libvirt ----------------------------------------------------------------------


def libvirt_with_cache(xml_text: str, target_dev: str, mode: str) -> str:
    """The domain XML with ``<driver cache=mode>`` on one disk."""
    if mode not in CACHE_MODES:
        raise VmError(f"unknown cache mode {mode!r}")
    for prefix, _, uri in re.findall(r"xmlns:(\w+)=([\"'])(.*?)\2", xml_text):
        ET.register_namespace(prefix, uri)
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise VmError(f"not libvirt domain XML: {exc}") from None
    for disk in root.iter("disk"):
        target = disk.find("target")
        if target is not None and target.get("dev") == target_dev:
            driver = disk.find("driver")
            if driver is None:
                driver = ET.SubElement(disk, "driver", {"name": "qemu"})
            driver.set("cache", mode)
            return ET.tostring(root, encoding="unicode")
    raise VmError(f"no disk with target dev {target_dev!r} in the domain XML")


class LibvirtVm:
    """A libvirt domain, changed through ``virsh define`` and restarted."""

    kind = "libvirt"

    def __init__(self, domain: str, connect=None, virsh="virsh", log=None):
        self.domain = domain
        self.connect = connect
        self.virsh = virsh
        self.log = log or (lambda m: None)
        self.original = self._run("dumpxml", "--inactive", domain)
        self.changed = False

    @property
    def name(self) -> str:
        return f"libvirt domain {self.domain}"

    def command(self, *args: str) -> list:
        argv = [self.virsh]
        if self.connect:
            argv += ["-c", self.connect]
        return argv + list(args)

    def _run(self, *args: str, timeout: float = 120) -> str:
        argv = self.command(*args)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise VmError(f"{' '.join(argv)}: {exc}") from None
        if proc.returncode != 0:
            raise VmError(f"{' '.join(argv)}: {proc.stderr.strip()}")
        return proc.stdout

    def disk(self, disk_id: str) -> DiskConfig:
        live = self._run("dumpxml", self.domain)
        disk = read_disk("libvirt", live, disk_id, "libvirt-xml")
        if not disk.path:
            for node in ET.fromstring(live).iter("disk"):
                target, source = node.find("target"), node.find("source")
                if target is not None and target.get("dev") == disk_id:
                    if source is not None:
                        disk.path = source.get("file") or source.get("dev")
        return disk

    def running_cache_mode(self, disk_id: str) -> str | None:
        return None

    def guest(self):
        return qga.Guest(qga.VirshChannel(self.domain, self.connect, self.virsh))

    @property
    def state_name(self) -> str:
        return self.domain

    def state(self, disk_id: str) -> dict:
        return {"domain": self.domain, "connect": self.connect, "xml": self.original}

    def matches(self, doc: dict) -> bool:
        return doc.get("domain") == self.domain and doc.get("connect") == self.connect

    def apply_state(self, doc: dict) -> None:
        self.original = doc["xml"]
        self.changed = True

    def define_commands(self, xml_path: str) -> list:
        return [
            self.command("define", xml_path),
            self.command("shutdown", self.domain),
            self.command("start", self.domain),
        ]

    def change_commands(self, disk_id: str, mode: str) -> list:
        return [
            f"virsh define (the domain XML with <driver cache='{mode}'> on {disk_id})",
            f"virsh shutdown {self.domain}, then virsh start {self.domain}",
        ]

    def _define(self, xml_text: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as fh:
            fh.write(xml_text)
        try:
            self._run("define", fh.name)
        finally:
            os.unlink(fh.name)

    def _restart(self, timeout: float = 180) -> None:
        if self._run("domstate", self.domain).strip() != "shut off":
            self._run("shutdown", self.domain)
            deadline = time.monotonic() + timeout
            while self._run("domstate", self.domain).strip() != "shut off":
                if time.monotonic() > deadline:
                    self.log(f"{self.domain} did not shut down: virsh destroy")
                    self._run("destroy", self.domain)
                    break
                time.sleep(1)
        self._run("start", self.domain)

    def set_cache_mode(self, disk_id: str, mode: str, guest) -> None:
        current = self._run("dumpxml", "--inactive", self.domain)
        self._define(libvirt_with_cache(current, disk_id, mode))
        self.changed = True
        self._restart()

    def restore(self, guest) -> bool:
        if not self.changed:
            return False
        self._define(self.original)
        self._restart()
        self.changed = False
        return True


# --- Proxmox VE -------------------------------------------------------------------


def proxmox_with_cache(spec: str, mode: str) -> str:
    """A ``qm config`` disk value with ``cache=mode`` (the rest unchanged)."""
    if mode not in CACHE_MODES:
        raise VmError(f"unknown cache mode {mode!r}")
    parts = [p for p in spec.split(",") if not p.startswith("cache=")]
    return ",".join(parts + [f"cache={mode}"])


class ProxmoxVm:
    """A Proxmox VE VM: ``qm set`` changes the disk, ``qm`` restarts it."""

    kind = "proxmox"

    def __init__(
        self, vmid: str, qm="qm", storage_cfg="/etc/pve/storage.cfg", log=None
    ):
        self.vmid = str(vmid)
        self.qm = qm
        self.log = log or (lambda m: None)
        self.storage_cfg = storage_cfg
        self.original_config = self._run(self.qm, "config", self.vmid)
        self.changed = {}

    @property
    def name(self) -> str:
        return f"Proxmox VM {self.vmid}"

    def _run(self, *argv: str, timeout: float = 600) -> str:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise VmError(f"{' '.join(argv)}: {exc}") from None
        if proc.returncode != 0:
            raise VmError(f"{' '.join(argv)}: {proc.stderr.strip()}")
        return proc.stdout

    def spec(self, config: str, disk_id: str) -> str:
        for line in config.splitlines():
            if line.startswith(f"{disk_id}:"):
                return line.split(":", 1)[1].strip()
        raise VmError(f"no disk {disk_id} in `qm config {self.vmid}`")

    def disk(self, disk_id: str) -> DiskConfig:
        config = self._run(self.qm, "config", self.vmid)
        try:
            storage = open(self.storage_cfg).read()
        except OSError:
            storage = None
        disk = read_disk(
            "proxmox", config, disk_id, "proxmox-config", storage_cfg=storage
        )
        volume = self.spec(config, disk_id).split(",")[0]
        if not (disk.path or "").startswith("/"):
            disk.path = volume if volume.startswith("/") else None
        if disk.path is None:
            try:
                disk.path = (
                    self._run("pvesm", "path", volume, timeout=60).strip() or None
                )
            except VmError:
                disk.path = None
        return disk

    def running_cache_mode(self, disk_id: str) -> str | None:
        return None

    def guest(self):
        return qga.QmGuest(self.vmid, self.qm)

    @property
    def state_name(self) -> str:
        return self.vmid

    def state(self, disk_id: str) -> dict:
        return {"vmid": self.vmid, "config": self.original_config}

    def matches(self, doc: dict) -> bool:
        return doc.get("vmid") == self.vmid

    def apply_state(self, doc: dict) -> None:
        self.original_config = doc["config"]
        self.changed = {doc["disk"]: True}

    def set_command(self, disk_id: str, spec: str) -> list:
        return [self.qm, "set", self.vmid, f"--{disk_id}", spec]

    def restart_commands(self) -> list:
        return [
            [self.qm, "shutdown", self.vmid, "--timeout", "180", "--forceStop", "1"],
            [self.qm, "start", self.vmid],
        ]

    def change_commands(self, disk_id: str, mode: str) -> list:
        spec = proxmox_with_cache(self.spec(self.original_config, disk_id), mode)
        return [shlex.join(self.set_command(disk_id, spec))] + [
            shlex.join(c) for c in self.restart_commands()
        ]

    def set_cache_mode(self, disk_id: str, mode: str, guest) -> None:
        spec = proxmox_with_cache(self.spec(self.original_config, disk_id), mode)
        self.changed[disk_id] = True
        self._run(*self.set_command(disk_id, spec))
        for argv in self.restart_commands():
            self._run(*argv)

    def restore(self, guest) -> bool:
        if not self.changed:
            return False
        for disk_id in list(self.changed):
            original = self.spec(self.original_config, disk_id)
            self._run(*self.set_command(disk_id, original))
            del self.changed[disk_id]
        for argv in self.restart_commands():
            self._run(*argv)
        return True


def open_vm(args, log):
    if args.qemu_pid:
        return QemuVm(args.qemu_pid, args.qmp, args.qga_socket, log=log)
    if args.libvirt:
        return LibvirtVm(args.libvirt, args.connect, log=log)
    if args.proxmox:
        return ProxmoxVm(args.proxmox, log=log)
    raise VmError("name the VM: --proxmox VMID, --libvirt DOMAIN or --qemu-pid PID")


# --- the original configuration, saved while a sweep changes it ----------------


def state_dir(args) -> str:
    return (
        getattr(args, "state_dir", None)
        or os.environ.get("BENCHDB_AGENT_STATE_DIR")
        or DEFAULT_STATE_DIR
    )


def _state_files(directory: str, kind: str) -> list:
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if name.startswith(f"vm-restore-{kind}-") and name.endswith(".json"):
            path = os.path.join(directory, name)
            try:
                with open(path) as fh:
                    found.append((path, json.load(fh)))
            except (OSError, ValueError) as exc:
                raise VmError(
                    f"{path}: unreadable saved configuration: {exc}"
                ) from None
    return found


def find_state(directory: str, machine) -> tuple:
    """(path, saved) of this VM's saved configuration, or (None, None)."""
    for path, doc in _state_files(directory, machine.kind):
        if machine.matches(doc):
            return path, doc
    return None, None


def save_state(directory: str, machine, disk_id: str) -> str:
    """Save the VM's original configuration (atomically, mode 0600: a QEMU's
    environment is in it) before a sweep changes anything."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", machine.state_name)
    path = os.path.join(directory, f"vm-restore-{machine.kind}-{name}.json")
    doc = dict(
        machine.state(disk_id),
        kind=machine.kind,
        vm=machine.name,
        disk=disk_id,
        saved_at=datetime.datetime.now(datetime.timezone.utc).isoformat(),
    )
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise VmError(
            f"cannot save the VM's original configuration in {directory}: {exc} "
            "(--state-dir DIR); nothing was changed"
        ) from None
    return path


def _vm_args(args) -> str:
    if args.qemu_pid:
        return f"--qemu-pid {args.qemu_pid}"
    if args.libvirt:
        connect = f" --connect {shlex.quote(args.connect)}" if args.connect else ""
        return f"--libvirt {shlex.quote(args.libvirt)}{connect}"
    return f"--proxmox {shlex.quote(str(args.proxmox))}"


def _restore_hint(args) -> str:
    extra = f" --state-dir {shlex.quote(args.state_dir)}" if args.state_dir else ""
    return f"benchdb-agent vm {_vm_args(args)} --restore{extra}"


def restore_saved(args, log) -> int:
    """``vm --restore``: put back the configuration a sweep saved, restart the
    VM with it, and remove the state file."""
    directory = state_dir(args)
    path = doc = None
    if args.qemu_pid and not _process_alive(args.qemu_pid):
        # The QEMU the sweep ran is gone (stopped mid-restart): start the
        # original again from what was saved.
        for p, d in _state_files(directory, "qemu"):
            if args.qemu_pid in d.get("pids", []):
                path, doc = p, d
                machine = QemuVm.from_state(d, log)
                break
        else:
            raise VmError(
                f"QEMU pid {args.qemu_pid} is not running and no saved "
                f"configuration in {directory} names it"
            )
    else:
        machine = open_vm(args, log)
        path, doc = find_state(directory, machine)
        if path is None:
            raise VmError(
                f"no saved configuration of {machine.name} in {directory}: "
                "nothing to restore"
            )
        machine.apply_state(doc)
    log(f"restoring {machine.name}, disk {doc.get('disk')}, from {path}")
    guest = None
    try:
        guest = machine.guest()
    except (VmError, qga.QgaError, OSError):
        guest = None
    changed = machine.restore(guest)
    os.unlink(path)
    log(
        f"restored: {machine.name} runs its original configuration"
        + (" (restarted)" if changed else " (it already did)")
        + f"; removed {path}"
    )
    return 0


# --- where the host baseline runs ------------------------------------------------


def baseline_target(disk: DiskConfig, host_dir: str | None) -> tuple:
    """(directory, created) for the host baseline on the disk's storage.

    A file image: a new hidden folder next to it (same filesystem).  A block
    device or network volume: the user must name a scratch directory on the
    same volume group or pool (``--host-dir``); the VM's own volume is never
    written.
    """
    image = os.path.realpath(disk.path) if disk.path else None
    if host_dir:
        real = os.path.realpath(host_dir)
        if not os.path.isdir(real):
            raise VmError(f"--host-dir {host_dir} is not a directory")
        if image and os.path.exists(image):
            try:
                same = os.stat(real).st_dev == os.stat(os.path.dirname(image)).st_dev
            except OSError:
                same = True
            if not same and stat.S_ISREG(os.stat(image).st_mode):
                raise VmError(
                    f"--host-dir {host_dir} is not on the filesystem of the image "
                    f"{image}: the baseline would measure other storage"
                )
        return tempfile.mkdtemp(prefix=".benchdb-baseline-", dir=real), True
    if not image or not os.path.exists(image):
        raise VmError(
            f"the disk's storage is not a local file ({disk.path or 'network'}): "
            "name a scratch directory on the same storage with --host-dir"
        )
    mode = os.stat(image).st_mode
    if stat.S_ISBLK(mode):
        hint = _lvm_hint(image)
        raise VmError(
            f"the disk is the block device {disk.path}; its baseline must run on the "
            f"same volume group or pool, never on the VM's volume: {hint}, then "
            "pass --host-dir MOUNTPOINT"
        )
    if not stat.S_ISREG(mode):
        raise VmError(
            f"the disk's image {disk.path} is not a regular file: name a scratch "
            "directory on the same storage with --host-dir"
        )
    folder = os.path.dirname(image)
    return tempfile.mkdtemp(prefix=".benchdb-baseline-", dir=folder), True


def _lvm_hint(device: str) -> str:
    try:
        vg = subprocess.run(
            ["lvs", "--noheadings", "-o", "vg_name", device],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        vg = ""
    vg = vg or "VG"
    return (
        f"create a scratch volume with `lvcreate -L 8G -n benchdb-baseline {vg}`, "
        f"`mkfs.ext4 /dev/{vg}/benchdb-baseline` and mount it"
    )


# --- progress ----------------------------------------------------------------------


class Progress:
    """One status line: VM, mode, test, elapsed, estimated time left."""

    def __init__(self, vm_name: str, steps: int, stream=None):
        self.vm = vm_name
        self.steps = steps
        self.done = 0
        self.durations = []
        self.start = time.monotonic()
        self.step_start = self.start
        self.stream = stream or sys.stderr

    def begin(self, what: str) -> None:
        self.what = what
        self.step_start = time.monotonic()
        self.show("starting")

    def end(self) -> None:
        self.durations.append(time.monotonic() - self.step_start)
        self.done += 1

    def show(self, detail: str) -> None:
        elapsed = time.monotonic() - self.start
        text = (
            f"[{self.vm} | {self.what} ({self.done + 1}/{self.steps}) | {detail} | "
            f"elapsed {runner._clock(elapsed)}"
        )
        if self.durations:
            # The first step is the host baseline; a guest step costs more
            # (a restart and the guest's slower disk): guess twice that, plus
            # a boot, until one guest step has been timed.
            guests = self.durations[1:]
            per = sum(guests) / len(guests) if guests else 2 * self.durations[0] + 60
            left = per * (self.steps - self.done) - self.current()
            text += f" | about {runner._clock(max(left, 0))} left"
        self.stream.write(text + "]\n")
        self.stream.flush()

    def current(self) -> float:
        return time.monotonic() - self.step_start


# --- the guest run -----------------------------------------------------------------


def run_options(args) -> list:
    """The ``run`` options shared by the host baseline and the guest runs."""
    out = ["--profile", args.profile]
    for flag, value in (
        ("--repeats", args.repeats),
        ("--max-repeats", args.max_repeats),
        ("--runtime", args.runtime),
        ("--size", args.size),
        ("--ioping-count", args.ioping_count),
    ):
        if value is not None:
            out += [flag, str(value)]
    for test_id in args.test or []:
        out += ["--test", test_id]
    return out


def guest_run_argv(args, pyz: str, pair_id: str, tags: dict, out: str) -> list:
    argv = [args.guest_python, pyz, "run", *run_options(args)]
    argv += ["--role", "guest", "--pair", pair_id]
    if args.guest_device:
        argv += ["--device", args.guest_device, "--device-write-destroys-data"]
    else:
        argv += ["--target", args.guest_dir]
    for key in sorted(tags):
        argv += ["--tag", f"{key}={tags[key]}"]
    return argv + ["--out", out]


def fallback_command(args, pair_id: str, tags: dict) -> str:
    """What to run in the guest by hand when it has no guest agent."""
    argv = guest_run_argv(args, "benchdb-agent.pyz", pair_id, tags, "x")[:-2]
    for server in args.upload or []:
        argv += ["--upload", server]
    return shlex.join(argv)


def check_guest_starts(guest, args, pyz_bytes) -> str:
    """The agent copied into the guest starts there (its python, the whole
    agent): checked before the host is measured, so that a guest that cannot
    run it stops ``vm`` before anything is sent.  Returns its version line.

    Bounded by --guest-timeout, as the guest's run is: starting means
    compiling the agent's modules, minutes in a starved, emulated guest."""
    pyz = f"{GUEST_DIR}/benchdb-agent-{uuid.uuid4().hex[:8]}.pyz"
    argv = [args.guest_python, pyz, "--version"]
    try:
        guest.write_file(pyz, pyz_bytes)
        code, out, err = guest.run(argv, timeout=args.guest_timeout)
    finally:
        try:
            guest.run(["rm", "-f", pyz], timeout=60)
        except qga.QgaError:
            pass
    if code != 0:
        tail = " / ".join((err or out).strip().splitlines()[-3:])
        raise VmError(
            f"the agent does not start in the guest ({shlex.join(argv)}: exit "
            f"{code}: {tail}); nothing was measured or sent (--guest-python "
            "names the guest's python 3.8 or newer)"
        )
    return out.strip()


def run_in_guest(guest, args, pyz_bytes, pair_id, tags, progress) -> dict:
    """Copy the agent in, run the profile, bring the bundle back."""
    token = uuid.uuid4().hex[:8]
    pyz = f"{GUEST_DIR}/benchdb-agent-{token}.pyz"
    out = f"{GUEST_DIR}/benchdb-bundle-{token}.json"
    log = f"{GUEST_DIR}/benchdb-progress-{token}.log"
    beat = f"{GUEST_DIR}/benchdb-heartbeat-{token}"
    guest.write_file(pyz, pyz_bytes)
    guest.write_file(beat, b"")
    # The guest's run stops itself when this stops touching the heartbeat
    # (a `vm` killed with SIGKILL cannot stop it otherwise).
    argv = guest_run_argv(args, pyz, pair_id, tags, out) + ["--heartbeat", beat]
    # The agent's progress lines go to a file the host reads while it runs.
    wrapped = ["sh", "-c", 'exec "$@" 2>"$0"', log, *argv]
    last = {"at": 0.0}

    def on_poll():
        if time.monotonic() - last["at"] < 5:
            return
        last["at"] = time.monotonic()
        try:
            guest.write_file(beat, b"")
        except qga.QgaError:
            pass
        try:
            lines = guest.read_file(log).decode(errors="replace").splitlines()
        except qga.QgaError:
            return
        if lines:
            progress.show("guest: " + lines[-1].strip()[:100])

    try:
        code, _, err = guest.run(wrapped, timeout=args.guest_timeout, on_poll=on_poll)
        # 4: a partial run (some tests failed); its bundle says which.
        if code not in (0, EXIT_PARTIAL):
            try:
                err = guest.read_file(log).decode(errors="replace") or err
            except qga.QgaError:
                pass
            tail = " / ".join(err.strip().splitlines()[-3:])
            raise VmError(f"the agent in the guest failed (exit {code}): {tail}")
        doc = json.loads(guest.read_file(out))
        if doc.get("partial"):
            progress.show(f"guest run partial: {doc.get('stop_reason')}")
        if args.guest_device and code == 0:
            blank_again(guest, args)
    finally:
        try:
            guest.run(["rm", "-f", pyz, out, log, beat], timeout=60)
        except qga.QgaError:
            pass
    return doc


# Zero the first and the last MiB of the guest's test disk.
BLANK_SCRIPT = (
    "import os,sys\n"
    "f=os.open(sys.argv[1],os.O_WRONLY)\n"
    "n=os.lseek(f,0,os.SEEK_END)\n"
    "for o in sorted({0,max(0,n-(1<<20))}):\n"
    " os.lseek(f,o,os.SEEK_SET);os.write(f,bytes(min(1<<20,n)))\n"
    "os.fsync(f)\n"
)


def blank_again(guest, args) -> None:
    """Leave the guest's test disk blank, as the agent found it.

    Only after a run that succeeded: that run checked the device was blank
    before it wrote, so everything on it now is the benchmark's own data.
    Without this the next cache mode of a sweep (or the next run) would see
    a disk that holds data and, rightly, refuse it.
    """
    code, _, err = guest.run(
        [args.guest_python, "-c", BLANK_SCRIPT, args.guest_device], timeout=120
    )
    if code != 0:
        raise VmError(f"could not blank {args.guest_device} again: {err.strip()}")


# --- what the guest's I/O cost the host ---------------------------------------------

# Where libvirt and Proxmox keep a running VM's QEMU pid.
QEMU_PIDFILES = {
    "libvirt": "/run/libvirt/qemu/{}.pid",
    "proxmox": "/var/run/qemu-server/{}.pid",
}


def qemu_pid(vm):
    """The pid of the QEMU process running ``vm`` now, or None."""
    pid = getattr(vm, "pid", None)
    if pid:
        return int(pid)
    for attr, kind in (("domain", "libvirt"), ("vmid", "proxmox")):
        name = getattr(vm, attr, None)
        if name:
            try:
                with open(QEMU_PIDFILES[kind].format(name)) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                return None
    return None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _stat_ticks(path: str) -> tuple:
    """(utime, stime) in clock ticks from a /proc .../stat file."""
    fields = _read(path).rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def _ctxt(path: str) -> tuple:
    """(voluntary, nonvoluntary) context switches from a /proc .../status."""
    found = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            found[key] = int(value)
    return (
        found.get("voluntary_ctxt_switches", 0),
        found.get("nonvoluntary_ctxt_switches", 0),
    )


def host_cpu_ticks(proc: str = "/proc") -> tuple:
    """(busy, total) clock ticks of every host CPU since boot (/proc/stat;
    guest time is already inside user time, so it is not added again)."""
    values = [int(v) for v in _read(f"{proc}/stat").splitlines()[0].split()[1:9]]
    total = sum(values)  # user nice system idle iowait irq softirq steal
    return total - values[3] - values[4], total


def thread_kind(name: str) -> str:
    """QEMU's thread names: "IO iothread1" (an iothread), "CPU 0/KVM" or
    "CPU 0/TCG" (a vCPU), the main loop, "worker" (thread-pool aio) ..."""
    if name.startswith("IO ") or "iothread" in name.lower():
        return "iothread"
    if name.startswith("CPU ") and "/" in name:
        return "vcpu"
    return "other"


class HostCpuSampler(threading.Thread):
    """The CPU a QEMU process spends while a guest run lasts, read from /proc.

    ``begin()`` reads the process's and the host's counters, the thread then
    reads every QEMU thread's CPU time and context switches each
    ``interval`` seconds (aio=threads workers come and go), ``finish()``
    reads the counters again and returns the differences in seconds: the
    process's user and system time (exited threads included, as the kernel
    counts them), per thread name (iothreads named), the context switches,
    and the host's CPU utilisation over the same time.
    """

    def __init__(self, pid: int, interval: float = 0.5, proc: str = "/proc"):
        super().__init__(daemon=True)
        self.pid, self.interval, self.proc = pid, interval, proc
        self.stop = threading.Event()
        self.first, self.last, self.names = {}, {}, {}
        self.hz = os.sysconf("SC_CLK_TCK")

    def _threads(self) -> dict:
        out = {}
        base = f"{self.proc}/{self.pid}/task"
        for tid in os.listdir(base):
            try:
                ticks = _stat_ticks(f"{base}/{tid}/stat")
                switches = _ctxt(f"{base}/{tid}/status")
                name = _read(f"{base}/{tid}/comm").strip()
            except (OSError, ValueError, IndexError):
                continue  # the thread exited meanwhile
            out[tid] = ticks + switches
            self.names[tid] = name
        return out

    def _sample(self, first: bool = False) -> None:
        for tid, value in self._threads().items():
            if first:
                self.first[tid] = value
            else:
                # A thread born during the run: all its time is the run's.
                self.first.setdefault(tid, (0, 0, 0, 0))
            self.last[tid] = value

    def begin(self) -> "HostCpuSampler":
        self.started = time.monotonic()
        self.process0 = _stat_ticks(f"{self.proc}/{self.pid}/stat")
        self.host0 = host_cpu_ticks(self.proc)
        self._sample(first=True)
        self.start()
        return self

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self._sample()
            except OSError:
                return  # QEMU is gone

    def finish(self) -> dict:
        self.stop.set()
        self.join()
        self._sample()
        process = _stat_ticks(f"{self.proc}/{self.pid}/stat")
        busy, total = host_cpu_ticks(self.proc)
        seconds = time.monotonic() - self.started
        by_name = {}
        for tid, last in self.last.items():
            d = [last[i] - self.first[tid][i] for i in range(4)]
            entry = by_name.setdefault(
                self.names[tid],
                {
                    "name": self.names[tid],
                    "kind": thread_kind(self.names[tid]),
                    "threads": 0,
                    "user_s": 0.0,
                    "system_s": 0.0,
                    "voluntary_ctxt_switches": 0,
                    "nonvoluntary_ctxt_switches": 0,
                },
            )
            entry["threads"] += 1
            entry["user_s"] += d[0] / self.hz
            entry["system_s"] += d[1] / self.hz
            entry["voluntary_ctxt_switches"] += d[2]
            entry["nonvoluntary_ctxt_switches"] += d[3]
        threads = sorted(by_name.values(), key=lambda t: t["name"])
        host_total = (total - self.host0[1]) / self.hz
        host_busy = (busy - self.host0[0]) / self.hz
        return {
            "qemu_pid": self.pid,
            "seconds": round(seconds, 3),
            "clock_ticks_per_s": self.hz,
            "user_s": (process[0] - self.process0[0]) / self.hz,
            "system_s": (process[1] - self.process0[1]) / self.hz,
            "voluntary_ctxt_switches": sum(
                t["voluntary_ctxt_switches"] for t in threads
            ),
            "nonvoluntary_ctxt_switches": sum(
                t["nonvoluntary_ctxt_switches"] for t in threads
            ),
            "iothreads": [t["name"] for t in threads if t["kind"] == "iothread"],
            "threads": threads,
            "host_cpus": os.cpu_count(),
            "host_busy_s": host_busy,
            "host_total_s": host_total,
            "host_utilisation": host_busy / host_total if host_total > 0 else None,
        }


def sample_host_cpu(vm):
    """A started ``HostCpuSampler`` of ``vm``'s QEMU, or None where its pid
    or /proc cannot be read (the run then says it was not measured)."""
    pid = qemu_pid(vm)
    if not pid:
        return None
    try:
        return HostCpuSampler(pid).begin()
    except (OSError, ValueError, IndexError):
        return None


def record_host_cpu(doc: dict, sampler) -> None:
    """Put what the guest run cost the host in its bundle, or say why not."""
    if sampler is None:
        doc["warnings"].append(
            {
                "code": "host-cpu-unmeasured",
                "message": "the QEMU process's CPU time could not be read on "
                "the host: no host cost per I/O for this run",
            }
        )
        return
    doc["environment"]["host_cpu"] = sampler.finish()


# --- the command ----------------------------------------------------------------------


def _metric_mean(test: dict, profile: str):
    """The test's figure: the geometric mean of its repeats, as the run page
    and the end-of-run table show it (``stats.summarize``)."""
    known = {t["test_id"]: t for t in suite.tests_for(profile)}
    meta = known.get(test["test_id"])
    if not meta:
        return None, None
    values = runner.repeat_series(test).get(meta["metric"], [])
    return stats.summarize(values)["gmean"], meta["metric"]


def overhead_table(host_doc: dict, guest_docs: list, profile: str) -> str:
    """Per mode and test: host, guest, and the guest's change against the host."""
    host = {t["test_id"]: _metric_mean(t, profile) for t in host_doc["tests"]}
    rows = [("mode", "test", "host geomean", "guest geomean", "guest vs host")]
    for mode, doc in guest_docs:
        for test in doc["tests"]:
            value, metric = _metric_mean(test, profile)
            base = host.get(test["test_id"], (None, None))[0]
            change = "-"
            if value is not None and base:
                change = f"{(value / base - 1) * 100:+.1f}%"
                if metric and "lat" in metric:
                    change += " (latency)"
            rows.append(
                (
                    mode,
                    test["test_id"],
                    stats.human(base, metric),
                    stats.human(value, metric),
                    change,
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(row[i].ljust(widths[i]) for i in range(5)).rstrip() for row in rows
    ]
    return "\n".join([*lines, runner.STATISTIC_LEGEND])


def parse_modes(text: str | None) -> list:
    if not text:
        return []
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if modes == ["all"]:
        return list(CACHE_MODES)
    bad = [m for m in modes if m not in CACHE_MODES]
    if bad or len(set(modes)) != len(modes):
        raise VmError(
            f"--cache-modes: each of {', '.join(CACHE_MODES)} at most once "
            f"(or all), not {text!r}"
        )
    return modes


# --- the sweep's order --------------------------------------------------------------


def sweep_plan(modes: list, rounds: int, seed: int) -> list:
    """[(round, mode), ...]: every mode once per round, each round in a fresh
    random order from ``seed``.

    Randomized multiple interleaved trials (Abedi & Brecht, ICPE 2017): run
    back to back, all of one mode and then all of the next, a drift of the
    host (its page cache, a neighbour's load, an SSD's garbage collection)
    reads as a difference between modes; interleaved in random order it
    falls on every mode alike, and rounds let the comparison pair the modes
    round by round.
    """
    rng = random.Random(seed)
    plan = []
    for round_ in range(1, rounds + 1):
        order = list(modes)
        rng.shuffle(order)
        plan += [(round_, mode) for mode in order]
    return plan


def sweep_seed(args) -> int:
    """``--sweep-seed``, or a fresh one (printed, so an order can be repeated)."""
    seed = getattr(args, "sweep_seed", None)
    return random.SystemRandom().randrange(2**31) if seed is None else seed


def mark_sweep_run(doc: dict, round_: int, position: int) -> None:
    """Record a guest run's round and its place in the whole sweep (1-based)."""
    doc["sweep_round"] = round_
    doc["sweep_position"] = position


def _confirm(vm, disk: DiskConfig, modes: list, args, log) -> None:
    lines = [
        f"This sweep changes {vm.name}, disk {disk.id} "
        f"(now cache={disk.tags.get('cache_mode', 'unknown')}), once per mode: "
        + ", ".join(modes)
        + ". For each mode it will:"
    ]
    for command in vm.change_commands(disk.id, modes[0]):
        lines.append(f"  - {command}  (cache={modes[0]} shown)")
    lines.append("  - wait for the guest agent and run the benchmark in the guest")
    rounds = getattr(args, "rounds", SWEEP_ROUNDS)
    lines.append(
        f"  - {rounds} round(s), each mode once per round in a fresh random "
        f"order: {rounds * len(modes)} restarts"
    )
    lines.append(
        "At the end, on failure and on Ctrl-C it restores the original "
        "configuration and restarts the VM. The VM is down during each restart."
    )
    for line in lines:
        log(line)
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise VmError("refusing to restart the VM without confirmation: pass --yes")
    answer = input("Go ahead? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise VmError("cancelled; nothing was changed")


def host_disk_type(host_doc: dict) -> str | None:
    """The disk type the host baseline saw (its own disk's bus and rotational
    flag), which the guest cannot; None when the host is itself a VM."""
    if host_doc.get("virtual_host"):
        return None
    return detect.disk_type_of(host_doc["environment"].get("target") or {})


def _host_tags(disk: DiskConfig) -> dict:
    tags = dict(disk.tags)
    fs = host_filesystem(disk.path)
    if fs:
        tags["host_filesystem"] = fs
    return {k: v for k, v in tags.items() if bundle_mod.check_tag(k, v) is None}


def run(args, emit, log) -> int:
    """The ``vm`` command; ``emit(doc, path)`` writes/uploads one bundle."""
    if getattr(args, "restore", False):
        return restore_saved(args, log)
    modes = parse_modes(args.cache_modes)
    if not args.disk:
        raise VmError("name the disk: --disk ID")
    if not args.guest_dir and not args.guest_device:
        raise VmError("name the guest's target: --guest-dir DIR or --guest-device DEV")
    vm = open_vm(args, log)
    saved_dir = state_dir(args)
    if modes:
        path, _ = find_state(saved_dir, vm)
        if path:
            raise VmError(
                f"{path} holds the original configuration of {vm.name} from a "
                f"sweep that did not finish; restore it first: {_restore_hint(args)}"
            )
    disk = vm.disk(args.disk)
    tags = _host_tags(disk)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    pair_id = args.pair or f"vm-{stamp}-{uuid.uuid4().hex[:6]}"
    if args.pair and not bundle_mod.PAIR_RE.match(args.pair):
        raise VmError("--pair: 1-64 characters of A-Z a-z 0-9 . _ -")
    sweep_id = (f"sweep-{stamp}-{uuid.uuid4().hex[:6]}") if modes else None
    plan = [(None, None)]
    if modes:
        seed = sweep_seed(args)
        plan = sweep_plan(modes, getattr(args, "rounds", SWEEP_ROUNDS), seed)
        if len(plan) > MAX_SWEEP_RUNS:
            raise VmError(f"--rounds: at most {MAX_SWEEP_RUNS} runs in one sweep")
        log(
            "sweep order (--sweep-seed %d): %s"
            % (seed, ", ".join(f"r{r} {m}" for r, m in plan))
        )
    log(f"{vm.name}, disk {disk.id} ({disk.source}): {json.dumps(tags)}")
    guest = vm.guest()
    if guest is not None:
        try:
            guest.wait(args.agent_timeout if modes else min(args.agent_timeout, 30))
        except qga.QgaError as exc:
            log(f"no guest agent: {exc}")
            guest = None
    if guest is None and modes:
        raise VmError(
            "a cache-mode sweep needs the VM's guest agent (qemu-guest-agent "
            "running in the guest, and its channel in the VM's configuration)"
        )
    saved = None
    if modes:
        _confirm(vm, disk, modes, args, log)
    target, created = baseline_target(disk, args.host_dir)
    if modes:
        try:
            saved = save_state(saved_dir, vm, disk.id)
        except VmError:
            if created:
                shutil.rmtree(target, ignore_errors=True)
            raise
        log(f"original configuration saved in {saved}")
    out_dir = args.out_dir or "."
    os.makedirs(out_dir, exist_ok=True)
    steps = 1 + (len(plan) if modes else (1 if guest else 0))
    progress = Progress(vm.name, steps)
    previous = {}

    def _raise(signum, frame):
        raise runner.Stopped(runner.SIGNAL_NAMES.get(signum, f"signal {signum}"))

    # SIGINT too: started as a background job, Python inherits SIGINT
    # ignored and would never see Ctrl-C.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        previous[sig] = signal.signal(sig, _raise)
    guest_docs, code = [], 0
    try:
        pyz = zipapp_build.build_bytes()
        if guest is not None:
            log(f"in the guest: {check_guest_starts(guest, args, pyz)}")
        progress.begin("host baseline")
        progress.show(f"on {target}")
        host_doc = runner.run_suite(
            target,
            args.profile,
            role="host",
            pair_id=pair_id,
            tags={k: v for k, v in tags.items() if k in ("storage_backend",)},
            repeats=args.repeats,
            max_repeats=args.max_repeats,
            runtime=args.runtime,
            size=runner.parse_size(args.size) if args.size else None,
            only=args.test,
            ioping_count=args.ioping_count,
            progress_stream=_Prefixed(progress),
            # A host that is itself a VM (nested) is measured, marked
            # virtual_host, and never paired as bare metal.
            allow_virtual_host=True,
        )
        progress.end()
        _finish(host_doc, sweep_id, {"storage_backend": "host-config"}, vm, disk)
        if host_doc["tests"]:  # stopped before its first test: nothing to keep
            path = os.path.join(out_dir, f"{pair_id}-host.json")
            code = max(code, emit(host_doc, path))
        if host_doc.get("partial"):
            # Kept and sent, marked partial; no guest run without a baseline.
            reason = host_doc.get("stop_reason") or ""
            if reason.startswith("stopped by "):
                # A signal (Ctrl-C...): a stop, not a failure (exit 4).
                raise runner.Stopped(reason[len("stopped by ") :].split(":")[0])
            raise VmError(f"the host baseline stopped: {reason}")
        seen = host_disk_type(host_doc)
        if seen and "disk_type" not in tags:
            tags["disk_type"] = seen
        if guest is None:
            log("the VM has no reachable guest agent; run this inside the guest:")
            print(fallback_command(args, pair_id, tags))
            return code
        for position, (round_, mode) in enumerate(plan, 1):
            progress.begin(f"cache {mode}, round {round_}" if mode else "guest")
            if mode:
                progress.show(f"setting cache={mode} and restarting the VM")
                vm.set_cache_mode(disk.id, mode, guest)
                save_state(saved_dir, vm, disk.id)  # a QEMU's new pid
                guest.wait(args.agent_timeout)
                disk = vm.disk(args.disk)  # what the restarted VM really runs
                tags = _host_tags(disk)
                if seen:
                    tags.setdefault("disk_type", seen)
                if tags.get("cache_mode") != mode:
                    raise VmError(
                        f"asked for cache={mode}, but the VM runs "
                        f"cache={tags.get('cache_mode')}"
                    )
            running = vm.running_cache_mode(disk.id)
            guest_wce = check_running_mode(running, tags.get("cache_mode"))
            sampler = sample_host_cpu(vm)
            try:
                doc = run_in_guest(guest, args, pyz, pair_id, tags, progress)
            finally:
                if sampler is not None:
                    sampler.stop.set()
            record_host_cpu(doc, sampler)
            if guest_wce:
                doc["warnings"].append(
                    {"code": "guest-write-cache", "message": guest_wce}
                )
            sources = {k: "host-config" for k in tags}
            _finish(doc, sweep_id, sources, vm, disk, running)
            name = f"{pair_id}-guest-{mode or tags.get('cache_mode', 'x')}"
            label = tags.get("cache_mode", "?")
            if mode:
                mark_sweep_run(doc, round_, position)
                name, label = f"{name}-r{round_}", f"{label} r{round_}"
            code = max(code, emit(doc, os.path.join(out_dir, name + ".json")))
            guest_docs.append((label, doc))
            progress.end()
    finally:
        # No second Ctrl-C may cut the restore short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous.setdefault(sig, signal.getsignal(sig))
            signal.signal(sig, signal.SIG_IGN)
        try:
            if created:
                shutil.rmtree(target, ignore_errors=True)
            if modes:
                log(f"restoring the original configuration of {vm.name}")
                try:
                    if vm.restore(guest):
                        guest.wait(args.agent_timeout)
                    log(f"restored: {vm.name}, disk {disk.id} as before")
                    if saved:
                        os.unlink(saved)
                except (VmError, qga.QgaError, OSError) as exc:
                    log(f"COULD NOT RESTORE {vm.name}: {exc}")
                    if saved and os.path.exists(saved):
                        log(
                            f"the original configuration is in {saved}; "
                            f"retry with: {_restore_hint(args)}"
                        )
                    code = max(code, 1)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if guest_docs:
        print(overhead_table(host_doc, guest_docs, args.profile))
    if sweep_id and args.upload:
        for server in args.upload:
            log(f"the sweep as one comparison: {server.rstrip('/')}/sweeps/{sweep_id}/")
    return code


class _Prefixed:
    """The runner's progress lines, shown as the host baseline's detail."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def write(self, text: str) -> None:
        text = text.strip("\r\n").replace("\r\033[K", "")
        if text:
            self.progress.show("host: " + text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _finish(doc, sweep_id, sources, vm, disk, running=None) -> None:
    if sweep_id:
        doc["sweep_id"] = sweep_id
    doc["tag_sources"] = {k: v for k, v in sources.items() if k in doc["tags"]}
    host = {"vm": vm.name, "disk": disk.id, "read_from": disk.source}
    if disk.details:
        host["sources"] = disk.details
    if running:
        host["qmp_cache_mode"] = running
    doc["environment"]["vm_host"] = host
