"""host-config on Proxmox VE configs, checked against qemu-server's own tests.

tests/samples/hostconfig/proxmox/ holds qemu-server's src/test/cfg2cmd/*.conf
with the .conf.cmd command lines qemu-server generates from them (the
-blockdev era and the -drive era; source, commits and licence in its README).
The expected values are what QEMU runs for that generated command line, read
with the QEMU rule (the command-line reader, itself proved against live QEMU in
test_hostconfig_live.py): the config reader must agree with it on every disk.
"""

from pathlib import Path

import pytest

from benchdb_agent import hostconfig

PVE = Path(__file__).resolve().parent.parent / "samples" / "hostconfig" / "proxmox"
STORAGE = (PVE / "storage.cfg").read_text()
CASES = sorted(
    (era, conf.name)
    for era in ("blockdev", "drive")
    for conf in (PVE / era).glob("*.conf")
)
COMPARED = ("cache_mode", "aio_mode", "image_format", "disk_bus", "iothread")
# The QEMU each era's command lines were generated with (an unpinned VM runs
# its version): the -drive era's commit predates QEMU 10.0 (those command lines
# use -drive without a pinned machine), the -blockdev era is 10.0 or later.
QEMU_OF_ERA = {"blockdev": "10.0", "drive": "9.2"}


def from_config(era, name):
    conf = (PVE / era / name).read_text()
    disks = hostconfig.for_proxmox(conf, STORAGE, QEMU_OF_ERA[era])
    return {d.id: d for d in disks}


def from_cmd(era, name):
    disks = hostconfig.for_qemu_cmdline((PVE / era / (name + ".cmd")).read_text())
    out = {}
    for d in disks:
        for key in [d.id, *d.aliases]:
            out[key] = d
    return out


def test_the_samples_cover_both_eras():
    eras = {era for era, _ in CASES}
    assert eras == {"blockdev", "drive"} and len(CASES) >= 30
    assert "-blockdev" in (PVE / "blockdev" / "aio.conf.cmd").read_text()
    assert "-blockdev" not in (PVE / "drive" / "aio.conf.cmd").read_text()


@pytest.mark.parametrize(("era", "name"), CASES)
def test_config_reader_agrees_with_the_generated_command_line(era, name):
    config = from_config(era, name)
    cmd = from_cmd(era, name)
    compared = 0
    for disk_id, disk in config.items():
        run = cmd.get(f"drive-{disk_id}") or cmd.get(disk_id)
        if run is None:
            # not on the command line: an empty CD-ROM (-blockdev era), or TPM
            # state (swtpm opens it, not QEMU)
            assert disk.kind in ("cdrom", "tpmstate"), disk_id
            assert not disk.is_target
            continue
        template = "template: 1" in (PVE / era / name).read_text()
        if template and disk_id.startswith(("ide", "sata")):
            # since -blockdev, qemu-server attaches a template's IDE/SATA disks
            # as ide-cd (it is never started as a VM, only for backups)
            assert run.kind == ("cdrom" if era == "blockdev" else disk.kind)
            assert any("template" in n for n in disk.notes)
        else:
            assert disk.kind == run.kind, disk_id
        ours, qemus = disk.to_tags(), run.to_tags()
        if "scsiblock=1: scsi-block" in disk.sources["cache_mode"]:
            # /dev/sdg is not here: scsi-block or scsi-hd is for the host's
            # INQUIRY to say; qemu-server's test machine had no such SCSI
            # disk, so it generated scsi-hd, whose values the source names
            assert "'scsi-hd,bus=scsihw0.0" in (PVE / era / f"{name}.cmd").read_text()
            for tag, attr in (("cache_mode", "cache_mode"), ("aio_mode", "aio")):
                assert ours[tag] == "unknown"
                assert f"else scsi-hd ({qemus[tag]})" in disk.sources[attr]
            ours.update(cache_mode=qemus["cache_mode"], aio_mode=qemus["aio_mode"])
        for tag in COMPARED:
            assert ours[tag] == qemus[tag], (disk_id, tag, disk.sources.get(tag))
        assert disk.virtualization == run.virtualization
        assert disk.virtualization == ("qemu-tcg" if template else "kvm")
        compared += 1
    assert compared, "no disk compared"


