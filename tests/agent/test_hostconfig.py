"""host-config: effective disk settings from QEMU command lines, and --disk."""

import json
from pathlib import Path

import pytest

from benchdb_agent import hostconfig, vocab
from benchdb_agent.hostconfig import qemu

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "hostconfig"
REPO = Path(__file__).resolve().parents[2]


def text(name: str) -> str:
    return (SAMPLES / name).read_text()


def by_id(disks):
    return {d.id: d for d in disks}


# -- the cache rule -----------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ((True, False, False), "writeback"),
        ((True, True, False), "none"),
        ((False, False, False), "writethrough"),
        ((False, True, False), "directsync"),
        ((True, False, True), "unsafe"),
        ((True, True, True), "unsafe"),
        ((False, False, True), "unsafe"),
    ],
)
def test_cache_mode_from_flags(flags, mode):
    assert hostconfig.cache_mode(*flags) == mode


@pytest.mark.parametrize(
    ("cache", "write_cache", "expected"),
    [
        ("none", None, "none"),
        ("none", "off", "directsync"),  # the device's write-cache wins
        ("writethrough", "on", "writeback"),
        ("directsync", "on", "none"),
        ("writeback", "off", "writethrough"),
        ("unsafe", None, "unsafe"),
        (None, None, "writeback"),  # -drive without cache= is writeback
        (None, "off", "writethrough"),
    ],
)
def test_drive_cache_with_device_write_cache(cache, write_cache, expected):
    drive = "file=/img/d.raw,format=raw,if=none,id=d0" + (
        f",cache={cache}" if cache else ""
    )
    dev = "virtio-blk-pci,drive=d0,id=vd0" + (
        f",write-cache={write_cache}" if write_cache else ""
    )
    (disk,) = hostconfig.for_qemu_cmdline(
        ["qemu-system-x86_64", "-drive", drive, "-device", dev]
    )
    assert disk.cache_mode == expected
    if write_cache and expected != (cache or "writeback"):
        assert disk.sources["cache_mode"].startswith(
            "the device's write-cache overrides the drive"
        )
    assert disk.bus == "virtio-blk"
    assert disk.aliases == ["vd0"]


def test_drive_single_cache_flags_override_cache_mode():
    (disk,) = hostconfig.for_qemu_cmdline(
        "qemu-system-x86_64 -drive file=/i.raw,if=virtio,cache=writeback,"
        "cache.direct=on,aio=native"
    )
    assert disk.cache_mode == "none"
    assert disk.aio == "native"
    assert "cache.direct=on" in disk.sources["cache_mode"]


# -- -blockdev chains -----------------------------------------------------------

PVE_BLOCKDEV = (
    '{"detect-zeroes":"unmap","discard":"unmap","driver":"throttle","file":'
    '{"cache":{"direct":true,"no-flush":false},"driver":"raw","file":{"aio":'
    '"native","cache":{"direct":true,"no-flush":false},"driver":"host_device",'
    '"filename":"/dev/pve/vm-100-disk-0","node-name":"e1"},"node-name":"f1"},'
    '"node-name":"drive-scsi0","throttle-group":"throttle-drive-scsi0"}'
)


def test_blockdev_follows_throttle_to_format_to_protocol():
    (disk,) = hostconfig.for_qemu_cmdline(
        [
            "/usr/bin/kvm",
            "-id",
            "100",
            "-device",
            "virtio-scsi-pci,id=virtioscsi0,iothread=iothread-virtioscsi0",
            "-blockdev",
            PVE_BLOCKDEV,
            "-device",
            "scsi-hd,bus=virtioscsi0.0,drive=drive-scsi0,id=scsi0,write-cache=on",
        ]
    )
    assert disk.id == "drive-scsi0" and "scsi0" in disk.aliases
    assert disk.cache_mode == "none"  # not the throttle node's absent flags
    assert disk.aio == "native"
    assert disk.image_format == "raw"
    # /dev/pve/...: thin or thick is LVM's to say, and no lvs here knows it
    assert disk.storage_backend == "unknown"
    assert "cannot be told from it" in disk.sources["storage_backend"]
    assert disk.bus == "virtio-scsi"
    assert disk.iothread == "yes" and disk.iothread_id == "iothread-virtioscsi0"
    assert disk.platform == "proxmox" and disk.virtualization == "kvm"


