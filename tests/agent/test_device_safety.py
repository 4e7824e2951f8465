"""Real loop devices carrying real signatures: the agent refuses every one,
names what it found, and leaves every byte as it was.

Needs root (losetup, mkfs.*, cryptsetup, mdadm, mount); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from benchdb_agent import safety

AGENT = [sys.executable, "-m", "benchdb_agent"]
MiB = 2**20

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("losetup"),
    reason="needs root and losetup for real loop devices",
)


def sh(*cmd, **kw):
    return subprocess.run(
        [str(c) for c in cmd], check=True, capture_output=True, text=True, **kw
    )


class Loops:
    """Loop devices made for one test, all detached (and md arrays stopped,
    mounts undone, swaps off) at teardown."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.devices = []
        self.undo = []

    def make(self, size=64 * MiB, name=None) -> str:
        img = self.tmp / (name or f"disk{len(self.devices)}.img")
        with open(img, "wb") as fh:
            fh.truncate(size)
        dev = sh("losetup", "-f", "--show", img).stdout.strip()
        self.devices.append(dev)
        return dev

    def close(self):
        for step in reversed(self.undo):
            subprocess.run(step, capture_output=True)
        for dev in self.devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture
def loops(tmp_path):
    made = Loops(tmp_path)
    try:
        yield made
    finally:
        made.close()


def digest(dev: str) -> str:
    h = hashlib.sha256()
    with open(dev, "rb") as fh:
        for block in iter(lambda: fh.read(MiB), b""):
            h.update(block)
    return h.hexdigest()


