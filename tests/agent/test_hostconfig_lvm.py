"""LVM-thin or thick LVM, asked of a real LVM (lvs) on a loop device.

The kernel here has no device-mapper, so nothing is activated: the volume
group lives on a loop device and LVM's own metadata says what each volume is.
Thick volumes are made by lvcreate; the thin pool and thin volumes cannot be
created without device-mapper, so they are written into the volume group's
metadata with vgcfgbackup / vgcfgrestore (LVM's own text format, as a thin
pool's metadata reads on any host).  lvs then reports them exactly as on a
host where they are active: segtype thin, thin-pool, linear.  host-config
reads the Qubes-style Xen domain and a QEMU command line whose disks are these
volumes, by both of their paths (/dev/VG/LV and /dev/mapper/VG-LV).

Needs root (losetup, pvcreate); lvm2 comes from scripts/system-deps.sh.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchdb_agent import hostconfig
from benchdb_agent.hostconfig import lvm

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root for a loop device and pvcreate"
)
LX = Path(__file__).resolve().parent.parent / "samples" / "hostconfig" / "libvirt-xen"
ENV = dict(os.environ, LVM_SUPPRESS_FD_WARNINGS="1", LC_ALL="C")
NO_DM = ["--driverloaded", "n"]  # no device-mapper in this kernel: metadata only


def run(*cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode == 0, (cmd, proc.stderr)
    return proc.stdout


def add_thin_pool(backup: Path, pool: str, thin: dict) -> None:
    """Turn LVs {pool}data / {pool}meta of a vgcfgbackup file into a thin
    pool's hidden sub-volumes ({pool}_tdata, {pool}_tmeta: lvcreate reserves
    those names) and add the pool and thin volumes ``thin`` (name -> extents)."""
    text = backup.read_text()
    for sub in ("tdata", "tmeta"):
        old = f"\t\t{pool}{sub[1:]} {{"
        text = text.replace(old, f"\t\t{pool}_{sub} {{")
        start = text.index(f"\t\t{pool}_{sub} {{")
        status = text.index('"VISIBLE"]', start)
        text = text[: status - 2] + "]" + text[status + len('"VISIBLE"]') :]
    blocks = [
        lv_block(
            pool,
            0,
            4,
            "thin-pool",
            metadata=f"{pool}_tmeta",
            pool=f"{pool}_tdata",
            transaction_id=len(thin),
            chunk_size=128,
            discards="passdown",
            zero_new_blocks=1,
        )
    ]
    for n, (name, extents) in enumerate(thin.items(), 1):
        blocks.append(
            lv_block(
                name,
                n,
                extents,
                "thin",
                thin_pool=pool,
                transaction_id=n - 1,
                device_id=n,
            )
        )
    at = text.index("\tlogical_volumes {\n") + len("\tlogical_volumes {\n")
    backup.write_text(text[:at] + "".join(blocks) + text[at:])


def lv_block(name: str, n: int, extents: int, segtype: str, **fields) -> str:
    """One visible LV of one segment, in LVM's metadata text format."""
    lines = [f'type = "{segtype}"']
    for key, value in fields.items():
        lines.append(
            f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}"
        )
    segment = "".join(f"\t\t\t\t{line}\n" for line in lines)
    return (
        f"\n\t\t{name} {{\n"
        f'\t\t\tid = "hctest-0000-0000-0000-0000-0000-{n:06d}"\n'
        '\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]\n'
        "\t\t\tflags = []\n"
        "\t\t\tsegment_count = 1\n"
        "\t\t\tsegment1 {\n"
        "\t\t\t\tstart_extent = 0\n"
        f"\t\t\t\textent_count = {extents}\n"
        f"{segment}\t\t\t}}\n\t\t}}\n"
    )