def test_blockdev_key_value_chain_by_node_name_and_absent_flags_are_off():
    argv = [
        "qemu-system-x86_64",
        "-accel",
        "kvm",
        "-blockdev",
        "driver=file,filename=/img/a.qcow2,node-name=proto0,aio=io_uring",
        "-blockdev",
        "driver=qcow2,file=proto0,node-name=fmt0",
        "-device",
        "virtio-blk-pci,drive=fmt0,id=vd0",
        "-blockdev",
        "driver=file,filename=/img/b.raw,node-name=proto1,cache.direct=on",
        "-blockdev",
        "driver=raw,file=proto1,node-name=fmt1",
        "-device",
        "virtio-blk-pci,drive=fmt1,id=vd1,write-cache=off",
        "-blockdev",
        "driver=qcow2,node-name=fmt2,file.driver=file,file.filename=/img/c.qcow2,"
        "cache.no-flush=on",
        "-device",
        "scsi-hd,drive=fmt2,id=sd2",
    ]
    disks = by_id(hostconfig.for_qemu_cmdline(argv))
    assert list(disks) == ["fmt0", "fmt1", "fmt2"]  # protocol nodes are not disks
    assert disks["fmt0"].cache_mode == "writeback"  # absent flags: off; auto: on
    assert disks["fmt0"].image_format == "qcow2"
    assert disks["fmt0"].aio == "io_uring"
    assert disks["fmt1"].cache_mode == "directsync"
    # an inline child inherits cache.no-flush from its parent
    assert disks["fmt2"].cache_mode == "unsafe"
    assert disks["fmt2"].aio == "threads"
    assert disks["fmt2"].bus == "scsi"  # no SCSI controller named


def test_mixed_drive_and_blockdev_each_disk_its_own_values():
    argv = [
        "qemu-system-x86_64",
        "-drive",
        "file=/img/boot.qcow2,format=qcow2,if=none,id=boot,cache=unsafe",
        "-device",
        "virtio-blk-pci,drive=boot,id=vd0",
        "-blockdev",
        '{"driver":"file","filename":"/img/bench.raw","node-name":"p",'
        '"cache":{"direct":true}}',
        "-blockdev",
        '{"driver":"raw","file":"p","node-name":"bench","cache":{"direct":true}}',
        "-device",
        "virtio-blk-pci,drive=bench,id=vd1",
        "-drive",
        "file=/img/data.raw,format=raw,if=virtio,aio=native,cache=directsync",
    ]
    disks = by_id(hostconfig.for_qemu_cmdline(argv))
    assert disks["boot"].cache_mode == "unsafe"
    assert disks["boot"].image_format == "qcow2"
    assert disks["bench"].cache_mode == "none"
    assert disks["bench"].path == "/img/bench.raw"
    assert disks["virtio0"].cache_mode == "directsync"
    assert disks["virtio0"].aio == "native"
    assert disks["virtio0"].bus == "virtio-blk"


def test_legacy_drives_without_device():
    argv = (
        "qemu-system-x86_64 -M q35 -drive file=/i/a.raw,if=virtio,format=raw "
        "-drive file=/i/b.raw,if=ide,format=raw -cdrom /i/x.iso "
        "-drive if=pflash,unit=0,readonly=on,file=/fw/CODE.fd "
        "-drive if=pflash,unit=1,file=/fw/VARS.fd"
    )
    disks = by_id(hostconfig.for_qemu_cmdline(argv))
    assert disks["virtio0"].bus == "virtio-blk"
    assert disks["ide0-hd0"].bus == "sata"  # q35: -drive if=ide is on AHCI
    assert disks["ide1-cd0"].kind == "cdrom" and not disks["ide1-cd0"].is_target
    assert disks["pflash1"].kind == "efivars"
    assert disks["pflash0"].kind == "pflash"
    pc = hostconfig.for_qemu_cmdline("qemu-system-x86_64 -drive file=/i,if=ide")
    assert pc[0].bus == "ide" and pc[0].id == "ide0-hd0"


