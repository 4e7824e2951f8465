"""host-config: effective disk settings from each stack's configuration."""

from pathlib import Path

import pytest

from benchdb_agent import hostconfig

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "hostconfig"


def text(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_proxmox_defaults_to_cache_none_and_reads_storage_types():
    qm, storage = text("proxmox-qm-config.txt"), text("proxmox-storage.cfg")
    scsi0 = hostconfig.proxmox(qm, storage, "scsi0")
    assert scsi0 == {
        "platform": "proxmox",
        "cache_mode": "none",  # no cache= on Proxmox means none
        "aio_mode": "default",
        "iothread": "yes",
        "image_format": "raw",
        "storage_backend": "lvm-thin",
        "disk_bus": "virtio-scsi",
    }
    scsi1 = hostconfig.proxmox(qm, storage, "scsi1")
    assert scsi1["cache_mode"] == "writeback"
    assert scsi1["aio_mode"] == "native"
    assert scsi1["image_format"] == "qcow2"
    assert scsi1["storage_backend"] == "file"
    virtio2 = hostconfig.proxmox(qm, storage, "virtio2")
    assert virtio2["disk_bus"] == "virtio-blk"
    assert virtio2["storage_backend"] == "zfs"
    assert virtio2["cache_mode"] == "unsafe"


def test_proxmox_unknown_disk_is_an_error():
    with pytest.raises(ValueError, match="no disk 'sata5'"):
        hostconfig.proxmox(text("proxmox-qm-config.txt"), None, "sata5")
    with pytest.raises(ValueError, match="no disk lines"):
        hostconfig.proxmox("cores: 2\nmemory: 512\n")


def test_libvirt_defaults_to_qemu_writeback():
    xml = text("libvirt-domain.xml")
    vda = hostconfig.libvirt(xml, "vda")
    assert vda["cache_mode"] == "writeback"  # no cache=: QEMU's default
    assert vda["image_format"] == "qcow2"
    assert vda["disk_bus"] == "virtio-blk"
    sda = hostconfig.libvirt(xml, "sda")
    assert sda["cache_mode"] == "none" and sda["aio_mode"] == "native"
    assert sda["disk_bus"] == "virtio-scsi"
    assert sda["storage_backend"] == "lvm"
    with pytest.raises(ValueError, match="not libvirt domain XML"):
        hostconfig.libvirt("<domain")


def test_xen_xl_list():
    tags = hostconfig.xen(text("xl-list-l.json"))
    assert tags["virtualization"] == "xen-pv"
    assert tags["disk_bus"] == "xen-blkfront"
    assert tags["storage_backend"] == "lvm"
    assert tags["cache_mode"] == "default"


def test_qemu_blockdev_cache_flags():
    argv = text("qemu-blockdev.argv").splitlines()
    tags = hostconfig.qemu_cmdline(argv)
    assert tags["cache_mode"] == "none"  # direct=on, no-flush=off, write-cache=on
    assert tags["image_format"] == "qcow2"
    assert tags["virtualization"] == "kvm"
    assert tags["disk_bus"] == "virtio-blk"


@pytest.mark.parametrize(
    ("cache", "expected"),
    [
        ("none", "none"),
        ("writeback", "writeback"),
        ("unsafe", "unsafe"),
        ("directsync", "directsync"),
        ("writethrough", "writethrough"),
        (None, "writeback"),
    ],
)
def test_qemu_drive_cache_modes(cache, expected):
    drive = "file=/img/d.raw,format=raw,if=virtio" + (
        f",cache={cache}" if cache else ""
    )
    tags = hostconfig.qemu_cmdline(f"qemu-system-x86_64 -accel tcg -drive {drive}")
    assert tags["cache_mode"] == expected
    assert tags["virtualization"] == "qemu-tcg"
    assert tags["disk_bus"] == "virtio-blk"


def test_qemu_buses():
    base = "qemu-system-x86_64 -drive file=/img/d,format=raw,if=none,id=d1,cache=none"
    scsi = hostconfig.qemu_cmdline(
        base + " -device virtio-scsi-pci,id=s0 -device scsi-hd,drive=d1"
    )
    assert scsi["disk_bus"] == "virtio-scsi"
    ahci = hostconfig.qemu_cmdline(
        base + " -device ich9-ahci,id=ahci0 -device ide-hd,drive=d1,bus=ahci0.0"
    )
    assert ahci["disk_bus"] == "sata"
    ide = hostconfig.qemu_cmdline("qemu-system-x86_64 -M pc -drive file=/i,if=ide")
    assert ide["disk_bus"] == "ide"
    with pytest.raises(ValueError, match="no -drive"):
        hostconfig.qemu_cmdline("qemu-system-x86_64 -m 512")
