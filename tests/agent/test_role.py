"""--role host where detection finds a hypervisor is refused unless
--allow-virtual-host, and then marked; inside a VM the disk type is not
guessed: the agent says it cannot see it and how to tag it; `vm` tags it
from the host (issue 29)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchdb_agent import bundle, detect, runner, vm, vocab

AGENT = [sys.executable, "-m", "benchdb_agent"]
TINY = ["--test", "fio-rand-read-4k-q1t1", "--size", "16M", "--runtime", "1",
        "--repeats", "1"]  # fmt: skip


def this_machine() -> str:
    return detect.detect(None)["virtualization"]["type"]


def agent(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*AGENT, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def inside_a_vm():
    kind = this_machine()
    if not vocab.is_virtual_machine(kind):
        pytest.skip(f"this machine is not a VM ({kind}): nothing to refuse here")
    return kind


def test_a_host_run_inside_a_vm_is_refused_before_anything_runs(inside_a_vm, tmp_path):
    out = tmp_path / "b.json"
    done = agent("run", "--target", str(tmp_path), "--role", "host", *TINY,
                 "--out", str(out))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert inside_a_vm in done.stderr and "--allow-virtual-host" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_allowed_it_is_marked_and_the_disk_type_is_said_unseen(inside_a_vm, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    out = tmp_path / "b.json"
    done = agent("run", "--target", str(target), "--role", "host",
                 "--allow-virtual-host", *TINY, "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    assert doc["virtual_host"] is True
    codes = {w["code"]: w["message"] for w in doc["warnings"]}
    assert "virtual-host" in codes
    assert "--tag disk_type=" in codes["disk-type-unseen"]
    assert "benchdb-agent vm" in codes["disk-type-unseen"]
    assert "disk_type" not in doc["tags"]
    # Said at the end of the run too.
    assert "disk-type-unseen" in done.stderr


def test_a_guest_that_tags_its_disk_type_is_not_warned(inside_a_vm, tmp_path):
    out = tmp_path / "b.json"
    done = agent("run", "--target", str(tmp_path), *TINY,
                 "--tag", "disk_type=nvme-ssd", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert "virtual_host" not in doc
    assert "disk-type-unseen" not in {w["code"] for w in doc["warnings"]}


@pytest.mark.parametrize(
    ("kind", "role", "allowed", "refused"),
    [
        ("kvm", "host", False, True),
        ("xen-hvm", "host", False, True),
        ("other", "host", False, True),
        ("kvm", "host", True, False),
        ("kvm", "guest", False, False),
        ("none", "host", False, False),
        ("xen-dom0", "host", False, False),
        ("container", "host", False, False),
        ("unknown", "host", False, False),
    ],
)
def test_which_detections_refuse_a_host_run(kind, role, allowed, refused):
    env = {"virtualization": {"type": kind, "evidence": ["test"]}}
    if refused:
        with pytest.raises(runner.RoleRefused, match=kind):
            runner.check_role(env, role, allowed)
    else:
        runner.check_role(env, role, allowed)


@pytest.mark.parametrize(
    ("target", "virtual", "expected"),
    [
        ({"disk_bus": "nvme", "rotational": False}, False, "nvme-ssd"),
        ({"disk_bus": "sata", "rotational": True}, False, "hdd"),
        ({"disk_bus": "sata", "rotational": False}, False, "sata-ssd"),
        ({"disk_bus": "virtio-blk", "rotational": False}, False, None),
        ({"disk_bus": "virtio-blk", "rotational": True}, True, None),
    ],
)
def test_vm_tags_the_disk_type_the_host_sees(target, virtual, expected):
    host_doc = {"environment": {"target": target}}
    if virtual:
        host_doc["virtual_host"] = True
    assert vm.host_disk_type(host_doc) == expected