def test_buses():
    base = "qemu-system-x86_64 -drive file=/img/d,format=raw,if=none,id=d1,cache=none"
    (scsi,) = hostconfig.for_qemu_cmdline(
        base + " -device virtio-scsi-pci,id=s0 -device scsi-hd,drive=d1,bus=s0.0"
    )
    assert scsi.bus == "virtio-scsi"
    (lsi,) = hostconfig.for_qemu_cmdline(
        base + " -device lsi,id=scsihw0 -device scsi-hd,drive=d1,bus=scsihw0.0"
    )
    assert lsi.bus == "scsi"
    (ahci,) = hostconfig.for_qemu_cmdline(
        base + " -device ich9-ahci,id=ahci0 -device ide-hd,drive=d1,bus=ahci0.0"
    )
    assert ahci.bus == "sata"
    (q35,) = hostconfig.for_qemu_cmdline(
        base + " -machine q35 -device ide-hd,drive=d1,bus=ide.0"
    )
    assert q35.bus == "sata"
    (nvme,) = hostconfig.for_qemu_cmdline(
        base + " -device nvme,drive=d1,serial=x,id=nv0"
    )
    assert nvme.bus == "nvme"


@pytest.mark.parametrize(
    ("cmdline", "virt"),
    [
        ("/usr/bin/kvm -drive file=/i,if=virtio", "kvm"),
        ("qemu-system-x86_64 -enable-kvm -drive file=/i,if=virtio", "kvm"),
        ("qemu-system-x86_64 -machine pc,accel=kvm -drive file=/i,if=virtio", "kvm"),
        ("qemu-system-x86_64 -accel kvm -drive file=/i,if=virtio", "kvm"),
        ("qemu-system-x86_64 -drive file=/i,if=virtio", "qemu-tcg"),
        ("qemu-system-x86_64 -accel tcg -drive file=/i,if=virtio", "qemu-tcg"),
        ("/usr/bin/kvm -accel tcg -drive file=/i,if=virtio", "qemu-tcg"),
    ],
)
def test_virtualization(cmdline, virt):
    assert hostconfig.for_qemu_cmdline(cmdline)[0].virtualization == virt


# -- command lines from files ---------------------------------------------------


def test_command_line_files_in_every_form():
    argv = [
        "/usr/bin/qemu-system-x86_64",
        "-drive",
        "file=/img/a b.raw,format=raw,if=none,id=d0,cache=none",
        "-device",
        "virtio-blk-pci,drive=d0",
    ]
    shell = (
        "LC_ALL=C \\\nPATH=/bin \\\nHOME=/var/lib/libvirt/qemu \\\n"
        "/usr/bin/qemu-system-x86_64 \\\n"
        "-drive 'file=/img/a b.raw,format=raw,if=none,id=d0,cache=n\\\none' \\\n"
        "-device virtio-blk-pci,drive=d0\n"
    )
    assert qemu.split_command(shell) == argv
    assert qemu.split_command("\0".join(argv) + "\0") == argv
    assert qemu.split_command("\n".join(argv) + "\n") == argv
    assert qemu.split_command("env A=1 " + " ".join(map(repr, argv))) == argv
    with pytest.raises(ValueError, match="cannot split"):
        qemu.split_command("qemu -drive 'file=/x")


def test_libvirt_blockdev_sample_reads_every_disk():
    argv = text("qemu-blockdev.argv").splitlines()
    (disk,) = hostconfig.for_qemu_cmdline(argv)
    assert disk.cache_mode == "none"  # direct=on, no-flush=off, write-cache=on
    assert disk.image_format == "qcow2"
    assert disk.virtualization == "kvm"
    assert disk.bus == "virtio-blk"
    assert disk.id == "libvirt-2-format" and "virtio-disk0" in disk.aliases


# -- --disk and output ------------------------------------------------------------


def test_select_never_answers_for_another_disk():
    disks = hostconfig.for_qemu_cmdline(
        "qemu-system-x86_64 -drive file=/a,if=virtio -drive file=/b,if=virtio"
    )
    assert hostconfig.pick(disks, "virtio1").path == "/b"
    with pytest.raises(ValueError, match=r"no disk 'vdz'; the disks are: virtio0, "):
        hostconfig.pick(disks, "vdz")


