"""host-config on libvirt domain XML, checked against what libvirt generates.

tests/samples/hostconfig/libvirt/ holds libvirt's own qemuxmlconfdata cases:
domain XML and the .x86_64-latest.args command line libvirt generates from it
(source and licence in its README).  Expected values are what QEMU runs for
the generated command line, by the QEMU rule (test_hostconfig_live.py proves
that rule against real QEMU).
"""

from pathlib import Path

import pytest

from benchdb_agent import hostconfig

LV = Path(__file__).resolve().parent.parent / "samples" / "hostconfig" / "libvirt"
CASES = sorted(p.stem for p in LV.glob("*.xml"))
COMPARED = (
    "virtualization",
    "cache_mode",
    "aio_mode",
    "image_format",
    "disk_bus",
    "iothread",
    "storage_backend",
)


@pytest.mark.parametrize("name", CASES)
def test_xml_reader_agrees_with_the_generated_command_line(name):
    xml = hostconfig.for_libvirt_xml((LV / f"{name}.xml").read_text())
    cmd = hostconfig.for_qemu_cmdline((LV / f"{name}.x86_64-latest.args").read_text())
    # libvirt emits one -device per <disk>, in document order
    assert len(xml) == len(cmd) > 0
    for ours, run in zip(xml, cmd, strict=True):
        assert ours.path == run.path  # the same disk
        for tag in COMPARED:
            assert ours.to_tags()[tag] == run.to_tags()[tag], (ours.id, tag)
        assert ours.sources["cache_mode"] and ours.sources["aio"]


def test_cases_cover_the_hard_parts():
    assert set(CASES) >= {"disk-cache", "iothreads-disk", "disk-nvme"}
    cache = {
        d.id: d for d in hostconfig.for_libvirt_xml((LV / "disk-cache.xml").read_text())
    }
    assert cache["vda"].cache_mode == "writethrough"
    assert cache["vda"].storage_backend == "iscsi"  # /dev/disk/by-path/ip-...-iscsi-
    assert cache["sdb"].bus == "usb"
    assert cache["sda"].bus == "scsi"  # no controller model: lsi
    sata = hostconfig.for_libvirt_xml((LV / "disk-sata-device.xml").read_text())[0]
    assert sata.cache_mode == "writeback"  # cache='default' is QEMU's default
    assert "cache='default'" in sata.sources["cache_mode"]
    assert sata.image_format == "raw"  # no driver type
    assert sata.aio == "threads"  # no io=
    lun = hostconfig.for_libvirt_xml((LV / "disk-scsi-lun-passthrough.xml").read_text())
    assert [d.bus for d in lun] == ["virtio-scsi", "virtio-scsi"]
    assert all(d.is_target for d in lun)
    # device='lun' is scsi-block: SG_IO in QEMU's thread pool, and the host
    # disk's own write cache, which is not on this machine
    assert [(d.aio, d.cache_mode) for d in lun] == [("threads", "unknown")] * 2
    assert "not a SCSI disk of this machine" in lun[0].sources["cache_mode"]
    io = {
        d.id: d
        for d in hostconfig.for_libvirt_xml((LV / "iothreads-disk.xml").read_text())
    }
    assert io["vdb"].iothread_id == "iothread1"
    assert io["vdc"].iothread_id == "iothread2,iothread3"
    nvme = hostconfig.for_libvirt_xml((LV / "disk-nvme.xml").read_text())
    assert nvme[0].aio == "default" and nvme[3].cache_mode == "none"


XML = """<domain type='kvm'>
  <iothreads>2</iothreads>
  <os><type arch='x86_64' machine='pc-q35-8.2'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='none' io='native'/>
      <source file='/var/lib/libvirt/images/a.qcow2'/>
      <target dev='sda' bus='scsi'/>
      <alias name='scsi0-0-0-0'/>
    </disk>
    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback'/>
      <source protocol='rbd' name='pool/img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <source file='/var/lib/libvirt/images/b.img'/>
      <target dev='sdb' bus='sata'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sdc' bus='sata'/>
      <readonly/>
    </disk>
    <controller type='scsi' index='0' model='virtio-scsi'>
      <driver iothread='2'/>
    </controller>
  </devices>
</domain>"""


def test_defaults_controllers_and_cdroms():
    disks = {d.id: d for d in hostconfig.for_libvirt_xml(XML)}
    sda = disks["sda"]
    assert sda.bus == "virtio-scsi" and sda.iothread == "yes"
    assert sda.iothread_id == "iothread2"
    assert sda.cache_mode == "none" and sda.aio == "native"
    assert sda.virtualization == "kvm"
    assert hostconfig.pick(list(disks.values()), "scsi0-0-0-0") is sda
    vda = disks["vda"]
    assert vda.storage_backend == "ceph-rbd" and vda.aio == "default"
    sdb = disks["sdb"]
    assert (sdb.image_format, sdb.aio, sdb.cache_mode) == (
        "raw",
        "threads",
        "writeback",
    )
    assert disks["sdc"].kind == "cdrom" and not disks["sdc"].is_target
    with pytest.raises(ValueError, match="not libvirt domain XML"):
        hostconfig.for_libvirt_xml("<domain")
    with pytest.raises(ValueError, match="no <disk>"):
        hostconfig.for_libvirt_xml("<domain type='kvm'><devices/></domain>")


def test_throttle_filters_are_said_on_both_sides():
    # libvirt's <throttlefilters> become chains of throttle nodes (over a
    # copy-on-read filter for vdc); the cache flags are the protocol node's
    xml = hostconfig.for_libvirt_xml((LV / "throttlefilter.xml").read_text())
    cmd = hostconfig.for_qemu_cmdline(
        (LV / "throttlefilter.x86_64-latest.args").read_text()
    )
    for ours, run in zip(xml, cmd, strict=True):
        assert (ours.cache_mode, run.cache_mode) == ("none", "none")
        assert (ours.image_format, run.image_format) == ("qcow2", "qcow2")
    assert (
        "throttle -> throttle -> copy-on-read -> qcow2 -> host_device"
        in (cmd[2].sources["cache_mode"])
    )
    groups = [[n.split(":")[0].rsplit(" ", 1)[-1] for n in d.notes] for d in cmd]
    assert groups == [
        ["throttle-limit0"],
        ["throttle-limit12", "throttle-limit1"],
        ["throttle-limit12", "throttle-limit2"],
        [],
    ]
    assert cmd[0].notes == [
        "throttled by throttle-group throttle-limit0: bps-total=4000, iops-total=4000"
    ]
    assert xml[0].notes == [
        "throttled by throttle group limit0: total_bytes_sec=4000, total_iops_sec=4000"
    ]
    assert xml[3].notes == [
        "throttled by <iotune>: read_iops_sec=400000, "
        "total_bytes_sec=10000000, write_iops_sec=100000"
    ]


def test_virtio_scsi_controller_iothread_mapping():
    xml = XML.replace(
        "<driver iothread='2'/>",
        "<driver queues='3'><iothreads><iothread id='2'><queue id='1'/></iothread>"
        "<iothread id='3'><queue id='0'/><queue id='2'/></iothread></iothreads>"
        "</driver>",
    )
    sda = hostconfig.pick(hostconfig.for_libvirt_xml(xml), "sda")
    assert (sda.iothread, sda.iothread_id) == ("yes", "iothread2,iothread3")
    assert "<driver><iothreads>" in sda.sources["iothread"]