def refuse_via_cli(dev: str) -> str:
    """Run the agent on ``dev`` with the destroy flag; assert exit 3 and that
    not one byte changed; return what it said."""
    before = digest(dev)
    proc = subprocess.run(
        [
            *AGENT,
            "run",
            "--device",
            dev,
            "--device-write-destroys-data",
            "--test",
            "fio-rand-write-4k-q1t1",
            "--runtime",
            "1",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "refusing" in proc.stderr
    assert digest(dev) == before
    return proc.stderr


def write_at(dev: str, offset: int, data: bytes) -> None:
    with open(dev, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def squashfs(dev, tmp):
    src = tmp / "sq-src"
    src.mkdir()
    (src / "f").write_text("data")
    img = tmp / "sq.img"
    sh("mksquashfs", src, img, "-quiet", "-noappend")
    sh("dd", f"if={img}", f"of={dev}", "conv=notrunc,fsync", "status=none")


def cramfs(dev, tmp):
    src = tmp / "cr-src"
    src.mkdir()
    (src / "f").write_text("data")
    img = tmp / "cr.img"
    sh("mkfs.cramfs", src, img)
    sh("dd", f"if={img}", f"of={dev}", "conv=notrunc,fsync", "status=none")


def keyfile(tmp):
    key = tmp / "key"
    key.write_bytes(b"benchdb-test-key")
    return key


def luks(version):
    def make(dev, tmp):
        sh(
            "cryptsetup",
            "luksFormat",
            "--batch-mode",
            "--type",
            f"luks{version}",
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--key-file",
            keyfile(tmp),
            dev,
        )

    return make


def gpt_backup_only(dev, tmp):
    sh("sfdisk", "-q", dev, input="label: gpt\n,,L\n")
    # Wipe the protective MBR, the primary header and its entries (LBA 0..33):
    # only the backup header in the last sector remains.
    write_at(dev, 0, b"\0" * 34 * 512)


def zfs_end_labels(dev, tmp):
    # No zfsutils here: write ZFS's label bytes ourselves, at the end only.
    # Labels L2 and L3 are the last two 256 KiB blocks; their second halves
    # hold uberblocks whose magic is 0x00bab10c (little-endian on x86).
    with open(dev, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
    for label in (size - 512 * 1024, size - 256 * 1024):
        write_at(dev, label + 128 * 1024, b"\x0c\xb1\xba\x00\x00\x00\x00\x00")


def bcache(dev, tmp):
    write_at(dev, 4096 + 24, bytes.fromhex("c68573f64e1a45ca8265f57f48ba6d81"))


def lvm2(dev, tmp):
    write_at(dev, 512, b"LABELONE" + b"\0" * 16 + b"LVM2 001")


def unknown(dev, tmp):
    write_at(dev, 64 * MiB - 4096, os.urandom(512))


CASES = {
    "ext4": (lambda d, t: sh("mkfs.ext4", "-q", "-F", d), "ext4"),
    "xfs": (lambda d, t: sh("mkfs.xfs", "-q", "-f", d), "xfs"),
    "btrfs": (lambda d, t: sh("mkfs.btrfs", "-q", "-f", d), "btrfs"),
    "f2fs": (lambda d, t: sh("mkfs.f2fs", "-q", "-f", d), "f2fs"),
    "vfat": (lambda d, t: sh("mkfs.vfat", d), "vfat"),
    "minix": (lambda d, t: sh("mkfs.minix", d), "minix"),
    "bfs": (lambda d, t: sh("mkfs.bfs", d), "bfs"),
    "swap": (lambda d, t: sh("mkswap", d), "swap"),
    "squashfs": (squashfs, "squashfs"),
    "cramfs": (cramfs, "cramfs"),
    "luks1": (luks(1), "LUKS"),
    "luks2": (luks(2), "LUKS"),
    "gpt-backup-only": (gpt_backup_only, "GPT partition table (backup header"),
    "zfs-end-labels": (zfs_end_labels, "ZFS label (at the end"),
    "bcache": (bcache, "bcache"),
    "lvm2": (lvm2, "LVM2"),
    "unknown-data": (unknown, "data no probe recognises in the end MiB"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_signature_is_refused_and_left_untouched(loops, tmp_path, kind):
    make, expected = CASES[kind]
    dev = loops.make(size={"btrfs": 128, "xfs": 320}.get(kind, 64) * MiB)
    make(dev, tmp_path)
    said = refuse_via_cli(dev)
    assert expected.lower() in said.lower(), said
    assert f"wipefs -a {dev}" in said


def md_available() -> bool:
    return Path("/proc/mdstat").exists()


@pytest.mark.parametrize("metadata", ["1.0", "0.90"])
def test_md_raid_made_by_mdadm_is_refused(loops, metadata):
    if not md_available():
        pytest.skip("this kernel has no MD driver (/proc/mdstat absent)")
    a, b = loops.make(name="md-a.img"), loops.make(name="md-b.img")
    name = f"/dev/md/h12-{uuid.uuid4().hex[:8]}"
    sh(
        "mdadm",
        "--create",
        name,
        "--run",
        "--level=1",
        "--raid-devices=2",
        f"--metadata={metadata}",
        a,
        b,
    )
    loops.undo.append(["mdadm", "--stop", name])
    # While assembled, the members are held by the array.
    with pytest.raises(safety.SafetyError, match="held by md"):
        safety.check_device(a, allow_write=True)
    sh("mdadm", "--stop", name)
    said = refuse_via_cli(a)
    assert f"MD RAID {metadata} superblock (at the end" in said


def md_superblock(metadata: str, size: int) -> tuple:
    """(offset, bytes) of an MD superblock as md(4) places it: 0.90 in the
    last 64 KiB-aligned 64 KiB block, 1.0 8 KiB before the end (4 KiB
    aligned); magic 0xa92b4efc little-endian, then the major version."""
    if metadata == "0.90":
        offset = (size & ~(64 * 1024 - 1)) - 64 * 1024
        return offset, struct.pack("<III", 0xA92B4EFC, 0, 90)
    offset = ((size // 512 - 16) & ~7) * 512
    return offset, struct.pack("<II", 0xA92B4EFC, 1)


@pytest.mark.parametrize("metadata", ["1.0", "0.90"])
def test_md_superblock_at_the_end_is_refused(loops, metadata):
    # The MD driver may be missing (it is on this test machine), so mdadm
    # cannot write one: lay the superblock's identifying bytes down ourselves.
    dev = loops.make(size=64 * MiB + 12 * 1024)  # not a multiple of 64 KiB
    offset, data = md_superblock(metadata, 64 * MiB + 12 * 1024)
    write_at(dev, offset, data)
    said = refuse_via_cli(dev)
    assert f"MD RAID {metadata} superblock (at the end of the device)" in said
    assert f"wipefs -a {dev}" in said


def test_a_second_node_of_a_mounted_device_is_refused(loops, tmp_path):
    dev = loops.make()
    sh("mkfs.ext4", "-q", "-F", dev)
    point = tmp_path / "mnt"
    point.mkdir()
    # Read-only, so the filesystem itself (ext4's lazy init) writes nothing
    # while the bytes are compared.
    sh("mount", "-o", "ro", dev, point)
    loops.undo.append(["umount", str(point)])
    st = os.stat(dev)
    alias = tmp_path / "alias-node"
    sh("mknod", alias, "b", os.major(st.st_rdev), os.minor(st.st_rdev))
    said = refuse_via_cli(str(alias))
    assert "is mounted on" in said and str(point) in said


def test_an_active_swap_is_refused_by_number(loops, tmp_path):
    dev = loops.make()
    sh("mkswap", dev)
    proc = subprocess.run(["swapon", dev], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"swapon not allowed here: {proc.stderr.strip()}")
    loops.undo.append(["swapoff", dev])
    st = os.stat(dev)
    alias = tmp_path / "swap-node"
    sh("mknod", alias, "b", os.major(st.st_rdev), os.minor(st.st_rdev))
    with pytest.raises(safety.SafetyError, match="in use as swap"):
        safety.check_device(str(alias), allow_write=True)


def test_an_open_luks_volume_is_held(loops, tmp_path):
    dev = loops.make()
    luks(2)(dev, tmp_path)
    name = f"h12-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        ["cryptsetup", "open", "--key-file", str(keyfile(tmp_path)), dev, name],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"dm-crypt not available: {proc.stderr.strip()}")
    loops.undo.append(["cryptsetup", "close", name])
    with pytest.raises(safety.SafetyError, match=f"device-mapper {name}"):
        safety.check_device(dev, allow_write=True)


def test_a_partitioned_disk_is_refused(loops):
    dev = loops.make()
    sh("losetup", "-d", dev)
    loops.devices.remove(dev)
    img = loops.tmp / "disk0.img"
    sh("sfdisk", "-q", img, input="label: gpt\n,,L\n")
    dev = sh("losetup", "-f", "--show", "-P", img).stdout.strip()
    loops.devices.append(dev)
    with pytest.raises(safety.SafetyError, match="partition"):
        safety.check_device(dev, allow_write=True)


def test_a_blank_loop_is_claimed_exclusively(loops, tmp_path):
    dev = loops.make()
    with safety.check_device(dev, allow_write=True) as claim:
        assert claim.size == 64 * MiB and claim.fd is not None
        # Nothing else can take it while the agent holds it.
        with pytest.raises(safety.SafetyError, match="exclusive open"):
            safety.check_device(dev, allow_write=True)
        point = tmp_path / "mnt"
        point.mkdir()
        with contextlib.suppress(subprocess.CalledProcessError):
            sh("mkfs.ext4", "-q", "-F", dev)  # O_EXCL makes mkfs fail, too
    # Released: a fresh check passes only if mkfs really did not write.
    safety.check_device(dev, allow_write=True).close()


def test_the_backing_file_of_a_loop_device_is_refused(loops):
    dev = loops.make(name="backing.img")
    img = loops.tmp / "backing.img"
    with pytest.raises(safety.SafetyError, match=f"backing file of {dev}"):
        safety.check_device(str(img), allow_write=True)


def test_a_blank_loop_device_is_measured_while_claimed(loops):
    dev = loops.make(size=48 * MiB)
    sh("losetup", "-d", dev)
    loops.devices.remove(dev)
    img = loops.tmp / "disk0.img"
    dev = sh("losetup", "-f", "--show", "--direct-io=on", img).stdout.strip()
    loops.devices.append(dev)
    if Path(f"/sys/block/{Path(dev).name}/loop/dio").read_text().strip() != "1":
        pytest.skip("direct I/O for loop devices is not available here")
    out = loops.tmp / "dev.json"
    proc = subprocess.run(
        [
            *AGENT, "run", "--device", dev, "--device-write-destroys-data",
            "--size", "16M", "--runtime", "1", "--repeats", "1",
            "--max-repeats", "1", "--ioping-count", "3",
            "--test", "fio-rand-write-4k-q1t1", "--test", "ioping-read-4k",
            "--test", "dd-write-1m-fdatasync", "--out", str(out),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    import json

    doc = json.loads(out.read_text())
    assert [t["status"] for t in doc["tests"]] == ["complete"] * 3
    assert doc["preconditioning"]["done"] is True
    assert doc["environment"]["target"]["left_blank"] is True
    # Blank again: the next run's check passes.
    safety.check_device(dev, allow_write=True).close()


def test_a_loop_device_without_direct_io_is_refused_as_ram(loops):
    dev = loops.make()  # losetup's default: dio off, the page cache holds it
    proc = subprocess.run(
        [
            *AGENT, "run", "--device", dev, "--device-write-destroys-data",
            "--test", "fio-rand-write-4k-q1t1", "--runtime", "1",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "loop/dio=0" in proc.stderr and "not disk figures" in proc.stderr