def test_cli_unknown_disk_is_an_error_listing_ids(agent, tmp_path):
    cmd = tmp_path / "cmd"
    cmd.write_text(
        "qemu-system-x86_64 -drive file=/a,if=none,id=os -device virtio-blk-pci,"
        "drive=os \\\n -drive file=/b,if=none,id=bench,cache=none "
        "-device virtio-blk-pci,drive=bench\n"
    )
    bad = agent("host-config", "--qemu-cmdline-file", str(cmd), "--disk", "nope")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "no disk 'nope'; the disks are: os, bench" in bad.stderr
    good = agent(
        "host-config",
        "--qemu-cmdline-file",
        "-",
        "--disk",
        "bench",
        stdin=cmd.read_text(),
    )
    assert good.returncode == 0, good.stderr
    doc = json.loads(good.stdout)
    assert doc["id"] == "bench" and doc["tags"]["cache_mode"] == "none"
    assert doc["sources"]["cache_mode"].startswith("set in the config")
    every = json.loads(agent("host-config", "--qemu-cmdline-file", str(cmd)).stdout)
    assert [d["id"] for d in every["disks"]] == ["os", "bench"]


def test_tags_output_is_shell_safe_and_valid(agent, tmp_path):
    out = agent(
        "host-config",
        "--qemu-cmdline",
        "qemu-system-x86_64 -drive 'file=/i;rm -rf x,if=virtio,cache=none'",
        "--format",
        "tags",
    )
    assert out.returncode == 0, out.stderr
    import shlex

    words = shlex.split(out.stdout)
    assert words[0::2] == ["--tag"] * (len(words) // 2)
    for word in words[1::2]:
        key, value = word.split("=", 1)
        assert value in vocab.values(vocab.TAG_VOCABULARIES[key])


# -- QMP JSON ------------------------------------------------------------------
# Replies of a paused QEMU 7.2 started here with a Proxmox-style throttle ->
# qcow2 -> file chain (cache.direct on), a -drive cache=writethrough on q35 AHCI
# and an empty CD-ROM; file names replaced (tests/samples/hostconfig/README.md).


def test_qmp_json_follows_the_node_graph_to_the_protocol_node():
    disks = by_id(hostconfig.for_qmp(text("qmp/proxmox-like-all.json")))
    assert list(disks) == ["drive-sata0", "drive-ide2", "drive-virtio0"]
    virtio = disks["drive-virtio0"]
    assert virtio.cache_mode == "none"  # the throttle root says direct=false
    assert "protocol node e0" in virtio.sources["cache_mode"]
    assert virtio.image_format == "qcow2"
    assert virtio.aliases == ["virtio0"]
    assert virtio.aio == "unknown" and "does not report aio" in virtio.sources["aio"]
    assert virtio.virtualization == "qemu-tcg"  # query-kvm enabled=false
    assert virtio.bus == "virtio-blk"  # qdev .../virtio-backend
    assert disks["drive-sata0"].bus == "unknown"  # query-block does not say
    assert disks["drive-sata0"].cache_mode == "writethrough"
    assert disks["drive-sata0"].storage_backend == "unknown"  # /dev/pve/...
    assert disks["drive-ide2"].kind == "cdrom"


def test_qmp_json_without_graph_matches_protocol_node_by_file_name():
    disks = by_id(hostconfig.for_qmp(text("qmp/proxmox-like-no-graph.json")))
    assert disks["drive-virtio0"].cache_mode == "none"


def test_qmp_query_block_alone_does_not_guess_under_a_throttle_node():
    disks = by_id(hostconfig.for_qmp(text("qmp/proxmox-like-query-block.json")))
    assert disks["drive-virtio0"].cache_mode == "unknown"
    assert "throttle" in disks["drive-virtio0"].sources["cache_mode"]
    assert disks["drive-sata0"].cache_mode == "writethrough"
    with pytest.raises(ValueError, match="no query-block reply"):
        hostconfig.for_qmp('{"return": {"enabled": true, "present": true}}')
    with pytest.raises(ValueError, match="not QMP JSON"):
        hostconfig.for_qmp("{nope")


@pytest.mark.parametrize(
    "replies",
    [
        (
            "query-block",
            "query-named-block-nodes",
            "x-debug-query-block-graph",
            "query-kvm",
        ),
        ("query-block", "query-named-block-nodes"),
        ("query-block",),
    ],
)
def test_qmp_no_format_layer_is_raw(replies):
    # a real QEMU 7.2's replies for -blockdev driver=file attached straight to
    # virtio-blk (no format node, as libvirt generates for a raw file): the
    # guest reads the protocol node's bytes, which is what raw means
    every = json.loads(text("qmp/no-format-layer.json"))
    disk = hostconfig.for_qmp({k: every[k] for k in replies})[0]
    assert every["query-block"][0]["inserted"]["drv"] == "file"
    assert disk.image_format == "raw"
    assert (
        "no format node above the file protocol node" in (disk.sources["image_format"])
    )
    # the root is the protocol node, so its flags are the ones that do host I/O
    assert disk.cache_mode == "writeback"
    assert "protocol node libvirt-1-storage (file)" in disk.sources["cache_mode"]
    assert disk.bus == "virtio-blk"


def test_cli_qmp_json_from_stdin(agent):
    out = agent(
        "host-config",
        "--qmp-json",
        "-",
        "--disk",
        "virtio0",
        "--format",
        "tags",
        stdin=text("qmp/proxmox-like-all.json"),
    )
    assert out.returncode == 0, out.stderr
    assert "--tag cache_mode=none" in out.stdout


def test_qmp_socket_that_never_greets_is_a_clear_error(tmp_path):
    import socket

    path = tmp_path / "busy.qmp"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)  # accepts into the backlog, never speaks: a busy monitor
    try:
        with pytest.raises(ValueError, match="no answer"):
            hostconfig.for_qmp_socket(str(path), timeout=0.5)
        with pytest.raises(ValueError, match="cannot connect"):
            hostconfig.for_qmp_socket(str(tmp_path / "absent.qmp"), timeout=0.5)
    finally:
        server.close()


