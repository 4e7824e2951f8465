"""host-config against real QEMU processes: the cache rule, proved.

Each test starts paused QEMUs (``-S``, TCG, nothing boots) with small image
files, one disk per combination of cache mode x ``-drive``/``-blockdev`` x the
device's write-cache (unset/on/off), on virtio-blk, virtio-scsi and q35 AHCI.
It then asks the same process over QMP what it runs (its own small client
here, not the agent's) and compares that with ``benchdb-agent host-config
--qemu-pid PID`` and ``--qmp-socket``.

What QEMU reports: ``query-block`` ``inserted.cache.writeback`` is the drive's
(the device's write-cache); ``direct`` and ``no-flush`` there are the *root*
node's, so the test follows ``x-debug-query-block-graph`` file edges down to
the protocol node, whose flags decide host I/O, and takes them from
``query-named-block-nodes``.

The last test runs command lines qemu-server itself generated (its cfg2cmd
test data, -blockdev and -drive eras) with the images replaced by files here,
and checks that what QEMU reports is what host-config reads both from that
command line and from the Proxmox config it was generated from.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QEMU = shutil.which("qemu-system-x86_64")
QEMU_IMG = shutil.which("qemu-img")

pytestmark = pytest.mark.skipif(
    not (QEMU and QEMU_IMG), reason="qemu-system-x86_64 and qemu-img are needed"
)

MODES = {  # cache= -> (writeback, direct, no-flush), qemu-options.hx
    "writeback": (True, False, False),
    "none": (True, True, False),
    "writethrough": (False, False, False),
    "directsync": (False, True, False),
    "unsafe": (True, False, True),
}
WRITE_CACHE = (None, "on", "off")
FORMAT_DRIVERS = {"raw", "qcow2"}


def mode_of(writeback, direct, no_flush):
    if no_flush:
        return "unsafe"
    return next(m for m, f in MODES.items() if f == (writeback, direct, False))


class Qmp:
    def __init__(self, path):
        deadline = time.monotonic() + 20
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(str(path))
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.sock.settimeout(20)
        self.f = self.sock.makefile("rwb")
        assert "QMP" in json.loads(self.f.readline())
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        msg = {"execute": name, **({"arguments": args} if args else {})}
        self.f.write(json.dumps(msg).encode() + b"\n")
        self.f.flush()
        while True:
            reply = json.loads(self.f.readline())
            if "event" not in reply:
                assert "error" not in reply, reply
                return reply["return"]

    def close(self):
        self.f.close()
        self.sock.close()


def qmp_truth(sock):
    """id -> (mode QEMU runs, mode query-block alone says, format driver)."""
    q = Qmp(sock)
    try:
        blocks = q.cmd("query-block")
        named = {n["node-name"]: n for n in q.cmd("query-named-block-nodes")}
        graph = q.cmd("x-debug-query-block-graph")
    finally:
        q.close()
    names = {n["id"]: n["name"] for n in graph["nodes"]}
    ids = {n["name"]: n["id"] for n in graph["nodes"]}
    files = {e["parent"]: e["child"] for e in graph["edges"] if e["name"] == "file"}
    truth = {}
    for b in blocks:
        ins = b["inserted"]
        node, fmt = ids[ins["node-name"]], None
        while True:
            drv = named[names[node]]["drv"]
            if drv in FORMAT_DRIVERS and fmt is None:
                fmt = drv
            if node not in files:
                break
            node = files[node]
        leaf = named[names[node]]["cache"]
        wb = ins["cache"]["writeback"]
        runs = mode_of(wb, leaf["direct"], leaf["no-flush"])
        root = mode_of(wb, ins["cache"]["direct"], ins["cache"]["no-flush"])
        # no format node: the guest sees the protocol node's bytes, i.e. raw
        truth[b["device"] or ins["node-name"]] = (runs, root, fmt or "raw")
    return truth


def host_config(served_pyz, *args):
    """``host-config`` from this checkout and from the served .pyz (without
    site-packages, see tests/conftest.py): the same answer, by disk id."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"))
    answers = []
    for start in (
        [sys.executable, "-m", "benchdb_agent.cli"],
        [sys.executable, "-S", str(served_pyz)],
    ):
        proc = subprocess.run(
            [*start, "host-config", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        answers.append(json.loads(proc.stdout))
    assert answers[0] == answers[1]
    return {d["id"]: d for d in answers[0]["disks"]}


def image(tmp, name, fmt):
    path = tmp / f"{name}.{fmt}"
    subprocess.run(
        [QEMU_IMG, "create", "-q", "-f", fmt, str(path), "1M"], check=True, timeout=30
    )
    return path


def drive_disks(tmp, frontend):
    """-drive if=none disks: every cache mode x write-cache."""
    args, expect, n = [], {}, 0
    for mode, flags in MODES.items():
        for wc in WRITE_CACHE:
            n += 1
            did = f"d{n}"
            fmt = "qcow2" if n % 2 else "raw"
            path = image(tmp, did, fmt)
            args += [
                "-drive",
                f"file={path},format={fmt},if=none,id={did},cache={mode}",
            ]
            args += ["-device", frontend(did, n) + (f",write-cache={wc}" if wc else "")]
            wb = flags[0] if wc is None else wc == "on"
            expect[did] = (mode_of(wb, flags[1], flags[2]), fmt)
    return args, expect


def blockdev_disks(tmp, frontend):
    """-blockdev disks: every (direct, no-flush) x write-cache, in four layouts:
    flags on both nodes (libvirt), on the protocol node only (key=value),
    inherited by an inline child, and under a throttle node (Proxmox)."""
    args, expect, n = [], {}, 0
    layouts = ("both", "protocol-only", "inline", "throttle")
    for _mode, flags in MODES.items():
        for wc in WRITE_CACHE:
            n += 1
            name = f"b{n}"
            fmt = "qcow2" if n % 2 else "raw"
            path = image(tmp, name, fmt)
            direct, no_flush = flags[1], flags[2]
            cache = {"direct": direct, "no-flush": no_flush}
            layout = layouts[n % 4]
            proto = {"driver": "file", "filename": str(path), "aio": "threads"}
            if layout == "both":
                args += [
                    "-blockdev",
                    json.dumps({**proto, "node-name": f"p{n}", "cache": cache}),
                ]
                args += [
                    "-blockdev",
                    json.dumps(
                        {
                            "driver": fmt,
                            "file": f"p{n}",
                            "node-name": name,
                            "cache": cache,
                        }
                    ),
                ]
            elif layout == "protocol-only":
                onoff = {True: "on", False: "off"}
                args += [
                    "-blockdev",
                    f"driver=file,filename={path},node-name=p{n},"
                    f"cache.direct={onoff[direct]},cache.no-flush={onoff[no_flush]}",
                ]
                args += ["-blockdev", f"driver={fmt},file=p{n},node-name={name}"]
            elif layout == "inline":
                args += [
                    "-blockdev",
                    json.dumps(
                        {
                            "driver": fmt,
                            "node-name": name,
                            "cache": cache,
                            "file": proto,
                        }
                    ),
                ]
            else:
                args += ["-object", f"throttle-group,id=tg{n}"]
                args += [
                    "-blockdev",
                    json.dumps(
                        {
                            "driver": "throttle",
                            "throttle-group": f"tg{n}",
                            "node-name": name,
                            "file": {
                                "driver": fmt,
                                "cache": cache,
                                "file": {**proto, "cache": cache},
                            },
                        }
                    ),
                ]
            args += [
                "-device",
                frontend(name, n) + (f",write-cache={wc}" if wc else ""),
            ]
            wb = True if wc is None else wc == "on"  # auto is on for -blockdev
            expect[name] = (mode_of(wb, direct, no_flush), fmt)
    return args, expect


def start(tmp, name, machine, args):
    sock = tmp / f"{name}.qmp"
    proc = subprocess.Popen(
        [
            QEMU,
            "-S",
            "-nodefaults",
            "-display",
            "none",
            "-machine",
            machine,
            "-qmp",
            f"unix:{sock},server=on,wait=off",
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, sock


@pytest.fixture
def qemus():
    procs = []
    yield procs
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait(timeout=30)
        proc.stderr.close()


def virtio_blk(drive, n):
    return f"virtio-blk-pci,drive={drive},id=vd{n}"


def scsi_hd(drive, n):
    return f"scsi-hd,drive={drive},id=sd{n},bus=vs0.0,scsi-id={n % 16},lun=0"


@pytest.mark.parametrize("syntax", ["drive", "blockdev"])
def test_cache_rule_on_virtio_blk_and_virtio_scsi(tmp_path, qemus, syntax, served_pyz):
    build = drive_disks if syntax == "drive" else blockdev_disks
    (tmp_path / "v").mkdir()
    (tmp_path / "s").mkdir()
    vargs, vexpect = build(tmp_path / "v", virtio_blk)
    sargs, sexpect = build(tmp_path / "s", scsi_hd)
    runs = [
        ("vblk", "pc", vargs, vexpect, "virtio-blk"),
        (
            "vscsi",
            "pc",
            ["-device", "virtio-scsi-pci,id=vs0"] + sargs,
            sexpect,
            "virtio-scsi",
        ),
    ]
    started = []
    for name, machine, args, expect, bus in runs:
        proc, sock = start(tmp_path, name, machine, args)
        qemus.append(proc)
        started.append((proc, sock, expect, bus))
    for proc, sock, expect, bus in started:
        truth = qmp_truth(sock)
        assert set(truth) == set(expect), proc.stderr
        by_pid = host_config(served_pyz, "--qemu-pid", str(proc.pid))
        by_qmp = host_config(served_pyz, "--qmp-socket", str(sock))
        assert set(by_pid) == set(expect)
        for disk_id, (mode, fmt) in expect.items():
            runs_mode, _root, qfmt = truth[disk_id]
            assert runs_mode == mode, (disk_id, truth[disk_id])  # our table is QEMU's
            got = by_pid[disk_id]
            assert got["tags"]["cache_mode"] == runs_mode, (disk_id, got)
            assert got["tags"]["image_format"] == qfmt == fmt
            assert got["tags"]["disk_bus"] == bus
            assert got["tags"]["virtualization"] == "qemu-tcg"  # no KVM fd: TCG
            assert got["sources"]["cache_mode"]
            q = by_qmp[disk_id]
            assert q["tags"]["cache_mode"] == runs_mode, (disk_id, q)
            assert q["tags"]["disk_bus"] == bus
            assert q["tags"]["image_format"] == fmt
            assert q["tags"]["virtualization"] == "qemu-tcg"
    if syntax == "blockdev":
        # query-block alone reports the root node: under a throttle node or a
        # format node opened without flags it says writeback for an O_DIRECT disk.
        truth = qmp_truth(started[0][1])
        assert any(runs != root for runs, root, _ in truth.values())


def test_cache_rule_on_q35_ahci_and_legacy_drives(tmp_path, qemus, served_pyz):
    args, expect = [], {}
    for n, (mode, wc) in enumerate(
        [
            ("none", "off"),
            ("writeback", None),
            ("directsync", "on"),
            ("unsafe", None),
            ("writethrough", "on"),
        ]
    ):
        path = image(tmp_path, f"a{n}", "raw")
        args += ["-drive", f"file={path},format=raw,if=none,id=a{n},cache={mode}"]
        args += [
            "-device",
            f"ide-hd,drive=a{n},bus=ide.{n}" + (f",write-cache={wc}" if wc else ""),
        ]
        flags = MODES[mode]
        wb = flags[0] if wc is None else wc == "on"
        expect[f"a{n}"] = (mode_of(wb, flags[1], flags[2]), "sata")
    legacy = image(tmp_path, "legacy", "qcow2")
    args += ["-drive", f"file={legacy},format=qcow2,if=virtio,cache=directsync"]
    expect["virtio0"] = ("directsync", "virtio-blk")
    usb = image(tmp_path, "usb", "raw")
    args += ["-device", "piix3-usb-uhci,id=usb"]
    args += ["-drive", f"file={usb},format=raw,if=none,id=u0,cache=none"]
    args += ["-device", "usb-storage,drive=u0,write-cache=off"]
    expect["u0"] = ("directsync", "usb")  # applied with -drive (not -blockdev)
    single = image(tmp_path, "single", "raw")
    args += [
        "-drive",
        f"file={single},format=raw,if=none,id=s0,cache=writeback,"
        "cache.writeback=off,cache.direct=on",
        "-device",
        "virtio-blk-pci,drive=s0",
    ]
    expect["s0"] = ("directsync", "virtio-blk")  # the single flags win
    node = image(tmp_path, "node", "qcow2")
    args += [
        "-blockdev",
        f"driver=file,filename={node},node-name=np,cache.direct=on",
        "-blockdev",
        "driver=qcow2,file=np,node-name=nf",
        "-device",
        "ide-hd,drive=nf,bus=ide.5,write-cache=off",
    ]
    expect["nf"] = ("directsync", "sata")
    proc, sock = start(tmp_path, "q35", "q35", args)
    qemus.append(proc)
    truth = qmp_truth(sock)
    by_pid = host_config(served_pyz, "--qemu-pid", str(proc.pid))
    by_qmp = host_config(served_pyz, "--qmp-socket", str(sock))
    assert set(truth) == set(expect) == set(by_pid)
    for disk_id, (mode, bus) in expect.items():
        assert truth[disk_id][0] == mode
        assert by_pid[disk_id]["tags"]["cache_mode"] == mode
        assert by_pid[disk_id]["tags"]["disk_bus"] == bus
        assert by_qmp[disk_id]["tags"]["cache_mode"] == mode
        assert by_qmp[disk_id]["tags"]["disk_bus"] == bus


# -- Proxmox's own generated command lines, run for real -------------------------

PVE = REPO / "tests" / "samples" / "hostconfig" / "proxmox"
KEEP_DEVICES = (
    "piix3-usb-uhci",
    "usb-storage",
    "scsi-block",
    "scsi-hd",
    "scsi-cd",
    "ide-hd",
    "virtio-blk-pci",
    "lsi",
    "virtio-scsi-pci",
    "megasas",
    "pvscsi",
    "ahci",
)


def runnable(argv, tmp):
    """qemu-server's command line with its images replaced by files in tmp:
    only the disks, their controllers, throttle groups and iothreads; network
    storage (rbd, iscsi) left out; host devices become files (the cache flags
    and aio stay as generated)."""
    from benchdb_agent.hostconfig import qemu

    out, kept, n = [], set(), [0]
    fmt_of = {}  # protocol node-name -> the format of the node above it
    for opt, val in zip(argv, argv[1:], strict=False):
        if opt == "-blockdev" and val.startswith("{"):
            node = json.loads(val)
            if node.get("driver") in ("qcow2", "raw") and isinstance(
                node.get("file"), str
            ):
                fmt_of[node["file"]] = node["driver"]

    def new_image(fmt):
        n[0] += 1
        return str(image(tmp, f"pve{n[0]}", fmt))

    def rewrite(node, fmt=None):
        if not isinstance(node, dict):
            return True
        driver = node.get("driver")
        if driver in ("rbd", "iscsi", "nbd", "host_cdrom", "nvme"):
            return False
        if driver in ("qcow2", "raw"):
            fmt = driver
        if driver in ("file", "host_device"):
            node["driver"] = "file"
            node["filename"] = new_image(fmt or "raw")
            return True
        return rewrite(node.get("file"), fmt)

    i = 1
    while i < len(argv):
        opt, val = argv[i], argv[i + 1] if i + 1 < len(argv) else ""
        if opt == "-blockdev":
            node = json.loads(val)
            fmt = fmt_of.get(node.get("node-name"))
            if rewrite(node, fmt) and node.get("node-name"):
                out += ["-blockdev", json.dumps(node)]
                kept.add(node["node-name"])
            i += 2
        elif opt == "-drive":
            opts = qemu.opts_dict(val)
            path = opts.get("file", "")
            if path.startswith("/") and opts.get("if") == "none":
                opts["file"] = new_image(opts.get("format", "raw"))
                out += ["-drive", ",".join(f"{k}={v}" for k, v in opts.items())]
                kept.add(opts["id"])
            i += 2
        elif opt == "-object" and ("throttle-group" in val or "iothread" in val):
            out += [opt, val]
            i += 2
        elif opt == "-device":
            opts = qemu.device_opts(val)
            driver = opts.get("driver")
            if driver in KEEP_DEVICES and opts.get("drive", "") in kept | {""}:
                if not driver.startswith(("scsi-", "ide-")):
                    opts.pop("bus", None)  # PCI slots: let QEMU place them
                    opts.pop("port", None)
                opts.pop("addr", None)
                # QEMU 9.0+ only, and it does not touch the cache flags
                opts.pop("iothread-vq-mapping", None)
                opts.pop("multifunction", None)
                opts.pop("bootindex", None)
                rest = ",".join(f"{k}={v}" for k, v in opts.items() if k != "driver")
                out += ["-device", f"{driver},{rest}"]
            i += 2
        elif opt.startswith("-") and not val.startswith("-"):
            i += 2
        else:
            i += 1
    return out


PVE_LIVE = [
    ("blockdev", "aio.conf"),
    ("blockdev", "simple-btrfs.conf"),
    ("blockdev", "simple-lvm.conf"),
    ("blockdev", "scsihw-virtio-scsi-single.conf"),
    ("blockdev", "simple-virtio-blk.conf"),
    ("drive", "aio.conf"),
    ("drive", "simple-btrfs.conf"),
    ("drive", "simple-lvm.conf"),
]


def test_proxmox_generated_command_lines_on_real_qemu(tmp_path, qemus):
    """qemu-server's cfg2cmd output, run by QEMU here: what QEMU reports for
    each disk is what host-config reads from the command line and from the
    Proxmox config it was generated from."""
    from benchdb_agent import hostconfig
    from benchdb_agent.hostconfig import qemu

    storage = (PVE / "storage.cfg").read_text()
    started = []
    for n, (era, name) in enumerate(PVE_LIVE):
        cmd_text = (PVE / era / f"{name}.cmd").read_text()
        argv = qemu.split_command(cmd_text)
        sub = tmp_path / f"{n}"
        sub.mkdir()
        args = runnable(argv, sub)
        proc, sock = start(sub, "pve", "pc", args)
        qemus.append(proc)
        started.append((era, name, cmd_text, proc, sock))
    compared = 0
    for era, name, cmd_text, proc, sock in started:
        truth = qmp_truth(sock)
        assert truth, (name, proc.stderr)
        from_cmd = {d.id: d for d in hostconfig.for_qemu_cmdline(cmd_text)}
        from_conf = {
            d.id: d
            for d in hostconfig.for_proxmox((PVE / era / name).read_text(), storage)
        }
        for disk_id, (mode, _root, fmt) in truth.items():
            assert from_cmd[disk_id].cache_mode == mode, (era, name, disk_id)
            assert from_cmd[disk_id].image_format == fmt, (era, name, disk_id)
            conf_disk = from_conf[disk_id[len("drive-") :]]
            assert conf_disk.cache_mode == mode, (era, name, disk_id)
            compared += 1
    assert compared >= 30


LIBVIRT = REPO / "tests" / "samples" / "hostconfig" / "libvirt"


def test_libvirt_generated_command_lines_on_real_qemu(tmp_path, qemus):
    """libvirt's qemuxmlconfdata .args (disk-cache: every cache mode on ide,
    scsi, virtio and usb; iothreads; throttle filter chains over qcow2 on
    block devices), run by QEMU here: QEMU's answer is what
    host-config reads from the .args and from the domain XML."""
    from benchdb_agent import hostconfig
    from benchdb_agent.hostconfig import qemu

    compared = 0
    for name in ("disk-cache", "iothreads-disk", "disk-sata-device", "throttlefilter"):
        args_text = (LIBVIRT / f"{name}.x86_64-latest.args").read_text()
        sub = tmp_path / name
        sub.mkdir()
        proc, sock = start(
            sub, "lv", "pc", runnable(qemu.split_command(args_text), sub)
        )
        qemus.append(proc)
        truth = qmp_truth(sock)
        from_cmd = hostconfig.for_qemu_cmdline(args_text)
        from_xml = hostconfig.for_libvirt_xml((LIBVIRT / f"{name}.xml").read_text())
        assert set(truth) == {d.id for d in from_cmd}, (name, proc.stderr)
        for cmd_disk, xml_disk in zip(from_cmd, from_xml, strict=True):
            mode, _root, fmt = truth[cmd_disk.id]
            assert cmd_disk.cache_mode == xml_disk.cache_mode == mode, cmd_disk.id
            assert cmd_disk.image_format == xml_disk.image_format == fmt
            compared += 1
    assert compared >= 9


def test_aio_native_without_o_direct_is_refused_as_the_note_says(tmp_path):
    from benchdb_agent import hostconfig

    path = image(tmp_path, "n", "raw")
    drive = f"file={path},format=raw,if=virtio,cache=writeback,aio=native"
    proc = subprocess.run(
        [QEMU, "-S", "-nodefaults", "-display", "none", "-drive", drive],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0 and "requires cache.direct=on" in proc.stderr
    (disk,) = hostconfig.for_qemu_cmdline(["qemu-system-x86_64", "-drive", drive])
    assert any("QEMU refuses" in note for note in disk.notes)