def test_defaults_and_their_sources():
    aio = from_config("blockdev", "aio.conf")
    assert aio["scsi3"].aio == "io_uring"
    assert aio["scsi3"].sources["aio"] == "Proxmox default (io_uring)"
    assert aio["scsi4"].aio == "native"  # CIFS with O_DIRECT
    assert "CIFS" in aio["scsi4"].sources["aio"]
    assert aio["scsi8"].aio == "threads"  # krbd, writeback
    assert aio["scsi10"].aio == "default"  # librbd: no aio
    assert "librbd" in aio["scsi10"].sources["aio"]
    assert aio["scsi12"].aio == "native"
    assert aio["scsi12"].sources["aio"].startswith("Proxmox default for LVM storage")
    assert aio["scsi0"].aio == "threads"
    assert aio["scsi0"].sources["aio"] == "set in the config (aio=threads)"
    assert aio["scsi0"].cache_mode == "none"
    assert aio["scsi0"].sources["cache_mode"].startswith("Proxmox default")
    assert aio["scsi0"].bus == "scsi"  # no scsihw: is lsi
    assert "LSI 53C895A" in aio["scsi0"].sources["bus"]
    btrfs = from_config("blockdev", "simple-btrfs.conf")
    assert btrfs["scsi0"].cache_mode == "writeback"
    assert "BTRFS" in btrfs["scsi0"].sources["cache_mode"]
    assert btrfs["scsi3"].cache_mode == "directsync"
    assert btrfs["ide2"].kind == "cdrom" and not btrfs["ide2"].is_target
    zfs = from_config("blockdev", "simple-zfs-over-iscsi.conf")
    assert zfs["scsi0"].aio == "default" and "iSCSI" in zfs["scsi0"].sources["aio"]
    efi = from_config("blockdev", "efi-secboot-and-tpm-q35.conf")
    assert efi["efidisk0"].kind == "efivars"
    assert efi["efidisk0"].cache_mode == "writeback"
    assert efi["tpmstate0"].kind == "tpmstate"
    boot = from_config("blockdev", "bootorder.conf")
    assert {d.iothread for d in boot.values() if d.is_target} >= {"yes"}
    conf = (
        "scsi0: local-lvm:vm-1-disk-0,iothread=1\nvirtio0: local-lvm:vm-1-disk-1,"
        "iothread=1\nscsihw: virtio-scsi-pci\n"
    )
    pci = {d.id: d for d in hostconfig.for_proxmox(conf, STORAGE)}
    limited = hostconfig.for_proxmox(
        "scsi0: local-lvm:vm-1-disk-0,mbps_rd=100,iops_wr=500,iops=0\n", STORAGE
    )[0]
    assert limited.notes == [
        "throttled (qemu-server's throttle-group): iops_wr=500, mbps_rd=100"
    ]
    assert not [n for n in pci["scsi0"].notes if "throttled" in n]
    assert pci["scsi0"].iothread == "no"  # only virtio-scsi-single gives one
    assert "ignored" in pci["scsi0"].sources["iothread"]
    assert pci["virtio0"].iothread == "yes"