def test_cli_reads_the_written_libvirt_and_xl_samples(agent):
    out = agent("host-config", "--libvirt-xml", str(SAMPLES / "libvirt-domain.xml"))
    assert out.returncode == 0, out.stderr
    disks = {d["id"]: d for d in json.loads(out.stdout)["disks"]}
    assert disks["vda"]["tags"]["cache_mode"] == "writeback"  # no cache=
    assert disks["vda"]["tags"]["aio_mode"] == "threads"  # no io=
    assert disks["sda"]["tags"]["disk_bus"] == "virtio-scsi"
    assert disks["sdb"]["target"] is False
    bad = agent(
        "host-config", "--xl-json", str(SAMPLES / "xl-list-l.json"), "--disk", "xvdb"
    )
    assert bad.returncode == 2 and "the disks are: xvda" in bad.stderr
    good = agent(
        "host-config", "--xl-json", str(SAMPLES / "xl-list-l.json"), "--disk", "xvda"
    )
    tags = json.loads(good.stdout)["tags"]
    assert tags["cache_mode"] == "default" and tags["virtualization"] == "xen-pv"


def every_sample():
    pve = SAMPLES / "proxmox"
    storage = (pve / "storage.cfg").read_text()
    for f in sorted(pve.glob("*/*.conf")):
        yield f, hostconfig.for_proxmox(f.read_text(), storage)
    for f in sorted([*pve.glob("*/*.cmd"), *(SAMPLES / "libvirt").glob("*.args")]):
        yield f, hostconfig.for_qemu_cmdline(f.read_text())
    for f in sorted((SAMPLES / "libvirt").glob("*.xml")):
        yield f, hostconfig.for_libvirt_xml(f.read_text())
    for f in sorted((SAMPLES / "libvirt-xen").glob("*.xml")):
        yield f, hostconfig.for_libvirt_xml(f.read_text())
    for f in sorted((SAMPLES / "libvirt-xen").glob("*.json")):
        yield f, hostconfig.for_xl_json(f.read_text())
    for f in sorted((SAMPLES / "qmp").glob("*.json")):
        yield f, hostconfig.for_qmp(f.read_text())
    yield "xl.cfg", hostconfig.for_xl_cfg((SAMPLES / "xen" / "xl.cfg").read_text())
    xl = (SAMPLES / "xen" / "xl-list-l.json").read_text()
    yield "xl-list-l.json", hostconfig.for_xl_json(xl)


