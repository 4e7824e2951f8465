"""Real QEMU guests for benchdb's end-to-end proof.

Builds a small Linux guest from the host's Debian packages (the kernel of
``linux-image-amd64`` plus an uncompressed initramfs holding busybox, python3,
fio, ioping, coreutils ``dd`` and ``mkfs.ext4``), boots it with a second disk
in a chosen QEMU cache mode, bus and image format, runs benchdb-agent inside
against that disk and brings back what the guest produced.

Why an initramfs and not a root disk: it builds in seconds from files already
on the host, without network, loop devices or root, and boots under software
emulation (TCG) in about six seconds.  The build is cached outside the
repository (``~/.cache/benchdb/guest``, or ``$BENCHDB_GUEST_CACHE``), keyed by
everything that goes into it.

Data in and out of the guest travels on one small virtio-blk disk (serial
``BENCHDB-IO``) that holds a tar archive: the host writes the agent zipapp, the
guest driver (``guest_main.py``) and the job into it; the guest writes its
results back over it as another tar archive.  QEMU starts paused (``-S``) so
that ``benchdb-agent host-config`` can read the *running* QEMU's command line
(``/proc/PID/cmdline``) before the guest runs: the tags the guest's bundle
carries come from the real configuration, not from the harness's own idea of
it.

The accelerator is chosen explicitly: TCG by default.  ``/dev/kvm`` may exist
on hosts whose KVM cannot run an ordinary guest kernel (a PVM host kernel, for
one), so KVM is used only when asked for and only after a probe boot succeeds
(``BENCHDB_GUEST_ACCEL=auto`` or ``kvm``).

Command line: ``python -m tests.guests.harness build`` and
``python -m tests.guests.harness matrix --out DIR [--server URL]``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from tests.waits import log_tail

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Bump when the layout of the built initramfs changes: part of the cache key.
BUILD_VERSION = "2"

CACHE_MODES = ("none", "writethrough", "writeback", "directsync", "unsafe")
# The guest-visible write cache each QEMU cache mode implies: QEMU advertises
# a volatile cache unless every write is synced on the host (cache.writeback
# off, which is what writethrough and directsync mean).
EXPECTED_WRITE_CACHE = {
    "none": "write back",
    "writethrough": "write through",
    "writeback": "write back",
    "directsync": "write through",
    "unsafe": "write back",
}

# One vCPU with room for a second, under multi-threaded TCG.  QEMU 7.2
# (Debian 12) translates a guest that can only ever have one CPU without its
# memory barriers (and its locked instructions as plain ones): with one CPU
# nothing else would see the difference, but QEMU's own I/O thread reads the
# virtqueues at the same time.  The guest's "publish the request, then read
# whether QEMU wants a kick" and QEMU's "ask for kicks, then read the queue"
# can then both see the old value: the request never reaches QEMU, the guest
# blocks, QEMU idles (the same for a completion's interrupt).  QEMU 8.1
# always emits the barriers (commit c914d46d0a64, "tcg: Do not elide memory
# barriers for !CF_PARALLEL in system mode": "even with a single cpu we have
# i/o threads running in parallel, and lack of memory order can result in
# e.g. virtio queue entries being read incorrectly").  maxcpus=2 makes 7.2
# translate for parallel execution, barriers and atomics included.
SMP = ("-smp", "1,maxcpus=2")


# no_timer_check: on a busy host the emulated CPU can be starved for long
# enough that the kernel's boot-time check of the timer interrupt through the
# IO-APIC sees too few ticks and panics ("IO-APIC + timer doesn't work!",
# seen under load); the emulated timer is fine, only the check's timing is
# not.  Virtual machines' kernels are commonly booted with it.
KERNEL_ARGS = "console=ttyS0 panic=-1 quiet no_timer_check"


def accel_option(accel: str) -> str:
    """``-accel``'s value: TCG with a thread per vCPU (see SMP)."""
    return "tcg,thread=multi" if accel == "tcg" else accel


IO_SERIAL = "BENCHDB-IO"
BENCH_SERIAL = "BENCH"
IO_DISK_BYTES = 64 * 1024 * 1024
BENCH_DISK_BYTES = 1024 * 1024 * 1024
GUEST_MEMORY_MB = 512  # the minimum for an uncompressed ~130 MB initramfs