@pytest.fixture
def volume_group(tmp_path):
    """A VG on a loop device: thin volumes vm-work-root-snap and
    vm-work-private-snap in pool00, thick (linear) vm-work-volatile."""
    assert shutil.which("lvs"), "lvm2 is missing: run scripts/system-deps.sh"
    vg = f"hcq{os.getpid()}"
    image = tmp_path / "pv.img"
    with open(image, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    loop = run("losetup", "-f", "--show", str(image)).strip()
    try:
        run("pvcreate", "-q", loop)
        run("vgcreate", "-q", vg, loop)
        for name, size in (("vm-work-volatile", "8M"), ("pool00data", "16M")):
            run("lvcreate", *NO_DM, "-q", "-an", "-Zn", "-L", size, "-n", name, vg)
        run("lvcreate", *NO_DM, "-q", "-an", "-Zn", "-L", "4M", "-n", "pool00meta", vg)
        backup = tmp_path / "vg.txt"
        run("vgcfgbackup", "-q", "-f", str(backup), vg)
        add_thin_pool(
            backup, "pool00", {"vm-work-root-snap": 8, "vm-work-private-snap": 8}
        )
        run("vgcfgrestore", "-q", "--force", "-f", str(backup), vg)
        yield vg
    finally:
        subprocess.run(
            ["vgremove", *NO_DM, "-q", "-y", "-ff", vg], capture_output=True, env=ENV
        )
        subprocess.run(["pvremove", "-q", "-y", loop], capture_output=True, env=ENV)
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def test_lvs_tells_thin_from_thick_by_either_path(volume_group):
    vg = volume_group
    segtypes = {
        line.split("|")[0].strip(): line.split("|")[1].strip()
        for line in run(
            "lvs", "--noheadings", "--separator", "|", "-o", "lv_name,segtype", vg
        ).splitlines()
    }
    assert segtypes == {
        "pool00": "thin-pool",
        "vm-work-private-snap": "thin",
        "vm-work-root-snap": "thin",
        "vm-work-volatile": "linear",
    }
    assert lvm.backend(f"/dev/{vg}/vm-work-root-snap") == (
        "lvm-thin",
        f"lvs on this host: {vg}/vm-work-root-snap has segtype thin",
    )
    assert lvm.backend(f"/dev/mapper/{vg}-vm--work--private--snap")[0] == "lvm-thin"
    assert lvm.backend(f"/dev/mapper/{vg}-vm--work--volatile") == (
        "lvm",
        f"lvs on this host: {vg}/vm-work-volatile has segtype linear",
    )
    backend, why = lvm.backend(f"/dev/{vg}/no-such-volume")
    assert backend == "unknown" and "cannot be told from it" in why


def test_qubes_style_domain_and_qemu_command_line_on_those_volumes(volume_group):
    vg = volume_group
    xml = (LX / "qubes-style-pvh.xml").read_text().replace("qubes_dom0", vg)
    disks = {d.id: d for d in hostconfig.for_libvirt_xml(xml)}
    assert disks["xvda"].storage_backend == "lvm-thin"  # /dev/VG/LV
    assert disks["xvdb"].storage_backend == "lvm-thin"  # /dev/mapper/VG-LV
    assert disks["xvdc"].storage_backend == "lvm"  # thick
    assert re.match(
        r"lvs on this host: \S+ has segtype linear$",
        disks["xvdc"].sources["storage_backend"],
    )
    assert disks["xvdi"].storage_backend == "unknown"  # sys-usb's device
    cmd = (
        "qemu-system-x86_64 -machine q35 "
        f"-drive file=/dev/{vg}/vm-work-root-snap,if=virtio,format=raw,cache=none "
        f"-drive file=/dev/mapper/{vg}-vm--work--volatile,if=virtio,format=raw"
    )
    qemu = hostconfig.for_qemu_cmdline(cmd)
    assert [d.storage_backend for d in qemu] == ["lvm-thin", "lvm"]


def test_without_a_working_lvs_it_says_why():
    backend, why = lvm.backend("/dev/pve/vm-100-disk-0", lvs="no-such-lvs")
    assert backend == "unknown" and why.endswith("(no lvs here)")
    backend, why = lvm.backend("/dev/pve/vm-100-disk-0", lvs="false")
    assert backend == "unknown" and "lvs failed (run as root?)" in why