def test_every_value_of_every_disk_of_every_sample_says_where_it_came_from():
    count = 0
    for name, disks in every_sample():
        ids = [d.id for d in disks]
        assert len(ids) == len(set(ids)), name
        for disk in disks:
            doc = disk.to_dict()
            missing = [t for t in doc["tags"] if t != "platform"]
            missing = [t for t in missing if not doc["sources"].get(t)]
            assert not missing, (name, disk.id, missing)
            for tag, attr in (
                ("cache_mode", "cache_mode"),
                ("aio_mode", "aio"),
                ("disk_bus", "bus"),
                ("image_format", "image_format"),
                ("storage_backend", "storage_backend"),
                ("virtualization", "virtualization"),
            ):
                value = getattr(disk, attr)  # before to_tags() maps strays
                assert value in vocab.values(vocab.TAG_VOCABULARIES[tag]), (
                    name,
                    disk.id,
                    tag,
                    value,
                )
            count += 1
    assert count > 150


def test_tags_for_every_disk_stay_comments_and_quoted_words(agent, tmp_path):
    cmd = tmp_path / "cmd"
    argv = [
        "qemu-system-x86_64",
        "-drive",
        "file=/a,if=none,id=x\nrm -rf ~",  # a real newline, as /proc gives it
        "-device",
        "virtio-blk-pci,drive=x\nrm -rf ~",
        "-drive",
        "file=/b,if=virtio",
    ]
    cmd.write_text("\0".join(argv) + "\0")
    out = agent("host-config", "--qemu-cmdline-file", str(cmd), "--format", "tags")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4
    assert all(ln.startswith(("# ", "--tag ")) for ln in lines)


def test_iothread_vq_mapping_on_virtio_scsi():
    # QEMU 10.0's virtio-scsi takes the same iothread-vq-mapping as virtio-blk
    mapping = '[{"iothread":"io1","vqs":[0,2]},{"iothread":"io2","vqs":[1,3]}]'
    (disk,) = hostconfig.for_qemu_cmdline(
        [
            "qemu-system-x86_64",
            "-object",
            "iothread,id=io1",
            "-object",
            "iothread,id=io2",
            "-device",
            '{"driver":"virtio-scsi-pci","id":"scsi0","num_queues":4,'
            f'"iothread-vq-mapping":{mapping}}}',
            "-blockdev",
            '{"driver":"file","filename":"/srv/a.raw","node-name":"a"}',
            "-device",
            '{"driver":"scsi-hd","bus":"scsi0.0","drive":"a","id":"sda"}',
        ]
    )
    assert (disk.bus, disk.iothread, disk.iothread_id) == (
        "virtio-scsi",
        "yes",
        "io1,io2",
    )
    assert "virtio-scsi-pci iothread-vq-mapping" in disk.sources["iothread"]


def test_unknown_flags_do_not_swallow_the_next_option():
    disks = hostconfig.for_qemu_cmdline(
        "qemu-system-x86_64 -s -drive file=/a,if=virtio,cache=none -no-frob "
        "-drive file=/b,if=virtio"
    )
    assert [d.cache_mode for d in disks] == ["none", "writeback"]


def test_usb_storage_write_cache_applies_with_drive_not_blockdev():
    # measured on QEMU 7.2 (test_hostconfig_live.py): usb-storage hands a
    # -blockdev node to an inner SCSI disk that opens it with a write cache
    (drive,) = hostconfig.for_qemu_cmdline(
        "qemu-system-x86_64 -drive file=/a,if=none,id=u,cache=none "
        "-device usb-storage,drive=u,write-cache=off"
    )
    assert drive.cache_mode == "directsync"
    (node,) = hostconfig.for_qemu_cmdline(
        "qemu-system-x86_64 -blockdev driver=file,filename=/a,node-name=p,"
        "cache.direct=on -blockdev driver=raw,file=p,node-name=u,cache.direct=on "
        "-device usb-storage,drive=u,write-cache=off"
    )
    assert node.cache_mode == "none"
    assert "not applied" in node.sources["cache_mode"]


def test_ps_output_with_unquoted_json_arguments():
    line = (
        "/usr/bin/kvm -id 100 -blockdev "
        + PVE_BLOCKDEV
        + " -device virtio-scsi-pci,id=virtioscsi0 -device scsi-hd,"
        "bus=virtioscsi0.0,drive=drive-scsi0,id=scsi0,write-cache=on"
    )
    (disk,) = hostconfig.for_qemu_cmdline(line)  # as `ps -o args` shows it
    assert disk.cache_mode == "none" and disk.aio == "native"
