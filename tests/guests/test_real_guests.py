"""Real QEMU guests: every cache mode reaches the guest, the agent sees it right.

One session-wide matrix run (``tests.guests.matrix.CI_PLAN``: the five cache
modes on virtio-blk/raw, plus virtio-scsi/qcow2, SATA (AHCI)/raw and
IDE/qcow2) boots the guest under software emulation, runs benchdb-agent inside
and natively on the host, and every test below asserts on what those real
boots produced (the ``results`` and ``boots`` fixtures, tests/guests/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from benchdb_agent import bundle as agent_bundle
from tests.guests import harness, matrix

pytestmark = pytest.mark.guest


# The driver that binds the bench disk's controller on each bus.
BUS_DRIVER = {
    "virtio-blk": "virtio_blk",
    "virtio-scsi": "virtio_scsi",
    "sata": "ahci",
    "ide": "ata_piix",
}
MACHINE_NAME = {"q35": "Standard PC (Q35 + ICH9, 2009)", "pc": "Standard PC (i440FX"}


def _bundle(out: Path, name: str) -> dict:
    path = out / name
    assert path.exists(), f"no bundle {name}; see {out}/*.stderr"
    return json.loads(path.read_text())


def test_every_planned_boot_ran_and_powered_off(boots):
    assert [(b["cache_mode"], b["bus"], b["format"]) for b in boots] == list(
        matrix.CI_PLAN
    )
    for boot in boots:
        assert boot["qemu_rc"] == 0, boot["label"]
        assert boot["guest_disk"] is not None, (boot["label"], boot["errors"])
        assert boot["guest_disk"]["serial"] == harness.BENCH_SERIAL


def test_all_five_cache_modes_are_covered(boots):
    assert {b["cache_mode"] for b in boots} == set(harness.CACHE_MODES)


def test_write_cache_seen_in_guest_matches_cache_mode(boots):
    for boot in boots:
        expected = harness.EXPECTED_WRITE_CACHE[boot["cache_mode"]]
        assert boot["write_cache"] == expected, boot["label"]


def test_guest_sees_a_qemu_machine(results, boots):
    accel = results[0]["accel"]
    for boot in boots:
        env = boot["guest_environment"]
        machine = "pc" if boot["bus"] == "ide" else "q35"
        assert env["dmi"]["sys_vendor"] == "QEMU"
        assert env["dmi"]["product_name"].startswith(MACHINE_NAME[machine])
        assert env["hypervisor_flag"] is True
        assert env["systemd_detect_virt"] == ("kvm" if accel == "kvm" else "qemu")


def test_guest_disk_sits_behind_the_booted_bus(boots):
    for boot in boots:
        assert BUS_DRIVER[boot["bus"]] in boot["guest_disk"]["drivers"], boot["label"]


def test_qemu_was_started_as_planned(boots):
    for boot in boots:
        line = " ".join(boot["qemu_argv"])
        assert f"format={boot['format']}" in line
        assert f"cache={boot['cache_mode']},aio=threads" in line


def test_host_config_tags_come_from_the_running_qemu(boots):
    for boot in boots:
        assert boot["host_config_error"] is None, boot["host_config_error"]
        # Read from the running QEMU process, not from the harness's argv.
        argv = boot["host_config_argv"]
        assert argv[argv.index("--qemu-pid") + 1] == str(boot["qemu_pid"])
        tags = boot["host_config_tags"]
        assert tags.get("cache_mode") == boot["cache_mode"], (boot["label"], tags)
        assert tags.get("image_format") == boot["format"], (boot["label"], tags)
        assert tags.get("disk_bus") == boot["bus"], (boot["label"], tags)
        assert tags.get("aio_mode") == "threads", (boot["label"], tags)


def test_agent_detect_inside_reports_emulated_qemu(results, boots):
    expected = "kvm" if results[0]["accel"] == "kvm" else "qemu-tcg"
    for boot in boots:
        detect = boot["detect"]
        assert detect is not None, f"{boot['label']}: detect gave no JSON"
        assert detect["virtualization"]["type"] == expected, boot["label"]


def test_agent_detect_inside_reports_the_disk_bus(boots):
    for boot in boots:
        target = boot["detect"]["target"]
        assert target["disk_bus"] == boot["bus"], (boot["label"], target)
        assert target["device"] == boot["guest_disk"]["name"]
        assert target["filesystem"] == "ext4"


def test_agent_detect_reads_write_cache_as_cache_mode_evidence(boots):
    for boot in boots:
        detect = boot["detect"]
        assert detect["target"]["write_cache"] == boot["write_cache"]
        evidence = detect["cache_mode_evidence"]
        assert boot["cache_mode"] in evidence["compatible"], boot["label"]


def test_guest_bundles_validate_and_carry_the_real_tags(results, boots):
    schema = json.loads(agent_bundle.SCHEMA_PATH.read_text())
    summary, out = results
    for boot in boots:
        bundle = _bundle(out, f"{boot['label']}.bundle.json")
        jsonschema.validate(bundle, schema)
        assert agent_bundle.validate(bundle) == []
        assert bundle["role"] == "guest"
        assert bundle["pair_id"] == summary["pair_id"]
        assert bundle["tags"]["cache_mode"] == boot["cache_mode"]
        assert bundle["tags"]["disk_bus"] == boot["bus"]
        assert bundle["tags"]["image_format"] == boot["format"]
        assert bundle["environment"]["target"]["disk_bus"] == boot["bus"]
        assert bundle["tests"], boot["label"]
        for test in bundle["tests"]:
            assert test["repeats"], test["test_id"]


def test_host_baseline_shares_the_pair_and_validates(results):
    schema = json.loads(agent_bundle.SCHEMA_PATH.read_text())
    summary, out = results
    assert summary["host"]["rc"] == 0, summary["host"]["stderr_tail"]
    bundle = _bundle(out, "host.bundle.json")
    jsonschema.validate(bundle, schema)
    assert bundle["role"] == "host"
    assert bundle["pair_id"] == summary["pair_id"]
    guest_ids = {
        t["test_id"] for t in _bundle(out, "virtio-blk-raw-none.bundle.json")["tests"]
    }
    assert guest_ids == {t["test_id"] for t in bundle["tests"]}
