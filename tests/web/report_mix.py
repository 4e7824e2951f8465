"""The reference data plus a realistic mix of a community's runs, as the
reports meet them (issue 30): agent runs on Proxmox with SATA SSDs, two
systems measured in every cache mode under one workload and a single run
under the suite's headline workload; suspect, unlisted and imported runs of
the same setup; libvirt/NVMe guests paired with their hosts, one of them
faster than its host (host page cache)."""

from __future__ import annotations

import numpy as np
from django.core.management import call_command

from benchdb.results import stats
from benchdb.results.models import Hardware, Measurement, Result, Run

# Two systems measured in every mode: the answer to "which cache mode".
SWEPT = "fio-rand-write-4k-q32t1"
# The suite's headline test (offered first by the list): one run only.
HEADLINE = "fio-rand-read-4k-q32t1"
# Guest ÷ host on libvirt/NVMe: a real loss, and a guest faster than its host.
LOSS = "fio-rand-read-4k-q1t1"
CACHED = "fio-seq-read-1m-q8t1"

SPEED = {"none": 1.0, "writethrough": 0.7, "writeback": 1.1, "directsync": 0.65}
SPEED["unsafe"] = 1.8


TITLES = {
    SWEPT: "Random write 4 KiB Q32T1",
    HEADLINE: "Random read 4 KiB Q32T1",
    LOSS: "Random read 4 KiB Q1T1",
    CACHED: "Sequential read 1 MiB Q8T1",
}


def _run(hw, test_id: str, level: float, seed: int, **fields) -> Run:
    """A run of ``test_id`` with four repeats around ``level`` (IOPS, or
    bytes per second for a sequential test)."""
    metric = "bw_bytes" if "-seq-" in test_id else "iops"
    rng = np.random.default_rng(seed)
    values = [float(level * rng.lognormal(0, 0.03)) for _ in range(4)]
    run = Run.objects.create(
        suite_id="benchdb-standard", suite_version="1", hardware=hw, **fields
    )
    result = Result.objects.create(
        run=run,
        test_id=test_id,
        title=TITLES[test_id],
        tool="fio",
        comparability_key=f"benchdb-standard/1|{test_id}|test",
        stats={
            "main_direction": "read",
            "directions": {"read": {metric: stats.summarize(values)}},
            "values": {"read": {metric: values}},
        },
        **{f"{metric}_mean": sum(values) / len(values)},
        repeat_count=len(values),
    )
    Measurement.objects.bulk_create(
        Measurement(result=result, repeat=i, direction="read", **{metric: v})
        for i, v in enumerate(values)
    )
    return run


def load_mix() -> dict:
    """Load the seeds and the mix; what the tests look for."""
    call_command("load_reference")
    proxmox = {"platform": "proxmox", "role": "guest"}
    systems = [
        Hardware.objects.create(fingerprint=f"mix-pve-{i}", disk_type="sata-ssd")
        for i in range(4)
    ]
    seed = 0
    for i, hw in enumerate(systems[:3]):
        host = _run(hw, SWEPT, 9000 * (i + 1), seed := seed + 1, role="host")
        for mode, factor in SPEED.items():
            _run(
                hw,
                SWEPT,
                8000 * (i + 1) * factor,
                seed := seed + 1,
                cache_mode=mode,
                baseline=host,
                title=f"PVE {i} cache={mode}",
                **proxmox,
            )
    third = systems[3]
    _run(third, HEADLINE, 50000, seed := seed + 1, cache_mode="writeback", **proxmox)
    suspect = [
        _run(
            third,
            HEADLINE,
            30000,
            seed := seed + 1,
            cache_mode="none",
            suspect=True,
            suspect_reasons=["throttled"],
            **proxmox,
        )
        for _ in range(2)
    ]
    _run(
        third,
        HEADLINE,
        31000,
        seed := seed + 1,
        cache_mode="none",
        source="imported",
        **proxmox,
    )
    _run(
        third,
        HEADLINE,
        29000,
        seed := seed + 1,
        cache_mode="none",
        visibility="unlisted",
        **proxmox,
    )
    nvme = [
        Hardware.objects.create(fingerprint=f"mix-nvme-{i}", disk_type="nvme-ssd")
        for i in range(3)
    ]
    for i, hw in enumerate(nvme):
        for test_id, ratio in ((LOSS, 0.6), (CACHED, 2.46)):
            host = _run(hw, test_id, 20000 * (i + 1), seed := seed + 1, role="host")
            _run(
                hw,
                test_id,
                20000 * (i + 1) * ratio,
                seed := seed + 1,
                role="guest",
                platform="libvirt",
                cache_mode="none",
                baseline=host,
            )
    return {"proxmox": systems, "suspect": suspect, "nvme": nvme}