def test_efi_disk_follows_the_machine_version():
    # pinned to 4.1: qemu-server attaches EFI vars with -drive if=pflash and
    # passes no aio= (nor cache=), so QEMU runs threads and writeback
    old = from_config("blockdev", "efi-raw-old.conf")["efidisk0"]
    assert (
        "if=pflash,unit=1,id=drive-efidisk0"
        in (PVE / "blockdev" / "efi-raw-old.conf.cmd").read_text()
    )
    assert (old.aio, old.cache_mode) == ("threads", "writeback")
    assert "no aio= on qemu-server's -drive if=pflash" in old.sources["aio"]
    assert "machine: pc-i440fx-4.1+pve0" in old.sources["aio"]
    # unpinned on QEMU 10.0: -blockdev, io_uring like any disk
    new = from_config("blockdev", "efi-secboot-and-tpm.conf")
    assert (new["efidisk0"].aio, new["efidisk0"].cache_mode) == (
        "io_uring",
        "writeback",
    )
    # a 4M EFI disk and TPM state: listed, neither is a benchmark target, and
    # the TPM state is swtpm's file (no -blockdev or -drive for it)
    assert new["efidisk0"].kind == "efivars" and not new["efidisk0"].is_target
    assert new["tpmstate0"].kind == "tpmstate" and not new["tpmstate0"].is_target
    cmd = (PVE / "blockdev" / "efi-secboot-and-tpm.conf.cmd").read_text()
    assert "vm-100-disk-1" not in cmd and "-tpmdev 'emulator" in cmd
    assert "swtpm" in new["tpmstate0"].sources["cache_mode"]
    # the installed QEMU unknown and nothing pinned: said, not guessed
    conf = (PVE / "blockdev" / "efi-secboot-and-tpm.conf").read_text()
    unknown = {d.id: d for d in hostconfig.for_proxmox(conf, STORAGE)}["efidisk0"]
    assert unknown.aio == "unknown"
    assert "give the QEMU version" in unknown.sources["aio"]
    # a Windows VM without a pinned version runs machine version 5.1 ...
    win = conf + "ostype: win11\n"
    efi = {d.id: d for d in hostconfig.for_proxmox(win, STORAGE, "10.1")}["efidisk0"]
    assert efi.aio == "threads" and "Windows" in efi.sources["aio"]
    # ... or the QEMU it was created with, from 9.1 on
    win += "meta: creation-qemu=10.0.2,ctime=1755189639\n"
    efi = {d.id: d for d in hostconfig.for_proxmox(win, STORAGE, "10.1")}["efidisk0"]
    assert efi.aio == "io_uring"
    with pytest.raises(ValueError, match="not MAJOR.MINOR"):
        hostconfig.for_proxmox(conf, STORAGE, "ten")


def test_only_the_config_before_the_first_section_counts():
    conf = (
        "scsi0: local-lvm:vm-100-disk-0,size=8G\nscsihw: virtio-scsi-single\n"
        "\n[snap1]\nscsi0: local:100/vm-100-disk-9.qcow2,cache=unsafe\n"
        "scsi5: local-lvm:vm-100-disk-5\n"
    )
    disks = hostconfig.for_proxmox(conf, STORAGE)
    assert [d.id for d in disks] == ["scsi0"]
    assert disks[0].cache_mode == "none" and disks[0].storage_backend == "lvm-thin"
    assert disks[0].aio == "io_uring"


def test_missing_storage_is_said_not_guessed():
    conf = "scsi0: local-lvm:vm-100-disk-0\nscsi1: tank:vm-100-disk-1,cache=none\n"
    disks = {d.id: d for d in hostconfig.for_proxmox(conf)}
    assert disks["scsi0"].cache_mode == "unknown"  # BTRFS would be writeback
    assert "--storage-cfg" in disks["scsi0"].sources["cache_mode"]
    assert disks["scsi1"].cache_mode == "none"
    assert disks["scsi0"].aio == "unknown"
    with pytest.raises(ValueError, match="storage 'tank' is not in storage.cfg"):
        hostconfig.for_proxmox(conf, STORAGE)
    with pytest.raises(ValueError, match="no disk lines"):
        hostconfig.for_proxmox("cores: 2\nmemory: 512\n", STORAGE)


