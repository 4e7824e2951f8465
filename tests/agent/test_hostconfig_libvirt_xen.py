"""host-config on Xen domains described in libvirt XML (the libxl driver).

tests/samples/hostconfig/libvirt-xen/ holds libvirt's own
tests/libxlxml2domconfigdata cases: each NAME.xml is a <domain type='xen'> and
NAME.json the libxl_domain_config libvirt's test suite expects its libxl driver
to make of it (source, commits and licence in the README).  The XML reader
must give, disk for disk, what the xl reader gives for that libxl config: Xen
values (no cache or aio setting), not QEMU's.  qubes-style-pvh.xml is written
here in the form of Qubes OS's libvirt template.
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchdb_agent import hostconfig
from benchdb_agent.hostconfig import libvirt
from benchdb_agent.hostconfig.model import TAG_FIELDS

LX = Path(__file__).resolve().parent.parent / "samples" / "hostconfig" / "libvirt-xen"
CASES = sorted(p.stem for p in LX.glob("*.json"))
# tag -> Disk attribute, every tag but the platform (libvirt here, xen there)
TAGS = {tag: attr for tag, attr in TAG_FIELDS if tag != "platform"}


def test_cases_are_there():
    assert set(CASES) >= {"basic-pv", "basic-pvh", "moredevs-hvm"}


@pytest.mark.parametrize("name", CASES)
def test_xml_reader_agrees_with_the_libxl_config_libvirt_makes(name):
    import json

    xml_text = (LX / f"{name}.xml").read_text()
    expected = json.loads((LX / f"{name}.json").read_text())
    # the libxl disk fields, as libvirt's own test expects them
    made = [libvirt._libxl_disk(el) for el in ET.fromstring(xml_text).iter("disk")]
    assert len(made) == len(expected["disks"]) > 0
    for ours, theirs in zip(made, expected["disks"], strict=True):
        for key in ("pdev_path", "vdev", "backend", "format"):
            assert ours[key] == theirs[key], (name, key)
        for key in ("is_cdrom", "readwrite"):
            assert ours[key] == theirs.get(key, 0), (name, key)
    # and the values read from the XML are those read from that libxl config
    from_xml = hostconfig.for_libvirt_xml(xml_text)
    from_libxl = hostconfig.for_xl_json((LX / f"{name}.json").read_text())
    for x, j in zip(from_xml, from_libxl, strict=True):
        assert (x.id, x.kind, x.path) == (j.id, j.kind, j.path)
        assert x.platform == "libvirt" and j.platform == "xen"
        for tag, attr in TAGS.items():
            assert x.to_tags()[tag] == j.to_tags()[tag], (name, x.id, tag)
            assert x.sources[attr], (name, x.id, tag)
        # Xen has no cache or aio setting: never QEMU's writeback/threads
        assert (x.cache_mode, x.aio) == ("default", "default")
        assert "qdisk is QEMU, run with no O_DIRECT by libxl" in x.sources["cache_mode"]


def test_buses_by_domain_type():
    pv = hostconfig.for_libvirt_xml((LX / "basic-pv.xml").read_text())[0]
    assert (pv.bus, pv.virtualization) == ("xen-blkfront", "xen-pv")
    assert "vbd-interface.txt" in pv.sources["bus"]
    pvh = hostconfig.for_libvirt_xml((LX / "basic-pvh.xml").read_text())[0]
    assert (pvh.bus, pvh.virtualization) == ("xen-blkfront", "xen-hvm")
    hvm = hostconfig.for_libvirt_xml((LX / "moredevs-hvm.xml").read_text())
    # HVM: libxl's QEMU emulates hda beside the VBD; which one the guest uses
    # depends on its PV drivers, which the host cannot see
    assert hvm[0].bus == "unknown" and "emulates hda as IDE" in hvm[0].sources["bus"]
    assert hvm[1].kind == "cdrom" and not hvm[1].is_target
    # cache='default' asks for nothing, so nothing is said to be ignored
    assert not any("is not passed to Xen" in n for n in hvm[0].notes)


XML = """<domain type='xen'>
  <os><type>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='writeback' io='native'/>
      <source file='/srv/xen/a.qcow2'/>
      <target dev='xvda'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='tap' type='vhd'/>
      <source file='/srv/xen/b.vhd'/>
      <target dev='xvde'/>
    </disk>
    <disk type='file' device='disk'>
      <source file='/srv/xen/c.img'/>
      <target dev='sdb'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='hdc'/>
    </disk>
  </devices>
</domain>"""


def test_libxl_driver_rules_and_ignored_qemu_settings():
    disks = {d.id: d for d in hostconfig.for_libvirt_xml(XML)}
    a = disks["xvda"]
    assert (a.cache_mode, a.aio, a.image_format) == ("default", "default", "qcow2")
    assert any("cache='writeback' is not passed to Xen" in n for n in a.notes)
    assert any("io='native' is not passed to Xen" in n for n in a.notes)
    assert a.bus == "unknown"  # disk 0 of an HVM domain: also emulated
    b = disks["xvde"]  # disk 4: libxl emulates only the first four
    assert b.bus == "xen-blkfront" and "VBD only" in b.sources["bus"]
    assert b.image_format == "vhd" and any("backend tap" in n for n in b.notes)
    c = disks["sdb"]  # no driver name: raw, libxl picks the backend (phy)
    assert c.image_format == "raw" and "blkback" in c.sources["cache_mode"]
    assert "SCSI" in c.sources["bus"]
    assert disks["hdc"].kind == "cdrom" and disks["hdc"].path == ""
    with pytest.raises(ValueError, match="does not support disk driver nbd"):
        hostconfig.for_libvirt_xml(XML.replace("name='tap'", "name='nbd'"))
    with pytest.raises(ValueError, match="format qcow2 with disk driver phy"):
        hostconfig.for_libvirt_xml(
            XML.replace("name='qemu' type='qcow2'", "name='phy' type='qcow2'")
        )


def test_qubes_style_pvh_domain_on_device_mapper():
    disks = {
        d.id: d
        for d in hostconfig.for_libvirt_xml((LX / "qubes-style-pvh.xml").read_text())
    }
    assert list(disks) == ["xvda", "xvdb", "xvdc", "xvdd", "xvdi"]
    for d in disks.values():
        assert (d.bus, d.virtualization) == ("xen-blkfront", "xen-hvm")
        assert (d.cache_mode, d.aio, d.image_format) == ("default", "default", "raw")
        assert "phy is the dom0 kernel's blkback" in d.sources["cache_mode"]
    # /dev/mapper and /dev/VG/LV paths: thin or thick is LVM's to say, and this
    # machine has no such volume, so it is unknown (the LVM test asks a real lvs)
    for vdev in ("xvda", "xvdb", "xvdc"):
        assert disks[vdev].storage_backend == "unknown"
        assert "cannot be told from it" in disks[vdev].sources["storage_backend"]
    assert disks["xvdd"].storage_backend == "file"
    usb = disks["xvdi"]  # a device of the sys-usb domain, not of dom0
    assert usb.storage_backend == "unknown"
    assert "driver domain 'sys-usb'" in usb.sources["storage_backend"]
