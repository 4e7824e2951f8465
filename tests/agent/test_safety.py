"""The agent never writes to a device that holds anything."""

import subprocess
import sys

import pytest

from benchdb_agent import safety

AGENT = [sys.executable, "-m", "benchdb_agent"]


def image(tmp_path, name="disk.img", size=32 * 2**20):
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def test_an_ext4_image_is_refused(tmp_path):
    img = image(tmp_path)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    assert "an ext2/3/4 filesystem" in safety.signatures(str(img))
    with pytest.raises(safety.SafetyError, match="ext2/3/4"):
        safety.check_device(str(img), allow_write=True)


def test_a_partition_table_is_refused(tmp_path):
    img = image(tmp_path)
    subprocess.run(
        ["sfdisk", "-q", str(img)], input="label: gpt\n,,L\n", text=True, check=True
    )
    found = safety.signatures(str(img))
    assert "a GPT partition table" in found
    with pytest.raises(safety.SafetyError, match="refusing"):
        safety.check_device(str(img), allow_write=True)


def test_swap_and_lvm_labels_are_seen(tmp_path):
    swap = image(tmp_path, "swap.img")
    subprocess.run(["mkswap", "-q", str(swap)], check=True, capture_output=True)
    assert "a swap area" in safety.signatures(str(swap))
    lvm = image(tmp_path, "lvm.img")
    with open(lvm, "r+b") as fh:
        fh.seek(512)
        fh.write(b"LABELONE")
    assert "an LVM physical volume" in safety.signatures(str(lvm))


def test_a_blank_image_passes_only_with_the_explicit_flag(tmp_path):
    img = image(tmp_path)
    assert safety.signatures(str(img)) == []
    with pytest.raises(safety.SafetyError, match="--device-write-destroys-data"):
        safety.check_device(str(img), allow_write=False)
    safety.check_device(str(img), allow_write=True)


def test_the_root_device_is_refused(tmp_path):
    mounts = safety.mounted_sources()
    root_source = next((src for src, point in mounts.items() if point == "/"), None)
    assert root_source is not None
    with pytest.raises(safety.SafetyError):
        safety.check_device(root_source, allow_write=True)


def test_cli_refuses_a_device_with_a_filesystem(tmp_path):
    img = image(tmp_path)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    before = img.read_bytes()
    proc = subprocess.run(
        [
            *AGENT,
            "run",
            "--target",
            str(tmp_path),
            "--device",
            str(img),
            "--device-write-destroys-data",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    assert "ext2/3/4" in proc.stderr
    assert img.read_bytes() == before


def test_free_space_check(tmp_path):
    with pytest.raises(safety.SafetyError, match="free"):
        safety.check_free_space(str(tmp_path), 2**60, 2**30)
    safety.check_free_space(str(tmp_path), 1024)


def test_install_hint_names_the_distribution():
    assert (
        safety.install_hint(["fio", "ioping"], "debian") == "apt-get install fio ioping"
    )
    assert "dnf" in safety.install_hint(["fio"], "fedora")


def test_a_blank_device_is_measured_when_asked(tmp_path):
    img = image(tmp_path, size=64 * 2**20)
    out = tmp_path / "device.json"
    proc = subprocess.run(
        [
            *AGENT,
            "run",
            "--device",
            str(img),
            "--device-write-destroys-data",
            "--runtime",
            "1",
            "--repeats",
            "2",
            "--ioping-count",
            "3",
            "--test",
            "fio-rand-read-4k-q1t1",
            "--test",
            "ioping-write-4k",
            "--test",
            "dd-write-1m-fdatasync",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    import json

    doc = json.loads(out.read_text())
    assert doc["environment"]["target"]["kind"] == "block-device"
    assert [t["test_id"] for t in doc["tests"]] == [
        "fio-rand-read-4k-q1t1",
        "ioping-write-4k",
        "dd-write-1m-fdatasync",
    ]
    assert all(r["records"][0]["lat_mean_ns"] > 0 for r in doc["tests"][0]["repeats"])
    assert img.exists()  # the device is written, never removed


def test_missing_tools_name_the_install_command(tmp_path):
    env = {"PATH": str(tmp_path)}  # no fio, ioping or dd on it
    proc = subprocess.run(
        [*AGENT, "run", "--target", str(tmp_path), "--size", "16M"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 1
    assert "missing" in proc.stderr and "install" in proc.stderr
    assert "fio" in proc.stderr