def test_cli_reads_qm_config_from_stdin_with_storage_cfg():
    import json
    import os
    import subprocess
    import sys

    samples = PVE.parent
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchdb_agent.cli",
            "host-config",
            "--proxmox-config",
            "-",
            "--storage-cfg",
            str(samples / "proxmox-storage.cfg"),
        ],
        input=(samples / "proxmox-qm-config.txt").read_text(),
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(PVE.parents[3] / "agent")),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    disks = {d["id"]: d for d in json.loads(proc.stdout)["disks"]}
    assert list(disks) == ["ide2", "scsi0", "scsi1", "virtio2"]
    assert disks["ide2"]["target"] is False and disks["ide2"]["kind"] == "cdrom"
    assert disks["scsi0"]["tags"]["aio_mode"] == "io_uring"
    assert disks["scsi0"]["tags"]["iothread"] == "yes"  # virtio-scsi-single
    assert disks["scsi0"]["tags"]["storage_backend"] == "lvm-thin"
    assert disks["scsi1"]["tags"]["aio_mode"] == "native"
    assert disks["virtio2"]["tags"]["storage_backend"] == "zfs"
    assert (
        disks["virtio2"]["sources"]["cache_mode"] == "set in the config (cache=unsafe)"
    )


def fake_scsi_disk(root, name, kind="0", cache_type="write back"):
    """A host SCSI disk's sysfs entries (no SCSI disk can be attached here)."""
    device = root / "class" / "block" / name / "device"
    (device / "scsi_disk" / "6:0:0:0").mkdir(parents=True)
    (device / "type").write_text(kind + "\n")
    (device / "scsi_disk" / "6:0:0:0" / "cache_type").write_text(cache_type + "\n")


def test_scsiblock_follows_the_host_disk(tmp_path, monkeypatch):
    from benchdb_agent.hostconfig import scsi

    monkeypatch.setattr(scsi, "SYSFS", str(tmp_path))
    conf = (PVE / "blockdev" / "scsiblk.conf").read_text()
    fake_scsi_disk(tmp_path, "sdg")
    disk = hostconfig.for_proxmox(conf, STORAGE, "10.0")[0]
    # scsi-block: SG_IO, no host page cache, the disk's write cache on
    assert (disk.cache_mode, disk.aio, disk.bus) == ("none", "threads", "scsi")
    assert "'write back' (sysfs cache_type)" in disk.sources["cache_mode"]
    assert "thread pool whatever aio= says" in disk.sources["aio"]
    assert "peripheral type 0" in disk.sources["aio"]
    # the command line qemu-server generates on such a host (DriveDevice.pm:
    # scsi-block gets neither device_id nor write-cache) reads the same
    cmd = (PVE / "blockdev" / "scsiblk.conf.cmd").read_text()
    cmd = cmd.replace("'scsi-hd,", "'scsi-block,").replace(",device_id=drive-scsi0", "")
    cmd = cmd.replace(",write-cache=on", "")
    (run,) = [d for d in hostconfig.for_qemu_cmdline(cmd) if d.kind == "disk"]
    assert (run.cache_mode, run.aio, run.bus) == ("none", "threads", "scsi")
    assert run.sources["cache_mode"] == disk.sources["cache_mode"]
    fake_scsi_disk(tmp_path / "wt", "sdg", cache_type="write through")
    monkeypatch.setattr(scsi, "SYSFS", str(tmp_path / "wt"))
    disk = hostconfig.for_proxmox(conf, STORAGE, "10.0")[0]
    assert (disk.cache_mode, disk.aio) == ("directsync", "threads")
    # a CD/DVD drive (type 5) is not a disk: qemu-server attaches scsi-hd
    fake_scsi_disk(tmp_path / "cd", "sdg", kind="5")
    monkeypatch.setattr(scsi, "SYSFS", str(tmp_path / "cd"))
    disk = hostconfig.for_proxmox(conf, STORAGE, "10.0")[0]
    assert (disk.cache_mode, disk.aio) == ("none", "io_uring")
    assert any("scsiblock=1 gives scsi-hd here" in n for n in disk.notes)
    # a storage volume: qemu-server asks INQUIRY only of a path
    vol = hostconfig.for_proxmox("scsi0: local-lvm:vm-1-disk-0,scsiblock=1\n", STORAGE)
    assert vol[0].aio == "io_uring"
    assert any("no effect on a storage volume" in n for n in vol[0].notes)