# Host binaries copied into the guest, with every library ``ldd`` names.
GUEST_BINARIES = (
    "/usr/bin/busybox",
    "/usr/bin/python3.11",
    "/usr/bin/fio",
    "/usr/bin/ioping",
    "/usr/bin/dd",
    "/usr/bin/stat",
    "/usr/bin/df",
    "/usr/sbin/mke2fs",
)
# The QEMU guest agent (Debian's qemu-guest-agent), for ``benchdb-agent vm``:
# the guest starts it on its virtio-serial port when booted with
# ``benchdb.qga`` on the kernel command line (see INIT_SCRIPT).
QGA_BINARY = "/usr/sbin/qemu-ga"
QGA_PORT_NAME = "org.qemu.guest_agent.0"
# Copied when the host has them: the agent uses them where present and must
# cope without them (minimal guests lack them too).
OPTIONAL_BINARIES = (
    QGA_BINARY,
    "/usr/bin/systemd-detect-virt",
    "/usr/bin/lsblk",
    "/usr/bin/findmnt",
    "/usr/sbin/blkid",
)
GUEST_MODULES = (
    "virtio_pci",
    "virtio_console",
    "virtio_blk",
    "virtio_scsi",
    "sd_mod",
    "ahci",
    "ata_piix",
    "crc32c_generic",
    "ext4",
)
PYTHON_STDLIB = "/usr/lib/python3.11"
PYTHON_STDLIB_SKIP = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "distutils",
    "__pycache__",
    "config-3.11-x86_64-linux-gnu",
}

# The bench disk on each bus: (machine type, -device arguments).  The SATA disk
# sits on an explicit AHCI controller; IDE needs the i440FX machine (PIIX).
BUSES = {
    "virtio-blk": (
        "q35",
        ["-device", f"virtio-blk-pci,drive=bench,serial={BENCH_SERIAL}"],
    ),
    "virtio-scsi": (
        "q35",
        [
            "-device",
            "virtio-scsi-pci,id=scsi0",
            "-device",
            f"scsi-hd,drive=bench,bus=scsi0.0,serial={BENCH_SERIAL}",
        ],
    ),
    "sata": (
        "q35",
        [
            "-device",
            "ahci,id=ahci0",
            "-device",
            f"ide-hd,drive=bench,bus=ahci0.0,serial={BENCH_SERIAL}",
        ],
    ),
    "ide": (
        "pc",
        ["-device", f"ide-hd,drive=bench,bus=ide.0,serial={BENCH_SERIAL}"],
    ),
}

INIT_SCRIPT = """#!/bin/sh
# benchdb test guest: mount the kernel filesystems, load the storage modules,
# unpack the job from the disk with serial {io_serial} and run it.
export PATH=/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
for m in $(cat /etc/benchdb-modules); do insmod "$m" 2>/dev/null; done
echo "benchdb-guest: modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
if grep -q benchdb.qga /proc/cmdline; then
    # A long-lived guest driven from the host through its guest agent: find
    # the virtio-serial port by name (no udev here to make the symlink).
    port=
    i=0
    while [ -z "$port" ] && [ $i -lt 200 ]; do
        for n in /sys/class/virtio-ports/*/name; do
            [ -e "$n" ] && [ "$(cat "$n")" = "{qga_port}" ] || continue
            port=/dev/$(basename $(dirname "$n"))
        done
        [ -z "$port" ] && sleep 0.1
        i=$((i + 1))
    done
    mkdir -p /dev/virtio-ports /run/qga
    ln -sf "$port" /dev/virtio-ports/{qga_port}
    echo "benchdb-guest: guest agent on $port at $(cut -d' ' -f1 /proc/uptime)s"
    while true; do
        qemu-ga -m virtio-serial -p "$port" -t /run/qga -f /run/qga/qemu-ga.pid
        echo "benchdb-guest: qemu-ga exited ($?), restarting"
        sleep 1
    done
fi
io=
i=0
while [ -z "$io" ] && [ $i -lt 200 ]; do
    for s in /sys/block/vd*/serial; do
        [ -e "$s" ] && [ "$(cat "$s")" = "{io_serial}" ] || continue
        io=$(basename $(dirname "$s"))
    done
    [ -z "$io" ] && sleep 0.1
    i=$((i + 1))
done
if [ -z "$io" ]; then
    echo "benchdb-guest: no disk with serial {io_serial}"
else
    mkdir -p /run/io
    tar -xf /dev/$io -C /run/io
    python3 /run/io/guest_main.py "$io"
    echo "benchdb-guest: exit $?"
fi
sync
poweroff -f
"""


