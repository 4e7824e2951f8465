"""host-config on Xen: xl disk specs against Xen's own check-xl-disk-parse
cases, xl.cfg files and xl list -l JSON."""

import json
import re
import shlex
from pathlib import Path

import pytest

from benchdb_agent import hostconfig
from benchdb_agent.hostconfig import xen

XEN = Path(__file__).resolve().parent.parent / "samples" / "hostconfig" / "xen"


def xen_cases():
    """(rc, args, expected fields) from check-xl-disk-parse."""
    text = (XEN / "check-xl-disk-parse").read_text()
    text = text[text.index("#---------- test data") :]
    cases, expected = [], None
    lines = iter(text.splitlines())
    for line in lines:
        m = re.match(r"^expected\s*<<\s*(\w+)", line)
        if m:
            body = []
            for inner in lines:
                if inner == m.group(1):
                    break
                body.append(inner)
            block = "\n".join(body).strip()
            expected = json.loads(block[len("disk:") :]) if block else None
            continue
        if line.startswith("expected </dev/null"):
            expected = None
            continue
        m = re.match(r"^one (\$e|\d+) (.*)$", line)
        if m:
            rc = 1 if m.group(1) == "$e" else int(m.group(1))
            cases.append((rc, shlex.split(m.group(2)), expected))
    return cases


CASES = xen_cases()


def printed(disk: dict) -> dict:
    """The fields `xl -N block-attach` prints: those not at libxl's default."""
    out = {}
    for key in ("pdev_path", "vdev", "backend", "format", "script"):
        if disk.get(key) is not None:
            out[key] = disk[key]
    for key in ("removable", "readwrite", "is_cdrom"):
        if disk.get(key):
            out[key] = disk[key]
    for key in ("discard_enable", "trusted"):
        if disk.get(key) is not None:
            out[key] = "True" if disk[key] else "False"
    return out


def test_all_cases_were_read():
    assert len(CASES) >= 25
    assert sum(1 for rc, _, _ in CASES if rc) >= 1


@pytest.mark.parametrize(("rc", "args", "expected"), CASES, ids=lambda v: str(v))
def test_check_xl_disk_parse_case(rc, args, expected):
    if rc:
        with pytest.raises(ValueError):
            xen.parse_disk_spec(args)
        return
    got = printed(xen.parse_disk_spec(args))
    assert got == expected


def test_xl_cfg_reads_every_disk_with_backend_and_no_cache_setting():
    disks = {d.id: d for d in hostconfig.for_xl_cfg((XEN / "xl.cfg").read_text())}
    assert list(disks) == ["xvda", "xvdb", "xvdc", "xvdd", "hdc"]
    xvda = disks["xvda"]
    # HVM: disk 0 is also emulated by libxl's QEMU until PV drivers unplug it
    assert (xvda.bus, xvda.storage_backend, xvda.image_format) == (
        "unknown",
        "unknown",  # /dev/vg0/...: thin or thick is for lvs on the host to say
        "raw",
    )
    assert "emulates xvda as IDE" in xvda.sources["bus"]
    assert xvda.virtualization == "xen-hvm"
    assert xvda.cache_mode == "default" and xvda.aio == "default"
    assert "not configurable in Xen" in xvda.sources["cache_mode"]
    assert "blkback" in xvda.sources["cache_mode"]
    assert disks["xvdb"].path == "/srv/xen/data,1;2.qcow2"  # target= keeps , and ;
    assert disks["xvdb"].image_format == "qcow2"
    assert "qdisk is QEMU, run with no O_DIRECT" in disks["xvdb"].sources["cache_mode"]
    assert "with O_DIRECT" in disks["xvdc"].sources["cache_mode"] or (
        "blkback" in disks["xvdc"].sources["cache_mode"]
    )
    assert disks["xvdd"].path == "/srv/xen/qdisk.raw"  # \x2e escape in xl.cfg
    assert "qdisk" in disks["xvdd"].sources["cache_mode"]
    assert disks["hdc"].kind == "cdrom" and not disks["hdc"].is_target
    assert disks["hdc"].path == ""


def test_xl_cfg_errors():
    with pytest.raises(ValueError, match="no vdev specified"):
        hostconfig.for_xl_cfg("disk = [ '/dev/vg/x' ]\n")
    with pytest.raises(ValueError, match="unknown deprecated disk prefix"):
        hostconfig.for_xl_cfg("disk = [ 'foo:/dev/vg/x,xvda' ]\n")
    with pytest.raises(ValueError, match="no disk specs"):
        hostconfig.for_xl_cfg("disk = [ ]\n")


def test_xl_list_json_selects_by_vdev():
    disks = hostconfig.for_xl_json((XEN / "xl-list-l.json").read_text())
    assert [d.id for d in disks] == ["xvda", "xvdb", "xvdc"]
    xvdb = hostconfig.pick(disks, "xvdb")
    assert xvdb.image_format == "qcow2" and xvdb.virtualization == "xen-hvm"
    assert "qdisk" in xvdb.sources["cache_mode"]
    assert hostconfig.pick(disks, "xvdc").kind == "cdrom"
    with pytest.raises(ValueError, match="no disk 'xvdz'; the disks are: xvda"):
        hostconfig.pick(disks, "xvdz")
