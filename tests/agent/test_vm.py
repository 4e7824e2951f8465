"""benchdb-agent vm without a VM: command construction for QEMU, libvirt, Proxmox.

libvirtd cannot run here, so the libvirt steps run against real ``virsh``
with libvirt's built-in test driver (``test:///default``, no daemon): the
XML the agent writes is defined, dumped and restarted by virsh for real.
Proxmox's ``qm`` is not installed: a stand-in ``qm`` script records the
argument lists the agent passes and answers ``qm config`` like Proxmox.
The real QEMU flows (paired run, sweep, restore after a failure) are in
tests/guests/test_vm_command.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from benchdb_agent import cli, qga, vm

QEMU_ARGV = [
    "qemu-system-x86_64",
    "-qmp",
    "unix:qmp.sock,server=on,wait=off",
    "-chardev",
    "socket,path=qga.sock,server=on,wait=off,id=qga0",
    "-device",
    "virtio-serial-pci",
    "-device",
    "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
    "-drive",
    "file=/srv/vm/root.qcow2,format=qcow2,if=none,id=root,cache=none",
    "-drive",
    "file=/srv/my,,vm/bench.raw,format=raw,if=none,id=bench,aio=threads",
    "-device",
    "virtio-blk-pci,drive=bench",
]


def test_qemu_cache_change_touches_only_that_drive():
    new = vm.qemu_with_cache(QEMU_ARGV, "bench", "directsync")
    assert new[12] == (
        "file=/srv/my,,vm/bench.raw,format=raw,if=none,id=bench,aio=threads,"
        "cache=directsync"
    )
    assert [a for i, a in enumerate(new) if i != 12] == [
        a for i, a in enumerate(QEMU_ARGV) if i != 12
    ]
    again = vm.qemu_with_cache(new, "bench", "none")
    assert again[12].count("cache=") == 1 and again[12].endswith("cache=none")
    assert vm._drive_file(QEMU_ARGV, "bench") == "/srv/my,vm/bench.raw"


def test_qemu_refuses_unknown_drive_mode_and_blockdev():
    with pytest.raises(vm.VmError, match="id=nope"):
        vm.qemu_with_cache(QEMU_ARGV, "nope", "none")
    with pytest.raises(vm.VmError, match="unknown cache mode"):
        vm.qemu_with_cache(QEMU_ARGV, "bench", "fast")
    blockdev = ["qemu", "-blockdev", "driver=file,node-name=f,filename=x"]
    with pytest.raises(vm.VmError, match="-blockdev"):
        vm.qemu_with_cache(blockdev, "f", "none")


def test_sockets_are_found_in_the_command_line():
    assert qga.socket_from_cmdline(QEMU_ARGV) == "qga.sock"
    assert vm._qmp_socket(QEMU_ARGV) == "qmp.sock"
    assert qga.socket_from_cmdline(QEMU_ARGV[:7]) is None


def test_cache_modes_are_checked():
    assert vm.parse_modes("all") == list(vm.CACHE_MODES)
    assert vm.parse_modes("none, unsafe") == ["none", "unsafe"]
    for bad in ("none,none", "fast", "none,Writeback"):
        with pytest.raises(vm.VmError):
            vm.parse_modes(bad)


def test_the_vm_command_line_parses():
    args = cli.build_parser().parse_args(
        [
            "vm",
            "--libvirt",
            "web1",
            "--disk",
            "vdb",
            "--guest-dir",
            "/mnt/bench",
            "--cache-modes",
            "none,writeback",
            "--yes",
        ]
    )
    assert args.func is cli.cmd_vm and args.libvirt == "web1"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(
            ["vm", "--libvirt", "a", "--proxmox", "100", "--disk", "x"]
        )


def test_fallback_command_carries_tags_and_pair():
    args = cli.build_parser().parse_args(
        ["vm", "--qemu-pid", "1", "--disk", "bench", "--guest-dir", "/mnt/b c"]
    )
    args.upload = ["https://benchdb.example"]
    text = vm.fallback_command(args, "p-1", {"cache_mode": "none", "disk_bus": "ide"})
    assert text == (
        "python3 benchdb-agent.pyz run --profile quick --role guest --pair p-1 "
        "--target '/mnt/b c' --tag cache_mode=none --tag disk_bus=ide "
        "--upload https://benchdb.example"
    )


def test_baseline_goes_next_to_a_file_image_never_on_a_device(tmp_path):
    image = tmp_path / "disk.raw"
    image.write_bytes(b"\0" * 4096)
    disk = vm.DiskConfig("bench", {}, str(image), "qemu-cmdline")
    target, created = vm.baseline_target(disk, None)
    try:
        assert created and os.path.dirname(target) == str(tmp_path)
        assert os.path.basename(target).startswith(".benchdb-baseline-")
    finally:
        os.rmdir(target)
    device = vm.DiskConfig("bench", {}, "/dev/null", "qemu-cmdline")
    with pytest.raises(vm.VmError, match="--host-dir"):
        vm.baseline_target(device, None)
    remote = vm.DiskConfig("bench", {}, None, "proxmox-config")
    with pytest.raises(vm.VmError, match="--host-dir"):
        vm.baseline_target(remote, None)


# --- libvirt, against real virsh and libvirt's test driver ------------------------

VIRSH = shutil.which("virsh")
needs_virsh = pytest.mark.skipif(VIRSH is None, reason="virsh (libvirt-clients)")


def _virsh_batch(*commands: list) -> str:
    """Several virsh commands in one process: the test driver keeps its
    state only for the life of one connection."""
    script = " ; ".join(" ".join(c[3:]) for c in commands)
    proc = subprocess.run(
        [VIRSH, "-c", "test:///default", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_virsh
def test_libvirt_cache_change_is_defined_by_real_virsh(tmp_path):
    domain = vm.LibvirtVm("test", connect="test:///default")
    assert "<domain" in domain.original
    disk = domain.disk("vda")
    assert disk.path == "/guest/diskimage1"
    assert disk.tags["cache_mode"] == "writeback"  # libvirt leaves it to QEMU
    changed = vm.libvirt_with_cache(domain.original, "vda", "directsync")
    xml = tmp_path / "changed.xml"
    xml.write_text(changed)
    define, shutdown, start = domain.define_commands(str(xml))
    assert define[:3] == [
        VIRSH if VIRSH == "virsh" else "virsh",
        "-c",
        "test:///default",
    ]
    out = _virsh_batch(
        define,
        shutdown,
        start,
        domain.command("dumpxml", "--inactive", "test"),
        domain.command("domstate", "test"),
    )
    assert "cache='directsync'" in out
    assert "running" in out
    from benchdb_agent import hostconfig

    dumped = out[out.index("<domain") : out.index("</domain>") + len("</domain>")]
    disk = hostconfig.pick(hostconfig.for_libvirt_xml(dumped), "vda")
    assert disk.cache_mode == "directsync"


@needs_virsh
def test_libvirt_keeps_foreign_namespaces():
    xml = textwrap.dedent(
        """\
        <domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
          <name>ns</name><memory>1024</memory>
          <os><type>hvm</type></os>
          <devices><disk type='file' device='disk'><driver name='qemu' cache='none'/>
          <source file='/x.img'/><target dev='vdb' bus='virtio'/></disk></devices>
          <qemu:commandline><qemu:arg value='-no-hpet'/></qemu:commandline>
        </domain>"""
    )
    changed = vm.libvirt_with_cache(xml, "vdb", "unsafe")
    assert "<qemu:commandline>" in changed and 'cache="unsafe"' in changed


@needs_virsh
def test_guest_agent_commands_parse_in_real_virsh():
    channel = qga.VirshChannel("test", connect="test:///default")
    argv = channel.command("guest-exec", {"path": "python3", "arg": ["-V"]}, 30)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    # Parsed and sent to the driver, which has no guest agent (no usage error).
    assert proc.returncode == 1
    assert "not supported by the connection driver" in proc.stderr
    with pytest.raises(qga.QgaError, match="not supported"):
        qga.Guest(channel).ping()


# --- Proxmox, with a stand-in qm ----------------------------------------------------

FAKE_QM = """#!{python}
import json, os, sys
log = os.environ["FAKE_QM_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "config":
    print("boot: order=scsi0")
    print("scsihw: virtio-scsi-single")
    print("scsi0: local-lvm:vm-100-disk-0,iothread=1,size=32G")
    print("scsi1: local:100/vm-100-disk-1.qcow2,cache=writeback,size=8G")
elif sys.argv[1:3] == ["guest", "exec"]:
    print(json.dumps({{"pid": 42}}))
elif sys.argv[1:3] == ["guest", "exec-status"]:
    print(json.dumps({{"exited": 1, "exitcode": 0, "out-data": "hi"}}))
"""


@pytest.fixture
def fake_qm(tmp_path, monkeypatch):
    qm = tmp_path / "qm"
    qm.write_text(FAKE_QM.format(python=sys.executable))
    qm.chmod(0o755)
    log = tmp_path / "qm.log"
    monkeypatch.setenv("FAKE_QM_LOG", str(log))

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()]

    return str(qm), calls


STORAGE_CFG = """dir: local
\tpath /var/lib/vz
\tcontent images,iso

lvmthin: local-lvm
\tthinpool data
\tvgname pve
\tcontent images
"""


def test_proxmox_sweep_commands_and_restore(fake_qm, tmp_path):
    qm, calls = fake_qm
    storage = tmp_path / "storage.cfg"
    storage.write_text(STORAGE_CFG)
    pve = vm.ProxmoxVm("100", qm=qm, storage_cfg=str(storage))
    disk = pve.disk("scsi1")
    assert disk.tags["cache_mode"] == "writeback" and disk.tags["iothread"] == "no"
    assert disk.tags["image_format"] == "qcow2"
    thin = pve.disk("scsi0")
    assert thin.tags["cache_mode"] == "none"  # Proxmox's default
    assert thin.tags["storage_backend"] == "lvm-thin"
    # Without storage.cfg the reader does not guess: no tag, not a wrong one.
    blind = vm.ProxmoxVm("100", qm=qm, storage_cfg=str(tmp_path / "nope"))
    assert "cache_mode" not in blind.disk("scsi0").tags
    pve.set_cache_mode("scsi0", "unsafe", None)
    assert pve.restore(None) is True
    assert pve.restore(None) is False
    made = [c for c in calls() if c[0] != "config"]
    assert made == [
        [
            "set",
            "100",
            "--scsi0",
            "local-lvm:vm-100-disk-0,iothread=1,size=32G,cache=unsafe",
        ],
        ["shutdown", "100", "--timeout", "180", "--forceStop", "1"],
        ["start", "100"],
        ["set", "100", "--scsi0", "local-lvm:vm-100-disk-0,iothread=1,size=32G"],
        ["shutdown", "100", "--timeout", "180", "--forceStop", "1"],
        ["start", "100"],
    ]


def test_proxmox_guest_agent_through_qm(fake_qm):
    qm, calls = fake_qm
    guest = qga.QmGuest("100", qm=qm)
    assert guest.run(["python3", "-V"], timeout=30) == (0, "hi", "")
    guest.write_file("/tmp/a.pyz", b"zip")
    assert calls() == [
        ["guest", "exec", "100", "--synchronous", "0", "--", "python3", "-V"],
        ["guest", "exec-status", "100", "42"],
        [
            "guest",
            "exec",
            "100",
            "--synchronous",
            "0",
            "--pass-stdin",
            "1",
            "--",
            "python3",
            "-c",
            "import shutil,sys;"
            "shutil.copyfileobj(sys.stdin.buffer,open(sys.argv[1],sys.argv[2]))",
            "/tmp/a.pyz",
            "wb",
        ],
        ["guest", "exec-status", "100", "42"],
    ]


def test_query_block_is_checked_on_the_host_side_only():
    assert vm.check_running_mode("none", "none") is None
    assert vm.check_running_mode(None, "none") is None
    # The guest may switch its write cache: a warning, not an error.
    assert "write cache off" in vm.check_running_mode("directsync", "none")
    with pytest.raises(vm.VmError, match="query-block says cache=writeback"):
        vm.check_running_mode("writeback", "none")
    with pytest.raises(vm.VmError):
        vm.check_running_mode("unsafe", "writeback")


class _FakeVm:
    name = "QEMU pid 1"

    def change_commands(self, disk_id, mode):
        return [f"restart with cache={mode}"]


def test_a_sweep_asks_first_and_says_what_changes(monkeypatch):
    lines = []
    disk = vm.DiskConfig("bench", {"cache_mode": "writeback"}, None, "qemu-cmdline")
    args = cli.build_parser().parse_args(
        ["vm", "--qemu-pid", "1", "--disk", "bench", "--guest-dir", "/mnt"]
    )
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    with pytest.raises(vm.VmError, match="--yes"):
        vm._confirm(_FakeVm(), disk, ["none", "unsafe"], args, lines.append)
    text = "\n".join(lines)
    assert "disk bench (now cache=writeback)" in text
    assert "restart with cache=none" in text and "restores" in text
    args.yes = True
    vm._confirm(_FakeVm(), disk, ["none"], args, lines.append)


class _SweepVm:
    """Stands in for a hypervisor that cannot run here: records changes."""

    name = "fake VM"
    kind = "fake"
    state_name = "1"

    def state(self, disk_id):
        return {"mode": self.mode}

    def matches(self, doc):
        return True

    def __init__(self, image):
        self.mode = "writeback"
        self.calls = []
        self.image = str(image)

    def disk(self, disk_id):
        tags = {"cache_mode": self.mode, "disk_bus": "virtio-blk"}
        return vm.DiskConfig(disk_id, tags, self.image, "qemu-cmdline")

    def guest(self):
        return _FailingGuest(self)

    def change_commands(self, disk_id, mode):
        return [f"set {mode}"]

    def set_cache_mode(self, disk_id, mode, guest):
        self.calls.append(("set", mode))
        self.mode = mode

    def running_cache_mode(self, disk_id):
        return self.mode

    def restore(self, guest):
        self.calls.append(("restore", self.mode))
        self.mode = "writeback"
        return True


class _FailingGuest:
    def __init__(self, machine):
        self.machine = machine

    def wait(self, timeout):
        return 0.0

    def close(self):
        pass

    def write_file(self, path, data):
        pass

    def run(self, argv, timeout, on_poll=None):
        if self.machine.mode == "unsafe":
            raise qga.QgaError("the guest agent went away")  # the injected failure
        return 0, "", ""

    def read_file(self, path):
        doc = {"role": "guest", "tags": {}, "environment": {}, "warnings": []}
        return json.dumps({**doc, "tests": []}).encode()


def test_a_failure_in_the_middle_of_a_sweep_restores_and_keeps_the_baseline(
    tmp_path, monkeypatch
):
    """Control flow only (the real QEMU sweep and Ctrl-C are in tests/guests):
    the guest fails in the second mode, the VM is restored once, the error
    is reported, the host baseline (real fio, next to the image) is kept."""
    image = tmp_path / "disks" / "vm.raw"
    image.parent.mkdir()
    image.write_bytes(b"\0" * 4096)
    machine = _SweepVm(image)
    monkeypatch.setattr(vm, "open_vm", lambda args, log: machine)
    args = cli.build_parser().parse_args(
        [
            "vm",
            "--qemu-pid",
            "1",
            "--disk",
            "bench",
            "--guest-dir",
            "/mnt",
            "--cache-modes",
            "none,unsafe",
            # One round whose random order is none, then unsafe (seed 0).
            "--rounds",
            "1",
            "--sweep-seed",
            "0",
            "--yes",
            "--state-dir",
            str(tmp_path / "state"),
            "--size",
            "8M",
            "--runtime",
            "1",
            "--repeats",
            "1",
            "--max-repeats",
            "1",
            "--test",
            "fio-rand-read-4k-q32t1",
        ]
    )
    emitted, lines = [], []

    def emit(doc, path):
        emitted.append((doc["role"], doc.get("sweep_id"), doc["tag_sources"]))
        return 0

    assert [m for _r, m in vm.sweep_plan(["none", "unsafe"], 1, 0)] == [
        "none",
        "unsafe",
    ]
    with pytest.raises(qga.QgaError, match="went away"):
        vm.run(args, emit, lines.append)
    assert machine.calls == [("set", "none"), ("set", "unsafe"), ("restore", "unsafe")]
    assert machine.mode == "writeback"
    assert [e[0] for e in emitted] == ["host", "guest"]
    assert emitted[0][1].startswith("sweep-") and emitted[1][1] == emitted[0][1]
    assert emitted[1][2] == {}  # the guest's bundle had no tags to mark
    assert os.listdir(image.parent) == ["vm.raw"]  # the baseline folder is gone
    assert any("restored" in line for line in lines)
    saved = tmp_path / "state" / "vm-restore-fake-1.json"
    assert any(f"original configuration saved in {saved}" in x for x in lines)
    assert not saved.exists()  # removed after the restore


class _LocalGuest:
    """A guest agent that really runs what it is asked to, here: the agent
    copied "into the guest" is the file ``vm`` built, run by a real python."""

    def __init__(self, folder):
        self.folder = folder

    def wait(self, timeout):
        return 0.0

    def close(self):
        pass

    def write_file(self, path, data):
        (self.folder / os.path.basename(path)).write_bytes(data)

    def read_file(self, path):
        return (self.folder / os.path.basename(path)).read_bytes()

    def run(self, argv, timeout, on_poll=None):
        # The agent's files in the guest's GUEST_DIR live in this folder.
        argv = [
            str(self.folder / os.path.basename(a))
            if os.path.dirname(a) == vm.GUEST_DIR
            else a
            for a in argv
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr


class _LocalVm(_SweepVm):
    def __init__(self, image, guest_folder):
        super().__init__(image)
        self.guest_folder = guest_folder

    def guest(self):
        return _LocalGuest(self.guest_folder)


def _local_vm_args(tmp_path, *extra):
    guest_dir = tmp_path / "guest-target"
    guest_dir.mkdir()
    # The guest's python has no benchdb-agent installed: without site-packages
    # (-S) this one cannot fall back on the agent installed here either.
    python = tmp_path / "guest-python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    return cli.build_parser().parse_args(
        ["vm", "--qemu-pid", "1", "--disk", "bench", "--guest-dir", str(guest_dir)]
        + ["--guest-python", str(python), "--size", "8M", "--runtime", "1"]
        + ["--repeats", "1", "--max-repeats", "1", "--test", "dd-write-1m-fdatasync"]
        + list(extra)
    )


def _local_vm(tmp_path, monkeypatch):
    image = tmp_path / "disks" / "vm.raw"
    image.parent.mkdir()
    image.write_bytes(b"\0" * 4096)
    (tmp_path / "guest").mkdir()
    machine = _LocalVm(image, tmp_path / "guest")
    monkeypatch.setattr(vm, "open_vm", lambda args, log: machine)
    return machine


def test_the_guest_runs_the_whole_agent_vm_copies_in(tmp_path, monkeypatch):
    _local_vm(tmp_path, monkeypatch)
    emitted, lines = [], []

    def emit(doc, path):
        emitted.append(doc)
        return 0

    assert vm.run(_local_vm_args(tmp_path), emit, lines.append) == 0
    assert [d["role"] for d in emitted] == ["host", "guest"]
    assert emitted[1]["pair_id"] == emitted[0]["pair_id"]
    assert [t["test_id"] for t in emitted[1]["tests"]] == ["dd-write-1m-fdatasync"]
    assert any(line.startswith("in the guest: benchdb-agent ") for line in lines)
    assert os.listdir(tmp_path / "guest") == []  # the copied agent is removed


def test_nothing_is_measured_or_sent_when_the_agent_cannot_start_in_the_guest(
    tmp_path, monkeypatch
):
    """What an incomplete .pyz did (the builder found no files inside a zip):
    the guest failed with ModuleNotFoundError after the host was sent."""
    import io
    import zipfile

    from benchdb_agent import zipapp_build

    empty = io.BytesIO()
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("__main__.py", zipapp_build.MAIN)
    monkeypatch.setattr(zipapp_build, "build_bytes", lambda: empty.getvalue())
    _local_vm(tmp_path, monkeypatch)
    emitted = []
    with pytest.raises(vm.VmError, match="does not start in the guest") as err:
        vm.run(_local_vm_args(tmp_path), lambda d, p: emitted.append(d), print)
    assert "ModuleNotFoundError" in str(err.value)
    assert "nothing was measured or sent" in str(err.value)
    assert emitted == []
    assert os.listdir(tmp_path / "disks") == ["vm.raw"]  # no baseline folder


def test_a_sweep_is_refused_while_a_saved_configuration_waits(tmp_path, monkeypatch):
    image = tmp_path / "vm.raw"
    image.write_bytes(b"\0" * 4096)
    machine = _SweepVm(image)
    monkeypatch.setattr(vm, "open_vm", lambda args, log: machine)
    state = tmp_path / "state"
    saved = vm.save_state(str(state), machine, "bench")
    assert os.stat(saved).st_mode & 0o777 == 0o600
    assert json.loads(open(saved).read())["mode"] == "writeback"
    args = cli.build_parser().parse_args(
        ["vm", "--qemu-pid", "1", "--disk", "bench", "--guest-dir", "/mnt"]
        + ["--cache-modes", "none", "--yes", "--state-dir", str(state)]
    )
    with pytest.raises(vm.VmError, match="--restore") as err:
        vm.run(args, lambda doc, path: 0, [].append)
    assert saved in str(err.value)
    assert machine.calls == [] and os.path.exists(saved)


def test_proxmox_restore_after_a_killed_sweep(agent, fake_qm, tmp_path, monkeypatch):
    qm, calls = fake_qm
    monkeypatch.setenv("PATH", f"{os.path.dirname(qm)}:{os.environ['PATH']}")
    state = tmp_path / "state"
    pve = vm.ProxmoxVm("100", qm=qm)
    saved = vm.save_state(str(state), pve, "scsi1")
    assert saved.endswith("vm-restore-proxmox-100.json")
    pve.set_cache_mode("scsi1", "none", None)
    del pve  # the agent is killed: only the state file knows the original
    before = len(calls())
    proc = agent("vm", "--proxmox", "100", "--restore", "--state-dir", str(state))
    assert proc.returncode == 0, proc.stderr
    made = [c for c in calls()[before:] if c[0] != "config"]
    assert made == [
        [
            "set",
            "100",
            "--scsi1",
            "local:100/vm-100-disk-1.qcow2,cache=writeback,size=8G",  # verbatim
        ],
        ["shutdown", "100", "--timeout", "180", "--forceStop", "1"],
        ["start", "100"],
    ]
    assert not os.path.exists(saved)
    assert "restored: Proxmox VM 100" in proc.stderr
    # Nothing saved any more: said, not guessed.
    proc = agent("vm", "--proxmox", "100", "--restore", "--state-dir", str(state))
    assert proc.returncode == 1 and "nothing to restore" in proc.stderr


# --- a real (paused, never booted) QEMU: its command line is restored ---------------

QEMU = shutil.which("qemu-system-x86_64")


def _cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def _started(text):
    return int(re.findall(r"QEMU started again: pid (\d+)", text)[-1])


@pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64")
def test_qemu_restore_after_a_killed_sweep(agent, tmp_path):
    (tmp_path / "disk.raw").write_bytes(b"\0" * 2**20)
    argv = [
        QEMU,
        "-S",
        "-nodefaults",
        "-display",
        "none",
        "-qmp",
        "unix:qmp.sock,server=on,wait=off",
        "-drive",
        "file=disk.raw,format=raw,if=none,id=bench,cache=writeback",
    ]
    state = str(tmp_path / "state")
    first = subprocess.Popen(argv, cwd=tmp_path, start_new_session=True)
    pids = [first.pid]
    try:
        for _ in range(100):
            if (tmp_path / "qmp.sock").exists():
                break
            time.sleep(0.1)
        machine = vm.QemuVm(first.pid)
        saved = vm.save_state(state, machine, "bench")
        machine.set_cache_mode("bench", "none", None)
        pids.append(machine.pid)
        assert "cache=none" in _cmdline(machine.pid)[-1]
        first.wait(10)
        # The agent is killed here.  Its QEMU runs on, changed; a new sweep
        # is refused, --restore finds it by its command line and restores.
        again = vm.QemuVm(machine.pid)
        assert vm.find_state(state, again)[0] == saved
        main = ["vm", "--restore", "--state-dir", state, "--qemu-pid"]
        proc = agent(*main, str(machine.pid))
        assert proc.returncode == 0, proc.stderr
        restored = _started(proc.stderr)
        pids.append(restored)
        assert _cmdline(restored) == argv and not os.path.exists(saved)
        # Killed mid-restart: the QEMU is gone; its saved pid is enough.
        machine = vm.QemuVm(restored)
        vm.save_state(state, machine, "bench")
        machine.set_cache_mode("bench", "unsafe", None)
        pids.append(machine.pid)
        vm.save_state(state, machine, "bench")
        os.kill(machine.pid, signal.SIGKILL)
        machine.proc.wait(10)
        proc = agent(*main, str(machine.pid))
        assert proc.returncode == 0, proc.stderr
        last = _started(proc.stderr)
        pids.append(last)
        assert _cmdline(last) == argv
        assert os.listdir(state) == []
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