class GuestError(RuntimeError):
    """The guest could not be built, booted or did not hand back its results."""


def cache_root() -> Path:
    """Where built guests and run scratch live (outside the repository)."""
    configured = os.environ.get("BENCHDB_GUEST_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "benchdb" / "guest"


def find_kernel() -> tuple[Path, str]:
    """The newest installed Debian kernel image and its version."""
    images = sorted(glob.glob("/boot/vmlinuz-*"))
    if not images:
        raise GuestError(
            "no kernel in /boot: install it with `apt-get install linux-image-amd64`"
        )
    image = Path(images[-1])
    version = image.name[len("vmlinuz-") :]
    if not Path("/lib/modules", version).is_dir():
        raise GuestError(f"no /lib/modules/{version} for {image}")
    return image, version


def _libraries(path: str) -> list[str]:
    """The shared libraries ``ldd`` resolves for a binary or module."""
    proc = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=60)
    libs = []
    for line in proc.stdout.splitlines():
        match = re.search(r"(/\S+) \(0x", line)
        if match:
            libs.append(match.group(1))
    return libs


def _copy_into(tree: Path, path: str) -> None:
    """Copy a host file to the same path in the tree (symlinks resolved)."""
    target = tree / path.lstrip("/")
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(path), target)


def _module_files(version: str) -> list[str]:
    """Module files to insmod, dependencies first, each once."""
    ordered = []
    for name in GUEST_MODULES:
        proc = subprocess.run(
            ["modprobe", "-S", version, "--show-depends", name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise GuestError(f"modprobe --show-depends {name}: {proc.stderr.strip()}")
        for line in proc.stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == "insmod" and parts[1] not in ordered:
                ordered.append(parts[1])
    return ordered


def _build_inputs() -> dict:
    """Everything the built initramfs depends on, for the cache key."""
    kernel, version = find_kernel()
    inputs = {"build": BUILD_VERSION, "kernel": str(kernel), "version": version}
    for path in (str(kernel), *GUEST_BINARIES):
        if not os.path.exists(path):
            raise GuestError(f"{path} is missing: see tests/guests/README.md")
        st = os.stat(path)
        inputs[path] = [st.st_size, int(st.st_mtime)]
    for path in OPTIONAL_BINARIES:
        if os.path.exists(path):
            st = os.stat(path)
            inputs[path] = [st.st_size, int(st.st_mtime)]
    inputs["modules"] = list(GUEST_MODULES)
    inputs["init"] = hashlib.sha256(INIT_SCRIPT.encode()).hexdigest()
    return inputs


def build_guest(force: bool = False) -> dict:
    """Build (or reuse) the guest kernel + initramfs; returns paths and timing.

    The result is a dict with ``kernel``, ``initramfs`` (paths), ``key``,
    ``cached`` (True when an earlier build was reused) and ``seconds``.
    """
    started = time.monotonic()
    inputs = _build_inputs()
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_root() / f"build-{key}"
    kernel_copy = folder / "vmlinuz"
    initramfs = folder / "initramfs.cpio"
    if not force and initramfs.exists() and kernel_copy.exists():
        return {
            "kernel": str(kernel_copy),
            "initramfs": str(initramfs),
            "key": key,
            "cached": True,
            "seconds": round(time.monotonic() - started, 3),
        }
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root()) as scratch:
        tree = Path(scratch) / "tree"
        _populate_tree(tree, inputs["version"])
        partial = folder / "initramfs.cpio.partial"
        _write_cpio(tree, partial)
        shutil.copy2(inputs["kernel"], kernel_copy)
        # Rename last: a half-written archive is never taken for a build.
        partial.replace(initramfs)
    (folder / "inputs.json").write_text(json.dumps(inputs, indent=1))
    return {
        "kernel": str(kernel_copy),
        "initramfs": str(initramfs),
        "key": key,
        "cached": False,
        "seconds": round(time.monotonic() - started, 3),
    }


def _populate_tree(tree: Path, version: str) -> None:
    """Lay out the guest's root filesystem (merged /usr, like Debian 12)."""
    for folder in ("usr/bin", "usr/sbin", "usr/lib", "usr/lib64"):
        (tree / folder).mkdir(parents=True, exist_ok=True)
    for link, target in (
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
    ):
        (tree / link).symlink_to(target)
    for folder in ("proc", "sys", "dev", "run", "tmp", "mnt", "etc", "root"):
        (tree / folder).mkdir(exist_ok=True)

    libraries = set()
    optional = [b for b in OPTIONAL_BINARIES if os.path.exists(b)]
    for binary in (*GUEST_BINARIES, *optional):
        _copy_into(tree, binary)
        libraries.update(_libraries(binary))
    dynload = Path(PYTHON_STDLIB, "lib-dynload")
    for module in dynload.glob("*.so"):
        libraries.update(_libraries(str(module)))
    for library in sorted(libraries):
        _copy_into(tree, library)

    shutil.copytree(
        PYTHON_STDLIB,
        tree / PYTHON_STDLIB.lstrip("/"),
        ignore=lambda folder, names: [n for n in names if n in PYTHON_STDLIB_SKIP],
        symlinks=True,
    )
    (tree / "usr/bin/python3").symlink_to("python3.11")
    (tree / "usr/sbin/mkfs.ext4").symlink_to("mke2fs")
    # Busybox provides everything else (sh, mount, insmod, tar, poweroff...);
    # the real tools copied above keep their own names.
    applets = subprocess.run(
        ["/usr/bin/busybox", "--list-full"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    for applet in applets:
        link = tree / "usr" / applet.replace("usr/", "", 1)
        if not link.exists() and not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to("/usr/bin/busybox")

    modules = _module_files(version)
    for module in modules:
        _copy_into(tree, module)
    (tree / "etc/benchdb-modules").write_text("\n".join(modules) + "\n")
    # qemu-ga's guest-shutdown runs /sbin/shutdown; busybox has none.
    shutdown = tree / "usr/sbin/shutdown"
    if shutdown.is_symlink() or shutdown.exists():
        shutdown.unlink()
    shutdown.write_text("#!/bin/sh\nsync\npoweroff -f\n")
    shutdown.chmod(0o755)
    for etc in ("/etc/mke2fs.conf", "/etc/os-release"):
        _copy_into(tree, etc)
    (tree / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (tree / "etc/group").write_text("root:x:0:\n")
    (tree / "etc/hostname").write_text("benchdb-guest\n")
    init = tree / "init"
    init.write_text(
        INIT_SCRIPT.replace("{io_serial}", IO_SERIAL).replace(
            "{qga_port}", QGA_PORT_NAME
        )
    )
    init.chmod(0o755)


def _write_cpio(tree: Path, target: Path) -> None:
    """Write the tree as an uncompressed newc cpio archive.

    Uncompressed on purpose: under TCG the guest boots about 3 s faster than
    with gzip, at the price of ~130 MB on disk.
    """
    names = []
    for folder, dirs, files in os.walk(tree):
        dirs.sort()
        rel = os.path.relpath(folder, tree)
        for name in sorted(dirs + files):
            names.append(os.path.join(rel, name) if rel != "." else name)
    with target.open("wb") as out:
        subprocess.run(
            ["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"],
            input="\n".join(names).encode() + b"\n",
            stdout=out,
            cwd=tree,
            check=True,
            timeout=300,
        )


# --- the agent -------------------------------------------------------------


def agent_zipapp(target: Path) -> Path:
    """Build benchdb-agent as a single-file zipapp at ``target``.

    Uses the agent's own builder, so the guest runs exactly the file the
    server offers for download.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "benchdb_agent.zipapp_build", str(target)],
        check=True,
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    return target


def agent_command(pyz: Path | str, *args: str) -> list[str]:
    """The argument list that runs the agent zipapp with a given python."""
    return ["python3", str(pyz), *args]


# --- accelerator --------------------------------------------------------------


def choose_accel(guest: dict, workdir: Path) -> str:
    """TCG unless KVM was asked for and a real probe boot works.

    ``/dev/kvm`` existing proves nothing: a PVM host kernel serves it but
    cannot run an ordinary guest kernel (the boot hangs in the decompressor).
    """
    wanted = os.environ.get("BENCHDB_GUEST_ACCEL", "tcg")
    if wanted == "tcg":
        return "tcg"
    if wanted not in ("auto", "kvm"):
        raise GuestError(f"BENCHDB_GUEST_ACCEL must be tcg, kvm or auto, not {wanted}")
    ok = os.path.exists("/dev/kvm") and _probe_kvm(guest, workdir)
    if ok:
        return "kvm"
    if wanted == "kvm":
        raise GuestError("KVM was asked for but a probe boot under KVM failed")
    return "tcg"


def _probe_kvm(guest: dict, workdir: Path) -> bool:
    """Boot the real guest under KVM with no job; True when it powers off."""
    try:
        result = boot_guest(
            guest,
            "writeback",
            "virtio-blk",
            "raw",
            workdir / "kvm-probe",
            commands=[],
            accel="kvm",
            timeout=60,
        )
    except GuestError:
        return False
    return result["qemu_rc"] == 0 and result["guest"] is not None


# --- booting ------------------------------------------------------------------


def qemu_command(
    guest: dict,
    cache_mode: str,
    bus: str,
    fmt: str,
    workdir: Path,
    accel: str = "tcg",
) -> list[str]:
    """The QEMU command line for one boot (bench disk on ``bus``)."""
    if cache_mode not in CACHE_MODES:
        raise GuestError(f"unknown cache mode {cache_mode}")
    if bus not in BUSES:
        raise GuestError(f"unknown bus {bus}; choose from {', '.join(BUSES)}")
    if fmt not in ("raw", "qcow2"):
        raise GuestError(f"unknown image format {fmt}")
    machine, bench_device = BUSES[bus]
    return [
        "qemu-system-x86_64",
        "-accel",
        accel_option(accel),
        "-m",
        str(GUEST_MEMORY_MB),
        *SMP,
        "-machine",
        machine,
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-S",
        "-qmp",
        f"unix:{workdir / 'qmp.sock'},server=on,wait=off",
        "-serial",
        f"file:{workdir / 'console.log'}",
        "-kernel",
        guest["kernel"],
        "-initrd",
        guest["initramfs"],
        "-append",
        KERNEL_ARGS,
        "-drive",
        f"file={workdir / 'io.raw'},format=raw,if=none,id=io,cache=writeback",
        "-device",
        f"virtio-blk-pci,drive=io,serial={IO_SERIAL}",
        "-drive",
        f"file={workdir / ('bench.' + fmt)},format={fmt},if=none,id=bench,"
        f"cache={cache_mode},aio=threads",
        *bench_device,
    ]


def _io_archive(files: dict) -> bytes:
    """A tar archive of ``{name: bytes}`` (the guest's input)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _qmp(path: Path, command: str, timeout: float = 30.0) -> dict:
    """Send one QMP command to a running QEMU and return its answer."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise GuestError(f"QEMU did not open its QMP socket {path}")
        time.sleep(0.05)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        while True:
            try:
                sock.connect(str(path))
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        reader = sock.makefile("rb")
        json.loads(reader.readline())  # greeting
        answer = None
        for message in ({"execute": "qmp_capabilities"}, {"execute": command}):
            sock.sendall(json.dumps(message).encode() + b"\n")
            while True:
                answer = json.loads(reader.readline())
                if "return" in answer or "error" in answer:
                    break
            if "error" in answer:
                raise GuestError(f"QMP {message['execute']}: {answer['error']}")
        return answer


def boot_guest(
    guest: dict,
    cache_mode: str,
    bus: str,
    fmt: str,
    workdir: Path,
    commands: list | None = None,
    agent_pyz: Path | None = None,
    before_start=None,
    accel: str = "tcg",
    timeout: float = 240.0,
) -> dict:
    """Boot the guest once and return what happened.

    ``commands`` are ``{"name", "argv", "timeout"}`` dicts the guest runs
    against the mounted bench disk (``{target}`` and ``{out}`` are replaced in
    argv; files the command writes to ``{out}`` come back).  ``before_start``
    is called as ``before_start(pid, argv)`` while QEMU is paused at start and
    may return a new command list: that is where ``host-config`` reads the
    running QEMU's configuration.

    Returns ``qemu_rc``, ``argv``, ``wall_s``, ``guest`` (the guest's
    result.json, or None), ``files`` (name -> bytes from the guest) and
    ``console`` (the serial log).
    """
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    bench = workdir / f"bench.{fmt}"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", fmt, str(bench), str(BENCH_DISK_BYTES)],
        check=True,
        timeout=120,
    )
    io_image = workdir / "io.raw"
    with io_image.open("wb") as handle:
        handle.truncate(IO_DISK_BYTES)
    argv = qemu_command(guest, cache_mode, bus, fmt, workdir, accel)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=workdir
    )
    try:
        commands = list(commands or [])
        if before_start is not None:
            commands = before_start(proc.pid, argv, commands)
        files = {
            "guest_main.py": (HERE / "guest_main.py").read_bytes(),
            "job.json": json.dumps(
                {"bench_serial": BENCH_SERIAL, "commands": commands}
            ).encode(),
        }
        if agent_pyz is not None:
            files["benchdb-agent.pyz"] = Path(agent_pyz).read_bytes()
        archive = _io_archive(files)
        if len(archive) > IO_DISK_BYTES:
            raise GuestError("the guest's input does not fit its disk")
        # Written in place, not replaced: QEMU already holds the file open,
        # and the guest has not read a byte of it yet (the CPU is stopped).
        with io_image.open("r+b") as handle:
            handle.write(archive)
        _qmp(workdir / "qmp.sock", "cont")
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=30)
            raise GuestError(
                f"guest {cache_mode}/{bus}/{fmt} did not power off within "
                f"{timeout:.0f} s; the last lines of its console:\n"
                + log_tail(workdir / "console.log")
            ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    wall = time.monotonic() - started
    console = (workdir / "console.log").read_text(errors="replace")
    files = _read_results(io_image)
    guest_result = json.loads(files["result.json"]) if "result.json" in files else None
    return {
        "cache_mode": cache_mode,
        "bus": bus,
        "format": fmt,
        "accel": accel,
        "argv": argv,
        "qemu_rc": proc.returncode,
        "qemu_output": output.decode(errors="replace"),
        "wall_s": round(wall, 3),
        "guest": guest_result,
        "files": files,
        "console": console,
        "workdir": str(workdir),
    }


def qga_vm_command(
    guest: dict, workdir: Path, cache_mode: str, accel: str = "tcg"
) -> list[str]:
    """A long-lived guest reachable through its guest agent (``benchdb.qga``).

    Like a VM a user runs: no job disk; qemu-ga on the virtio-serial port
    ``org.qemu.guest_agent.0`` (host side: ``qga.sock``); the bench disk
    (virtio-blk, drive id ``bench``, raw) in ``disks/``.  Two QMP sockets:
    ``qmp.sock`` for the agent under test, ``test-qmp.sock`` for the test's
    own ``query-block`` checks, so neither waits for the other.  Paths are
    relative to ``workdir``, QEMU's working directory, as in many hand-written
    command lines (the agent must restart it from the same directory).
    """
    if cache_mode not in CACHE_MODES:
        raise GuestError(f"unknown cache mode {cache_mode}")
    return [
        "qemu-system-x86_64",
        "-accel",
        accel_option(accel),
        "-m",
        str(GUEST_MEMORY_MB),
        *SMP,
        "-machine",
        "q35",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-qmp",
        "unix:qmp.sock,server=on,wait=off",
        "-qmp",
        "unix:test-qmp.sock,server=on,wait=off",
        "-serial",
        "file:console.log",
        "-kernel",
        guest["kernel"],
        "-initrd",
        guest["initramfs"],
        "-append",
        KERNEL_ARGS + " benchdb.qga",
        "-chardev",
        "socket,path=qga.sock,server=on,wait=off,id=qga0",
        "-device",
        "virtio-serial-pci",
        "-device",
        f"virtserialport,chardev=qga0,name={QGA_PORT_NAME}",
        "-drive",
        f"file=disks/bench.raw,format=raw,if=none,id=bench,cache={cache_mode},"
        "aio=threads",
        "-device",
        f"virtio-blk-pci,drive=bench,serial={BENCH_SERIAL}",
    ]


def start_qga_vm(
    guest: dict, workdir: Path, cache_mode: str = "writeback", accel: str = "tcg"
) -> subprocess.Popen:
    """Start the guest agent VM in ``workdir`` (a blank 1 GiB bench disk)."""
    if not os.path.exists(QGA_BINARY):
        raise GuestError(
            f"{QGA_BINARY} is missing: apt-get install qemu-guest-agent, then "
            "rebuild the guest"
        )
    workdir = Path(workdir)
    (workdir / "disks").mkdir(parents=True, exist_ok=True)
    bench = workdir / "disks" / "bench.raw"
    if not bench.exists():
        with bench.open("wb") as handle:
            handle.truncate(BENCH_DISK_BYTES)
    argv = qga_vm_command(guest, workdir, cache_mode, accel)
    log = (workdir / "qemu.log").open("ab")
    return subprocess.Popen(
        argv,
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def qmp(path: Path, command: str, arguments: dict | None = None, timeout=10.0):
    """One QMP command on a QMP socket; returns its ``return`` value."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        reader = sock.makefile("rb")
        json.loads(reader.readline())  # greeting
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        for msg in ({"execute": "qmp_capabilities"}, message):
            sock.sendall(json.dumps(msg).encode() + b"\n")
            while True:
                answer = json.loads(reader.readline())
                if "return" in answer or "error" in answer:
                    break
            if "error" in answer:
                raise GuestError(f"QMP {msg['execute']}: {answer['error']}")
        return answer["return"]


def cache_mode_of(block: dict) -> str | None:
    """The cache mode a ``query-block`` entry's cache flags mean (None for a
    combination no cache= mode gives, e.g. while the guest renegotiates its
    write cache)."""
    cache = block["inserted"]["cache"]
    flags = (cache["writeback"], cache["direct"], cache["no-flush"])
    return {
        (True, True, False): "none",
        (False, False, False): "writethrough",
        (True, False, False): "writeback",
        (False, True, False): "directsync",
        (True, False, True): "unsafe",
        (True, True, True): "unsafe",
    }.get(flags)


def _read_results(image: Path) -> dict:
    """The files of the tar archive the guest wrote over its io disk."""
    files = {}
    try:
        with tarfile.open(image, mode="r:") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    files[member.name] = tar.extractfile(member).read()
    except tarfile.TarError:
        return {}
    if "result.json" not in files:
        return {}  # still the host's input: the guest never wrote back
    return files


# --- command line -------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``build`` the guest, or ``boot`` it once and print the guest's facts."""
    parser = argparse.ArgumentParser(prog="python -m tests.guests.harness")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or reuse) the cached guest")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    boot = sub.add_parser("boot", help="boot once without the agent, print facts")
    boot.add_argument("--cache", default="none", choices=CACHE_MODES)
    boot.add_argument("--bus", default="virtio-blk", choices=sorted(BUSES))
    boot.add_argument("--format", default="raw", choices=("raw", "qcow2"))
    args = parser.parse_args(argv)
    try:
        guest = build_guest(force=getattr(args, "force", False))
        if args.command == "build":
            print(json.dumps(guest, indent=1))
            return 0
        workdir = cache_root() / "runs" / f"boot-{uuid.uuid4().hex[:8]}"
        result = boot_guest(guest, args.cache, args.bus, args.format, workdir)
    except GuestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shown = {k: v for k, v in result.items() if k not in ("files", "console")}
    print(json.dumps(shown, indent=1))
    return 0 if result["guest"] and not result["guest"]["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
