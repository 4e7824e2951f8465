"""Bundles built from real tool output, for the API tests.

Every number in a test bundle comes from a real fio run on this machine (tiny
files, direct I/O) parsed by the agent's own parser: no invented figures.
``FioRuns`` runs fio lazily and caches outputs for the session, so each
distinct (profile, repeat) costs one fio execution per test session.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

from benchdb_agent import parsers, suite

FIO = shutil.which("fio") or "fio"

# fio jobs for test ids of the agent's suite, on tiny files so each takes well
# under a second (the comparability key carries the options, so these never
# mix with full-size runs).
# ``slow`` is the same job capped at 300 IOPS (fio's rate_iops, like a
# throttled virtual disk), a second "system" whose real measurements differ.
PROFILES = {
    "fio-rand-read-4k-q1t1": {
        "rw": "randread",
        "bs": "4k",
        "iodepth": 1,
        "numjobs": 1,
        "size": "1m",
    },
    "fio-rand-write-4k-q1t1": {
        "rw": "randwrite",
        "bs": "4k",
        "iodepth": 1,
        "numjobs": 1,
        "size": "1m",
    },
    # A 1 MiB sequential read: a workload of another kind, for the tests of
    # a test's identity (tests/api/test_test_identity.py).
    "fio-seq-read-1m-q1t1": {
        "rw": "read",
        "bs": "1m",
        "iodepth": 1,
        "numjobs": 1,
        "size": "8m",
    },
}
SPEEDS = {"fast": [], "slow": ["--rate_iops=300"]}
# dd writes 4 MiB and fdatasyncs; GNU dd reports on stderr and does not say
# whether it read or wrote, so the bundle's test carries the direction.
DD_TESTS = {"dd-write-1m-fdatasync": "write"}


class FioRuns:
    """Real fio JSON outputs, cached per (test id, speed, repeat)."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.cache: dict[tuple, tuple[list[str], str]] = {}

    def output(self, test_id: str, speed: str, repeat: int) -> tuple[list[str], str]:
        key = (test_id, speed, repeat)
        if key not in self.cache and test_id in DD_TESTS:
            command = [
                "dd",
                "if=/dev/zero",
                f"of={self.workdir / 'dd-test.bin'}",
                "bs=1M",
                "count=4",
                "conv=fdatasync",
            ]
            done = subprocess.run(
                command, capture_output=True, text=True, check=True, timeout=60
            )
            self.cache[key] = (command, done.stderr)
        if key not in self.cache:
            opts = PROFILES[test_id]
            command = [
                FIO,
                f"--name={test_id}",
                f"--filename={self.workdir / 'fio-test.bin'}",
                f"--rw={opts['rw']}",
                f"--bs={opts['bs']}",
                f"--iodepth={opts['iodepth']}",
                f"--numjobs={opts['numjobs']}",
                f"--size={opts['size']}",
                "--ioengine=psync",
                "--direct=1",
                "--output-format=json",
                *SPEEDS[speed],
            ]
            done = subprocess.run(
                command, capture_output=True, text=True, check=True, timeout=60
            )
            self.cache[key] = (command, done.stdout)
        return self.cache[key]


def pack(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode())).decode()


def make_bundle(
    fio: FioRuns,
    *,
    tests: tuple[str, ...] = ("fio-rand-read-4k-q1t1",),
    speed: str = "fast",
    repeats: int = 3,
    role: str = "guest",
    pair_id: str | None = None,
    tags: dict | None = None,
    bundle_id: str | None = None,
    environment: dict | None = None,
) -> dict:
    """A schema-shaped bundle whose repeats carry real fio outputs."""
    out_tests = []
    for test_id in tests:
        is_dd = test_id in DD_TESTS
        fmt = "dd" if is_dd else "fio-json"
        direction = DD_TESTS.get(test_id)
        if is_dd:
            options = {"bs": "1M", "count": "4", "conv": "fdatasync", "if": "/dev/zero"}
        else:
            options = {**PROFILES[test_id], "ioengine": "psync", "direct": 1}
        reps = []
        version = None
        command = []
        for index in range(repeats):
            command, text = fio.output(test_id, speed, index)
            parsed = parsers.parse(text, fmt, direction=direction)
            version = parsed.get("tool_version")
            reps.append(
                {
                    "index": index,
                    "started": datetime.now(UTC).isoformat(),
                    "records": parsed["records"],
                    "raw": {
                        "format": fmt,
                        "encoding": "gzip+base64",
                        "data": pack(text),
                    },
                }
            )
        out_tests.append(
            {
                "test_id": test_id,
                "tool": "dd" if is_dd else "fio",
                **({"direction": direction} if direction else {}),
                "comparability_key": suite.comparability_key(
                    test_id, "dd" if is_dd else "fio", options, version
                ),
                "options": options,
                "command": [str(c) for c in command],
                "tool_version": version or "",
                "preconditioned": False,
                "warmup_discarded": False,
                "extra_repeats": 0,
                "repeats": reps,
            }
        )
    env = environment or {
        "virtualization": {"type": "kvm", "evidence": ["cpuid hypervisor: KVMKVMKVM"]},
        "platform": {"value": "unknown", "hints": []},
        "cpu": {"model": "Test CPU", "sockets": 1, "cores": 2, "threads": 2},
        "memory_bytes": 2147483648,
        "os": {"name": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-test"},
        "target": {
            "path": "/mnt/test",
            "filesystem": "ext4",
            "device": "vdb",
            "disk_bus": "virtio-blk" if role == "guest" else "nvme",
            "rotational": False,
            "write_cache": "write back",
            "o_direct": True,
        },
    }
    return {
        "schema_version": 1,
        "bundle_id": bundle_id or str(uuid.uuid4()),
        "created": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "agent": {"name": "benchdb-agent", "version": "0.1.0"},
        "suite": {"id": "benchdb-standard", "version": "1", "profile": "quick"},
        "role": role,
        "pair_id": pair_id,
        "source": "measured",
        "environment": copy.deepcopy(env),
        "tags": dict(tags or {}),
        "warnings": [],
        "tests": out_tests,
    }


def repeat_values(bundle: dict, test_id: str, direction: str, field: str) -> list:
    """A metric per repeat read straight from the raw fio JSON (independently
    of any parser), for checking the server's statistics."""
    key = {"iops": "iops", "bw_bytes": "bw_bytes"}.get(field)
    out = []
    for test in bundle["tests"]:
        if test["test_id"] != test_id:
            continue
        for rep in test["repeats"]:
            doc = json.loads(gzip.decompress(base64.b64decode(rep["raw"]["data"])))
            job = doc["jobs"][0][direction]
            out.append(job[key] if key else job["lat_ns"]["mean"])
    return out
