"""Safety checks: the agent runs on other people's machines.

It never writes to a block device unless told to by flags that say so, and
even then refuses a device that holds anything or is in use:

- what it holds is asked of ``blkid -p`` (libblkid's low-level probe, which
  reads both ends of the device) and ``wipefs --no-act --all`` when they are
  installed, and always of the agent's own table of magic numbers read at
  both ends (partition tables with GPT's backup header in the last sector,
  MD RAID 0.90/1.0 superblocks at the end and 1.1/1.2 at the start, LUKS1/2,
  LVM2, ZFS labels at both ends, bcache, common filesystems, swap, ISO 9660
  ...); a device whose first or last MiB is not all zeros, with no known
  signature, is refused as well: unknown data is still data;
- whether it is in use is decided by device number (major:minor), never by
  path: mounts (/proc/self/mountinfo, and each mount source's own device
  number), swaps (/proc/swaps), holders (device-mapper, MD, bcache in
  /sys/dev/block/M:m/holders), partitions of the device, and an exclusive
  open (O_EXCL), which the kernel refuses while anything has the device
  claimed.  The exclusive descriptor is kept for the whole run, so nothing
  can mount the device while it is measured.

Every refusal names what was found and how to clear it if that is really
what the user wants.  The module also checks free space before a test file is
written and whether a directory supports O_DIRECT.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

KiB = 1024
MiB = 2**20
# How much of each end of a device is read: LUKS2 keeps header copies up to
# 4 MiB in; ZFS keeps two 256 KiB labels at each end.
HEAD_BYTES = 4 * MiB + 4 * KiB
TAIL_BYTES = MiB
# Both ends must be all zeros in this span (or carry nothing) to count as blank.
BLANK_SPAN = MiB

# (offset from the start, magic bytes, what it means).  Offsets from each
# format's definition as libblkid probes it (util-linux libblkid/src/...).
SIGNATURES = (
    (0x1FE, b"\x55\xaa", "an MBR partition table or boot sector"),
    (0x200, b"EFI PART", "a GPT partition table"),
    (0x1000, b"EFI PART", "a GPT partition table (4 KiB sectors)"),
    (0x0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
    (0x0, b"SKUL\xba\xbe", "a LUKS2 encrypted volume (secondary header)"),
    (0x1000, b"\xfc\x4e\x2b\xa9", "an MD RAID 1.1 superblock"),
    (0x2000, b"\xfc\x4e\x2b\xa9", "an MD RAID 1.2 superblock"),
    (0x1018, bytes.fromhex("c68573f64e1a45ca8265f57f48ba6d81"), "a bcache device"),
    (0x1018, bytes.fromhex("c68573f666ce90a9d96a60cf803df7ef"), "a bcachefs device"),
    (0x438, b"\x53\xef", "an ext2/3/4 filesystem"),
    (0x0, b"XFSB", "an XFS filesystem"),
    (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
    (0x400, b"\x10\x20\xf5\xf2", "an F2FS filesystem"),
    (0x0, b"hsqs", "a squashfs filesystem"),
    (0x0, b"sqsh", "a squashfs filesystem"),
    (0x0, b"\x45\x3d\xcd\x28", "a cramfs filesystem"),
    (0x200, b"\x45\x3d\xcd\x28", "a cramfs filesystem"),
    (0x0, b"\xce\xfa\xad\x1b", "a BFS filesystem"),
    (0x410, b"\x7f\x13", "a minix filesystem"),
    (0x410, b"\x8f\x13", "a minix filesystem"),
    (0x410, b"\x68\x24", "a minix filesystem (v2)"),
    (0x410, b"\x78\x24", "a minix filesystem (v2)"),
    (0x418, b"\x5a\x4d", "a minix filesystem (v3)"),
    (0x36, b"FAT", "a FAT filesystem"),
    (0x52, b"FAT32", "a FAT32 filesystem"),
    (0x3, b"EXFAT   ", "an exFAT filesystem"),
    (0x3, b"NTFS    ", "an NTFS filesystem"),
    (0x3, b"-FVE-FS-", "a BitLocker volume"),
    (0x8001, b"CD001", "an ISO 9660 filesystem"),
    (0x8001, b"BEA01", "a UDF filesystem"),
    (0x8000, b"JFS1", "a JFS filesystem"),
    (0x10034, b"ReIsEr", "a ReiserFS filesystem"),
    (0x10000, b"\x01\x16\x19\x70", "a GFS2 filesystem"),
    (0x406, b"\x34\x34", "a NILFS2 filesystem"),
    (0x400, b"H+", "an HFS+ filesystem"),
    (0x400, b"HX", "an HFS+ filesystem"),
    (0x400, b"\xe2\xe1\xf5\xe0", "an EROFS filesystem"),
    (0x20, b"NXSB", "an APFS container"),
    (0x0, b"bluestore block device", "a Ceph BlueStore device"),
    (0x0, b"integrt", "a dm-integrity device"),
    (0x0, b"verity\x00\x00", "a dm-verity hash device"),
    (0x0, b"HM\x01\x00", "an LVM1 physical volume"),
    (0x0, b"DRBD", "a DRBD device"),
)
# Swap's signature ends its first page, whatever the page size.
SWAP_MAGICS = (b"SWAPSPACE2", b"SWAP-SPACE", b"S1SUSPEND", b"S2SUSPEND")
SWAP_PAGES = (4096, 8192, 16384, 65536)
MD_MAGICS = (b"\xfc\x4e\x2b\xa9", b"\xa9\x2b\x4e\xfc")  # a92b4efc, either order
ZFS_UBERBLOCK = (
    b"\x0c\xb1\xba\x00\x00\x00\x00\x00",
    b"\x00\x00\x00\x00\x00\xba\xb1\x0c",
)
ZFS_LABEL = 256 * KiB
LUKS2_SECONDARY = tuple(0x4000 << i for i in range(9))  # 16 KiB .. 4 MiB

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


def _read_at(fh, offset: int, length: int) -> bytes:
    fh.seek(offset)
    return fh.read(length)


def _size_of(fh) -> int:
    return fh.seek(0, os.SEEK_END)


def signatures(path: str) -> list:
    """What the magic numbers at both ends of a device or image say it holds.

    Two-byte magics (ext*, minix, MBR ...) are reported only when no longer
    one matched, so an ext4 is not also called a minix filesystem.
    """
    strong, weak = [], []
    with open(path, "rb") as fh:
        size = _size_of(fh)
        head = _read_at(fh, 0, min(size, HEAD_BYTES))
        tail_start = max(0, (size & ~(ZFS_LABEL - 1)) - 4 * ZFS_LABEL)
        tail_start = min(tail_start, max(0, size - TAIL_BYTES))
        tail = _read_at(fh, tail_start, size - tail_start)

    def at_end(offset, magic):
        i = offset - tail_start
        return 0 <= i and tail[i : i + len(magic)] == magic

    for offset, magic, meaning in SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            (strong if len(magic) >= 4 else weak).append(meaning)
    for sector in range(4):
        label = head[sector * 512 : sector * 512 + 32]
        if label[:8] == b"LABELONE":
            kind = "an LVM2" if label[24:32] == b"LVM2 001" else "an LVM"
            strong.append(f"{kind} physical volume")
    for page in SWAP_PAGES:
        for magic in SWAP_MAGICS:
            if head[page - 10 : page - 10 + len(magic)] == magic:
                strong.append("a swap area")
    for offset in LUKS2_SECONDARY:
        if head[offset : offset + 6] == b"SKUL\xba\xbe":
            strong.append("a LUKS2 encrypted volume (secondary header)")
    # MD 0.90: the last 64 KiB-aligned 64 KiB block; MD 1.0: 8 KiB before the
    # end, rounded down to 4 KiB.
    md090 = (size & ~(64 * KiB - 1)) - 64 * KiB
    md10 = ((size // 512 - 16) & ~7) * 512
    if md090 >= 0 and any(at_end(md090, m) for m in MD_MAGICS):
        strong.append("an MD RAID 0.90 superblock (at the end of the device)")
    if md10 >= 0 and at_end(md10, MD_MAGICS[0]):
        strong.append("an MD RAID 1.0 superblock (at the end of the device)")
    for sector in (512, 4096):
        if size >= 2 * sector and at_end(size - sector, b"EFI PART"):
            strong.append("a GPT partition table (backup header at the end)")
    if size >= 2048 and at_end(size - 1024, b"Intel Raid ISM Cfg Sig. "):
        strong.append("an Intel Matrix RAID (IMSM) superblock")
    if size >= 1024 and at_end(size - 512, b"\xde\x11\xde\x11"):
        strong.append("a DDF RAID superblock")
    # ZFS: four 256 KiB labels, two at the start and two at the end; each
    # has an array of uberblocks (magic 0x00bab10c) in its second half.
    end_labels = (size & ~(ZFS_LABEL - 1)) - 2 * ZFS_LABEL
    for where, base in (("start", 0), ("start", ZFS_LABEL)):
        if _zfs_label(head, base):
            strong.append(f"a ZFS label (at the {where} of the device)")
            break
    for base in (end_labels, end_labels + ZFS_LABEL):
        if base >= 0 and _zfs_label(tail, base - tail_start):
            strong.append("a ZFS label (at the end of the device)")
            break
    found = strong or weak
    return sorted(set(found), key=found.index)


def _zfs_label(buf: bytes, base: int) -> bool:
    if base < 0:
        return False
    for off in range(base + 128 * KiB, base + 256 * KiB, KiB):
        if buf[off : off + 8] in ZFS_UBERBLOCK:
            return True
    return False


def nonzero_ends(path: str) -> list:
    """Which ends of a device hold anything but zeros (first/last MiB)."""
    out = []
    with open(path, "rb") as fh:
        size = _size_of(fh)
        span = min(BLANK_SPAN, size)
        if _read_at(fh, 0, span).strip(b"\0"):
            out.append("start")
        if _read_at(fh, size - span, span).strip(b"\0"):
            out.append("end")
    return out


def tool_findings(path: str) -> list:
    """What ``blkid -p`` and ``wipefs --no-act --all`` report, when installed.

    A probe that fails or cannot decide is itself a finding: doubt refuses.
    """
    found = []
    env = dict(os.environ, LC_ALL="C", LANG="C")
    if shutil.which("blkid"):
        proc = _run(["blkid", "-p", "-o", "export", path], env)
        if proc is None:
            found.append("blkid -p did not answer")
        elif proc.returncode == 0:
            values = dict(
                line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line
            )
            kinds = [values[k] for k in ("TYPE", "PTTYPE") if values.get(k)]
            usage = values.get("USAGE")
            what = " and ".join(kinds) or "a signature"
            found.append(f"blkid -p: {what}" + (f" (usage {usage})" if usage else ""))
        elif proc.returncode != 2:  # 2: nothing found
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            found.append(
                f"blkid -p could not decide (exit {proc.returncode}"
                + (f": {msg[0]}" if msg else "")
                + ")"
            )
    if shutil.which("wipefs"):
        proc = _run(["wipefs", "--no-act", "--all", path], env)
        if proc is None or proc.returncode != 0:
            err = "" if proc is None else (proc.stderr or "").strip()
            found.append(f"wipefs could not read the device {err}".strip())
        else:
            sigs = re.findall(r"at offset (0x[0-9a-fA-F]+) \(([^)]+)\)", proc.stdout)
            if sigs:
                found.append("wipefs: " + signature_places(sigs))
    return found


def signature_places(sigs: list) -> str:
    """wipefs's (offset, kind) pairs, one phrase per kind: a ZFS member has a
    signature at every uberblock (hundreds), which says no more than the
    first and the last."""
    by_kind = {}
    for offset, kind in sigs:
        by_kind.setdefault(kind, []).append(offset)
    parts = []
    for kind, offsets in by_kind.items():
        if len(offsets) == 1:
            parts.append(f"{kind} at offset {offsets[0]}")
        else:
            parts.append(
                f"{kind} at {len(offsets)} offsets ({offsets[0]} to {offsets[-1]})"
            )
    return ", ".join(parts)


def _run(cmd: list, env: dict):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None


def _rdev(st) -> str:
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def _sysfs(devno: str) -> Path:
    return Path("/sys/dev/block") / devno


def _partitions(devno: str) -> list:
    """(name, major:minor) of the partitions of a whole disk."""
    base = _sysfs(devno)
    out = []
    try:
        children = list(base.iterdir())
    except OSError:
        return out
    for child in children:
        if (child / "partition").exists():
            try:
                out.append((child.name, (child / "dev").read_text().strip()))
            except OSError:
                continue
    return out


def _devno_of_path(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _rdev(st) if stat.S_ISBLK(st.st_mode) else None


def mounts_by_devno(mountinfo: str = "/proc/self/mountinfo") -> dict:
    """major:minor -> mount points, from the mount's own number and from the
    device number of its source (btrfs shows an anonymous 0:N of its own)."""
    out = {}
    try:
        with open(mountinfo) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) < 10 or "-" not in parts:
            continue
        sep = parts.index("-")
        point = parts[4].replace("\\040", " ")
        source = parts[sep + 2] if len(parts) > sep + 2 else ""
        out.setdefault(parts[2], []).append(point)
        if source.startswith("/"):
            devno = _devno_of_path(source.replace("\\040", " "))
            if devno:
                out.setdefault(devno, []).append(point)
    return out


def mounted_sources(proc_mounts: str = "/proc/mounts") -> dict:
    """Mount source path -> mount point (for messages; decisions use numbers)."""
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


def swaps_by_devno(proc_swaps: str = "/proc/swaps") -> dict:
    out = {}
    try:
        with open(proc_swaps) as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        name = line.split()[0].replace("\\040", " ") if line.split() else ""
        devno = _devno_of_path(name)
        if devno:
            out[devno] = name
    return out


def _holders(devno: str) -> list:
    try:
        names = sorted(p.name for p in (_sysfs(devno) / "holders").iterdir())
    except OSError:
        return []
    out = []
    for name in names:
        dm = Path("/sys/block") / name / "dm" / "name"
        try:
            out.append(f"{name} (device-mapper {dm.read_text().strip()})")
        except OSError:
            out.append(name)
    return out


class DeviceClaim:
    """The exclusive open of a device that passed the checks, kept for the
    run: while it is open nothing can mount or assemble the device."""

    def __init__(self, path: str, fd: int | None, size: int):
        self.path = path
        self.fd = fd
        self.size = size

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _wipe_hint(path: str) -> str:
    return (
        f"if it really holds nothing you need, clear it first with "
        f"`wipefs -a {path}` (and for unknown data `blkdiscard {path}` or "
        f"zeroing its first and last MiB), then run again"
    )


def check_device(path: str, allow_write: bool) -> DeviceClaim:
    """Refuse a block device (or image file used as one) unless it is blank
    and unused; return its exclusive claim (close it when done)."""
    if not allow_write:
        raise SafetyError(
            f"{path} is a device: the agent writes to a device only with "
            "--device-write-destroys-data, and only when it holds nothing"
        )
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SafetyError(f"cannot open {path}: {exc.strerror}") from None
    is_block = stat.S_ISBLK(st.st_mode)
    if not is_block and not stat.S_ISREG(st.st_mode):
        raise SafetyError(f"{path} is neither a block device nor an image file")
    if is_block:
        _check_in_use(path, _rdev(st))
    else:
        loops = loops_backed_by(st)
        if loops:
            raise SafetyError(
                f"{path} is the backing file of {', '.join(loops)}: writing it "
                "writes that device; refusing (detach it with `losetup -d` first "
                "if it really holds nothing)"
            )
    # The tools first: wipefs opens the device exclusively itself.
    found = tool_findings(path)
    fd = None
    if is_block:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_EXCL | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                raise SafetyError(
                    f"{path} is busy: the kernel refused an exclusive open "
                    "(something has it mounted, assembled or open exclusively); "
                    "refusing to write"
                ) from None
            raise SafetyError(f"cannot open {path}: {exc.strerror}") from None
    try:
        with open(path, "rb") as fh:
            size = _size_of(fh)
        found += signatures(path)
        if not found:
            ends = nonzero_ends(path)
            if ends:
                found.append(
                    "data no probe recognises in the "
                    + " and ".join(f"{e} MiB" for e in ends)
                    + " (not all zeros)"
                )
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        raise SafetyError(f"cannot read {path}: {exc.strerror}") from None
    if found:
        if fd is not None:
            os.close(fd)
        # The same label seen twice (both end copies) is said once.
        found = list(dict.fromkeys(found))
        raise SafetyError(
            f"{path} holds {'; '.join(found)}: refusing to write, it would "
            f"destroy data. {_wipe_hint(path)}"
        )
    return DeviceClaim(path, fd, size)


def loops_backed_by(st) -> list:
    """Loop devices whose backing file is the file ``st`` describes."""
    out = []
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        try:
            other = os.stat(backing.read_text().strip())
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            out.append("/dev/" + backing.parent.parent.name)
    return out


def _check_in_use(path: str, devno: str) -> None:
    """Mounts, swaps, holders and partitions, by device number."""
    mounts = mounts_by_devno()
    swaps = swaps_by_devno()
    if devno in mounts:
        raise SafetyError(
            f"{path} (device {devno}) is mounted on {', '.join(mounts[devno])}: "
            f"refusing to write; unmount it first if it really holds nothing"
        )
    if devno in swaps:
        raise SafetyError(
            f"{path} (device {devno}) is in use as swap ({swaps[devno]}): "
            f"refusing to write; `swapoff {swaps[devno]}` first if you mean it"
        )
    holders = _holders(devno)
    if holders:
        raise SafetyError(
            f"{path} (device {devno}) is held by {', '.join(holders)} (LVM, RAID, "
            "encryption or another device-mapper target): refusing to write"
        )
    parts = _partitions(devno)
    if parts:
        used = []
        for name, pdev in parts:
            if pdev in mounts:
                used.append(f"{name} mounted on {', '.join(mounts[pdev])}")
            elif pdev in swaps:
                used.append(f"{name} is swap")
            elif _holders(pdev):
                used.append(f"{name} held by {', '.join(_holders(pdev))}")
        detail = f" ({'; '.join(used)})" if used else ""
        raise SafetyError(
            f"{path} has partitions {', '.join(n for n, _ in parts)}{detail}: "
            f"refusing to write. {_wipe_hint(path)}"
        )


# Never fill a stranger's filesystem to the brim: a tenth of what the run
# writes stays free, and at least a tenth of the filesystem up to this much
# (so a small filesystem is not refused for a margin larger than itself).
MIN_MARGIN = 256 * MiB


def space_needed(test_file: int, dd_file: int, filesystem: int) -> int:
    """Bytes a run needs free on a filesystem of ``filesystem`` bytes: its
    files and the margin."""
    files = test_file + dd_file
    return files + max(files // 10, min(MIN_MARGIN, filesystem // 10))


def largest_fitting(free: int, filesystem: int, with_dd: bool) -> int:
    """The largest test file (whole MiB) whose run fits in ``free`` bytes
    (dd's file is as large, at most 1 GiB); 0 if none does."""
    low, high = 0, free // MiB
    while low < high:
        mid = (low + high + 1) // 2
        size = mid * MiB
        dd = min(size, 2**30) if with_dd else 0
        if space_needed(size, dd, filesystem) <= free:
            low = mid
        else:
            high = mid - 1
    return low * MiB


def check_free_space(directory: str, test_file: int, dd_file: int = 0) -> None:
    """Refuse unless ``directory`` holds the test file, dd's file and the
    margin; the refusal says how much is needed and how to need less."""
    usage = shutil.disk_usage(directory)
    free = usage.free
    needed = space_needed(test_file, dd_file, usage.total)
    if free >= needed:
        return
    files = test_file + dd_file
    parts = f"the {test_file // MiB} MiB test file"
    if dd_file:
        parts += f" + dd's {dd_file // MiB} MiB file"
    fits = largest_fitting(free, usage.total, bool(dd_file))
    lower = (
        f"a smaller --size (--size {fits // MiB}M fits here)"
        if fits >= MiB
        else "a smaller --size"
    )
    raise SafetyError(
        f"{directory} has {free // MiB} MiB free; this run needs "
        f"{needed // MiB} MiB: {parts} + a margin of "
        f"{(needed - files) // MiB} MiB, so the filesystem is never filled. "
        f"Need less with {lower} or --test without dd, or choose another --target"
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


# Filesystems whose data lives in RAM (recent tmpfs even accepts O_DIRECT,
# so a probe alone cannot tell).
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs", "devtmpfs", "hugetlbfs")
# Block devices that are RAM: zram (compressed RAM), brd (/dev/ramN).
MEMORY_DEVICES = ("zram", "ram")


def _mount_entry(devno: str, mountinfo: str = "/proc/self/mountinfo"):
    """(mount point, fstype, source, super options) of the mount whose
    device number is ``devno`` (a bind mount has its origin's number)."""
    try:
        with open(mountinfo) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        parts = line.split()
        if len(parts) < 10 or "-" not in parts or parts[2] != devno:
            continue
        sep = parts.index("-")
        entry = (
            parts[4].replace("\\040", " "),
            parts[sep + 1],
            parts[sep + 2].replace("\\040", " "),
            parts[sep + 3] if len(parts) > sep + 3 else "",
        )
        best = entry  # the last one mounted is the one in effect
    return best


def memory_backing(path: str, _depth: int = 0) -> list:
    """Why ``path`` (a directory or file) is served from RAM, following it to
    its backing device: a RAM filesystem; an overlay whose upper directory is
    in RAM; zram or brd; a loop device without direct I/O (loop/dio=0: the
    page cache holds its data) or whose backing file is itself in RAM; the
    members of device-mapper and MD devices.  An empty list: nothing found."""
    if _depth > 8:
        return []
    try:
        st = os.stat(path)
    except OSError:
        return []
    devno = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    entry = _mount_entry(devno)
    reasons = []
    if entry:
        point, fstype, source, options = entry
        if fstype in MEMORY_FILESYSTEMS:
            return [f"{path} is on {fstype} ({point}), which lives in RAM"]
        if fstype == "overlay":
            upper = re.search(r"(?:^|,)upperdir=([^,]+)", options)
            if upper:
                below = memory_backing(upper.group(1), _depth + 1)
                if below:
                    return [
                        f"{path} is on an overlay ({point}) whose upper directory "
                        f"{upper.group(1)} is in RAM: " + "; ".join(below)
                    ]
            return reasons
        if os.major(st.st_dev) == 0 and source.startswith("/"):
            # btrfs and others report an anonymous number: use the source's.
            real = _devno_of_path(source)
            if real:
                devno = real
    if not devno.startswith("0:"):
        reasons += block_memory_backing(devno, _depth)
    return reasons


def block_memory_backing(devno: str, _depth: int = 0) -> list:
    """Why the block device ``devno`` keeps its data in RAM (see above)."""
    if _depth > 8:
        return []
    base = _sysfs(devno)
    try:
        real = base.resolve()
    except OSError:
        return []
    if (real / "partition").exists():
        real = real.parent
    name = real.name
    if re.fullmatch(r"zram\d+", name) or re.fullmatch(r"ram\d+", name):
        kind = "zram (compressed RAM)" if name.startswith("zram") else "brd RAM disk"
        return [f"{name} is a {kind}"]
    if re.fullmatch(r"loop\d+", name):
        out = []
        try:
            dio = (real / "loop" / "dio").read_text().strip()
        except OSError:
            dio = None
        try:
            backing = (real / "loop" / "backing_file").read_text().strip()
        except OSError:
            backing = None
        if dio == "0":
            out.append(
                f"{name} is a loop device without direct I/O (loop/dio=0): the "
                f"page cache holds its data"
                + (f" (backing file {backing})" if backing else "")
            )
        if backing:
            out += memory_backing(backing, _depth + 1)
        return out
    out = []
    try:
        slaves = sorted((real / "slaves").iterdir())
    except OSError:
        slaves = []
    for slave in slaves:
        try:
            out += block_memory_backing((slave / "dev").read_text().strip(), _depth + 1)
        except OSError:
            continue
    return out
