"""Safety checks: the agent runs on other people's machines.

It never writes to a block device unless told to by flags that say so, and
even then refuses a device that holds anything (a filesystem, a partition
table, an LVM or RAID signature), is mounted, or holds the root filesystem.
It checks free space before it writes a test file, and it refuses to measure
the page cache: a target without O_DIRECT support (tmpfs) is reported, not
silently measured.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

# (offset, magic bytes, what it means).  Offsets from each format's spec.
SIGNATURES = (
    (0x438, b"\x53\xef", "an ext2/3/4 filesystem"),
    (0, b"XFSB", "an XFS filesystem"),
    (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
    (0x1FE, b"\x55\xaa", "an MBR partition table or boot sector"),
    (0x200, b"EFI PART", "a GPT partition table"),
    (0x218, b"LVM2 001", "an LVM physical volume"),
    (0x1000, b"\xfc\x4e\x2b\xa9", "an mdraid 1.1 superblock"),
    (0x1000 + 0x1000, b"\xfc\x4e\x2b\xa9", "an mdraid 1.2 superblock"),
    (0x0FF6, b"SWAPSPACE2", "a swap area"),
    (0x0FF6, b"SWAP-SPACE", "a swap area"),
    (0x8001, b"CD001", "an ISO 9660 filesystem"),
    (0x36, b"FAT", "a FAT filesystem"),
    (0x52, b"FAT32", "a FAT32 filesystem"),
    (0x3, b"NTFS", "an NTFS filesystem"),
)
# LVM's label may sit in any of the first four sectors.
LVM_LABEL = b"LABELONE"

INSTALL_HINTS = {
    "debian": "apt-get install {pkgs}",
    "ubuntu": "apt-get install {pkgs}",
    "fedora": "dnf install {pkgs}",
    "rhel": "dnf install {pkgs}   (ioping comes from EPEL)",
    "centos": "yum install epel-release && yum install {pkgs}",
    "rocky": "dnf install epel-release && dnf install {pkgs}",
    "almalinux": "dnf install epel-release && dnf install {pkgs}",
    "alpine": "apk add {pkgs}",
    "arch": "pacman -S {pkgs}",
    "opensuse-leap": "zypper install {pkgs}",
    "sles": "zypper install {pkgs}",
}


class SafetyError(RuntimeError):
    """A refusal, with the reason the user needs."""


def signatures(path: str) -> list:
    """What the first bytes of a device or image say it holds."""
    found = []
    with open(path, "rb") as fh:
        head = fh.read(0x11000)
    for offset, magic, meaning in SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            found.append(meaning)
    for sector in range(4):
        if head[sector * 512 : sector * 512 + 8] == LVM_LABEL:
            found.append("an LVM physical volume")
            break
    return sorted(set(found))


def mounted_sources(proc_mounts: str = "/proc/mounts") -> dict:
    out = {}
    try:
        with open(proc_mounts) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2:
                    out[os.path.realpath(parts[0])] = parts[1]
    except OSError:
        pass
    return out


def check_device(path: str, allow_write: bool) -> None:
    """Refuse a block device (or image file used as one) unless it is blank."""
    if not allow_write:
        raise SafetyError(
            f"{path} is a device: the agent writes to a device only with "
            "--device-write-destroys-data, and only when it holds nothing"
        )
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise SafetyError(f"cannot open {path}: {exc.strerror}") from None
    mounts = mounted_sources()
    if real in mounts:
        raise SafetyError(f"{path} is mounted on {mounts[real]}: refusing to write")
    if stat.S_ISBLK(st.st_mode):
        root_dev = os.stat("/").st_dev
        if os.major(root_dev) == os.major(st.st_rdev) and os.minor(
            root_dev
        ) == os.minor(st.st_rdev):
            raise SafetyError(f"{path} holds the root filesystem: refusing to write")
        name = os.path.basename(real)
        holders = Path(f"/sys/class/block/{name}/holders")
        if holders.is_dir() and any(holders.iterdir()):
            raise SafetyError(f"{path} is in use (LVM, RAID or device-mapper holders)")
        parts = [
            p for p in Path(f"/sys/class/block/{name}").glob(f"{name}*") if p.is_dir()
        ]
        if parts:
            raise SafetyError(f"{path} has partitions: refusing to write")
        for source in mounts:
            if os.path.basename(source).startswith(name):
                raise SafetyError(
                    f"a partition of {path} is mounted: refusing to write"
                )
    found = signatures(real)
    if found:
        raise SafetyError(
            f"{path} holds {', '.join(found)}: refusing to write, it would destroy data"
        )


def check_free_space(directory: str, needed: int) -> None:
    free = shutil.disk_usage(directory).free
    # Keep a margin: never fill a stranger's filesystem to the brim.
    margin = max(256 * 2**20, needed // 10)
    if free < needed + margin:
        raise SafetyError(
            f"{directory} has {free // 2**20} MiB free; the test file needs "
            f"{needed // 2**20} MiB plus a {margin // 2**20} MiB margin. "
            "Use --size to choose a smaller file, or another --target"
        )


def supports_o_direct(directory: str) -> bool:
    """Whether files in ``directory`` can be opened with O_DIRECT."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    probe = os.path.join(directory, f".benchdb-odirect-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | flag, 0o600)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    else:
        os.close(fd)
        return True
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def install_hint(missing: list, os_id: str | None) -> str:
    pkgs = " ".join(sorted(set(missing)))
    template = INSTALL_HINTS.get(
        os_id or "", "install {pkgs} with your package manager"
    )
    return template.format(pkgs=pkgs)
