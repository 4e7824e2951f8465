"""The standard suite: one versioned definition of every test.

A test id names one exact measurement (tool, operation, block size, queue
depth, jobs).  The server imports this module, so a test id means the same
thing on both sides.  Whatever changes a measurement's meaning bumps
SUITE_VERSION; the comparability key then changes too, so old and new figures
are never compared as if they were alike.

Profiles:
- ``quick``: what CrystalDiskMark/KDiskMark users recognise (1 MiB sequential
  at Q8T1 and Q1T1, 4 KiB random at Q32T1 and Q1T1), ioping 4 KiB read and
  write, dd 1 GiB with conv=fdatasync (seed 001's test).
- ``standard``: adds seed 000's ioping matrix (512 B, 4 KiB, 64 KiB, 1 MiB,
  reads and writes, and -L 4 MiB sequential), fio 256 KiB and 4 MiB
  sequential, and a 4 KiB write with an fsync after every write.
- ``full``: adds seed 002's queue-depth sweep 1..256 for 4 KiB random reads and
  256 KiB sequential reads, and 4 KiB random reads with 4 and 8 jobs.
"""

from __future__ import annotations

import hashlib
import json

SUITE_ID = "benchdb-standard"
SUITE_VERSION = "1"
PROFILES = ("quick", "standard", "full")
SWEEP_DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

# Defaults per profile: seconds per fio test (and per ioping repeat), repeats
# (and the cap when the spread is wide), ioping request cap (None: as many as
# the seconds allow), test file size (None: twice the RAM,
# 1..16 GiB, so the guest's page cache cannot hold it).
PROFILE_DEFAULTS = {
    "quick": {
        "runtime": 2,
        "warmup_runtime": 1,
        "repeats": 3,
        "max_repeats": 5,
        "ioping_count": None,
        "size": 2**30,
        "size_choice": "1 GiB, as CrystalDiskMark's default, so the profile "
        "finishes in about 2 minutes on an ordinary disk; consequence: a guest "
        "or host with more free RAM than that may serve reads from its page "
        "cache (host RAM under cache=writeback), so read figures can be RAM "
        "figures",
        "summary": "8 fio tests like CrystalDiskMark's (1 MiB sequential Q8T1 "
        "and Q1T1, 4 KiB random Q32T1 and Q1T1, read and write), ioping 4 KiB "
        "read and write, dd 1 GiB; 2 s per fio test, a 1 s warm-up and 3 "
        "repeats (up to 5 when the spread is wide)",
    },
    "standard": {
        "runtime": 10,
        "repeats": 3,
        "max_repeats": 6,
        "ioping_count": None,
        "size": None,
        "size_choice": "twice the RAM (1..16 GiB), so the guest's page cache "
        "cannot hold the file; the host's may, under cache=writeback",
        "summary": "quick's tests plus ioping 512 B..4 MiB, fio 256 KiB and "
        "4 MiB sequential and a 4 KiB write with fsync after every write; 10 s "
        "per fio test, a warm-up and 3 repeats (up to 6)",
    },
    "full": {
        "runtime": 10,
        "repeats": 5,
        "max_repeats": 10,
        "ioping_count": None,
        "size": None,
        "size_choice": "twice the RAM (1..16 GiB), so the guest's page cache "
        "cannot hold the file; the host's may, under cache=writeback",
        "summary": "standard's tests plus a queue-depth sweep 1..256 (4 KiB "
        "random and 256 KiB sequential reads) and 4 KiB random reads with 4 "
        "and 8 jobs; 10 s per fio test, a warm-up and 5 repeats (up to 10)",
    },
}


def estimate_seconds(profile: str) -> int:
    """Roughly how long a profile takes without extra repeats: each test's
    warm-up and repeats (fio: its runtime plus about 1 s to start; ioping:
    its runtime; dd: 1 GiB at about 200 MB/s), plus laying out
    the test file."""
    d = PROFILE_DEFAULTS[profile]
    runs = 1 + d["repeats"]
    warmup = d.get("warmup_runtime") or d["runtime"]
    total = 0.0
    for t in tests_for(profile):
        if t["tool"] == "fio":
            total += d["repeats"] * (d["runtime"] + 1) + warmup + 1
        elif t["tool"] == "ioping":
            total += d["repeats"] * (d["runtime"] + 0.5) + warmup + 0.5
        else:
            total += runs * 5.5
    return int(total + 10)


def _fio(test_id, title, group, rw, bs, iodepth, numjobs=1, ioengine="libaio", **extra):
    direction = "read" if "read" in rw else "write"
    # The main figure by kind: bandwidth for sequential tests, IOPS for
    # random ones, latency for fsync tests (as for ioping).
    if "fsync" in extra:
        metric = "lat_mean_ns"
    elif rw.startswith("rand"):
        metric = "iops"
    else:
        metric = "bw_bytes"
    options = {
        "rw": rw,
        "bs": bs,
        "iodepth": str(iodepth),
        "numjobs": str(numjobs),
        "ioengine": ioengine,
        "direct": "1",
    }
    options.update({k: str(v) for k, v in extra.items()})
    return {
        "test_id": test_id,
        "tool": "fio",
        "title": title,
        "group": group,
        "direction": direction,
        "metric": metric,
        "options": options,
        "iodepth": iodepth,
        "numjobs": numjobs,
        "bs": bs,
    }


def _ioping(test_id, title, size, write=False, sequential=False):
    options = {"size": size, "write": "1" if write else "0"}
    if sequential:
        options["linear"] = "1"
    return {
        "test_id": test_id,
        "tool": "ioping",
        "title": title,
        "group": "ioping",
        "direction": "write" if write else "read",
        "metric": "lat_mean_ns",
        "options": options,
        "iodepth": 1,
        "numjobs": 1,
        "bs": size,
    }


def _build() -> list:
    quick = [
        _fio(
            "fio-seq-read-1m-q8t1",
            "Sequential read 1 MiB Q8T1",
            "fio-seq",
            "read",
            "1m",
            8,
        ),
        _fio(
            "fio-seq-write-1m-q8t1",
            "Sequential write 1 MiB Q8T1",
            "fio-seq",
            "write",
            "1m",
            8,
        ),
        _fio(
            "fio-seq-read-1m-q1t1",
            "Sequential read 1 MiB Q1T1",
            "fio-seq",
            "read",
            "1m",
            1,
        ),
        _fio(
            "fio-seq-write-1m-q1t1",
            "Sequential write 1 MiB Q1T1",
            "fio-seq",
            "write",
            "1m",
            1,
        ),
        _fio(
            "fio-rand-read-4k-q32t1",
            "Random read 4 KiB Q32T1",
            "fio-random",
            "randread",
            "4k",
            32,
        ),
        _fio(
            "fio-rand-write-4k-q32t1",
            "Random write 4 KiB Q32T1",
            "fio-random",
            "randwrite",
            "4k",
            32,
        ),
        _fio(
            "fio-rand-read-4k-q1t1",
            "Random read 4 KiB Q1T1",
            "fio-random",
            "randread",
            "4k",
            1,
        ),
        _fio(
            "fio-rand-write-4k-q1t1",
            "Random write 4 KiB Q1T1",
            "fio-random",
            "randwrite",
            "4k",
            1,
        ),
        _ioping("ioping-read-4k", "ioping read 4 KiB", "4k"),
        _ioping("ioping-write-4k", "ioping write 4 KiB", "4k", write=True),
        {
            "test_id": "dd-write-1m-fdatasync",
            "tool": "dd",
            "title": "dd write 1 MiB blocks, conv=fdatasync",
            "group": "dd",
            "direction": "write",
            "metric": "bw_bytes",
            "options": {"bs": "1M", "conv": "fdatasync", "if": "/dev/zero"},
            "iodepth": 1,
            "numjobs": 1,
            "bs": "1M",
        },
    ]
    for t in quick:
        t["profiles"] = ["quick", "standard", "full"]
    standard = []
    for size in ("512", "4k", "64k", "1m"):
        label = {"512": "512 B", "4k": "4 KiB", "64k": "64 KiB", "1m": "1 MiB"}[size]
        if size != "4k":
            standard.append(
                _ioping(f"ioping-read-{size}", f"ioping read {label}", size)
            )
            standard.append(
                _ioping(
                    f"ioping-write-{size}", f"ioping write {label}", size, write=True
                )
            )
    standard += [
        _ioping(
            "ioping-seq-read-4m", "ioping sequential read 4 MiB", "4m", sequential=True
        ),
        _ioping(
            "ioping-seq-write-4m",
            "ioping sequential write 4 MiB",
            "4m",
            write=True,
            sequential=True,
        ),
        _fio(
            "fio-seq-read-256k-q32t1",
            "Sequential read 256 KiB Q32T1",
            "fio-seq",
            "read",
            "256k",
            32,
        ),
        _fio(
            "fio-seq-write-256k-q32t1",
            "Sequential write 256 KiB Q32T1",
            "fio-seq",
            "write",
            "256k",
            32,
        ),
        _fio(
            "fio-seq-read-4m-q8t1",
            "Sequential read 4 MiB Q8T1",
            "fio-seq",
            "read",
            "4m",
            8,
        ),
        _fio(
            "fio-seq-write-4m-q8t1",
            "Sequential write 4 MiB Q8T1",
            "fio-seq",
            "write",
            "4m",
            8,
        ),
        _fio(
            "fio-fsync-write-4k",
            "Write 4 KiB, fsync after every write",
            "fio-fsync",
            "write",
            "4k",
            1,
            ioengine="sync",
            fsync=1,
        ),
    ]
    for t in standard:
        t["profiles"] = ["standard", "full"]
    full = []
    for qd in SWEEP_DEPTHS:
        full.append(
            _fio(
                f"fio-sweep-rand-read-4k-q{qd}t1",
                f"Random read 4 KiB Q{qd}T1",
                "fio-iodepth-sweep",
                "randread",
                "4k",
                qd,
            )
        )
        full.append(
            _fio(
                f"fio-sweep-seq-read-256k-q{qd}t1",
                f"Sequential read 256 KiB Q{qd}T1",
                "fio-iodepth-sweep",
                "read",
                "256k",
                qd,
            )
        )
    for jobs in (4, 8):
        full.append(
            _fio(
                f"fio-rand-read-4k-q32t{jobs}",
                f"Random read 4 KiB Q32T{jobs}",
                "fio-numjobs",
                "randread",
                "4k",
                32,
                numjobs=jobs,
            )
        )
    for t in full:
        t["profiles"] = ["full"]
    tests = quick + standard + full
    for t in tests:
        t["comparable"] = True
    return tests


_CATALOGUE = _build()
_BY_ID = {t["test_id"]: t for t in _CATALOGUE}


def catalogue() -> list:
    """Every test of the suite, in run order (copies: callers may change them)."""
    return [json.loads(json.dumps(t)) for t in _CATALOGUE]


def get_test(test_id: str) -> dict:
    """One test's definition; KeyError for an id outside the suite."""
    return json.loads(json.dumps(_BY_ID[test_id]))


def tests_for(profile: str) -> list:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {PROFILES}")
    return [t for t in catalogue() if profile in t["profiles"]]


def tool_major(tool_version: str | None) -> str:
    """'fio-3.33' -> 'fio3'; 'ioping 1.3' -> 'ioping1'; unknown -> tool name."""
    if not tool_version:
        return "unknown"
    digits = "".join(ch if ch.isdigit() or ch == "." else " " for ch in tool_version)
    major = digits.split()[0].split(".")[0] if digits.split() else ""
    name = "".join(ch for ch in tool_version.split("-")[0].split()[0] if ch.isalpha())
    return f"{name}{major}"


def comparability_key(test_id: str, tool: str, options: dict, tool_version=None) -> str:
    """What must be equal for two results to be compared.

    The suite version, the test id, the tool's major version and a digest of
    the exact options the tool ran with (size and runtime included: a 16 MiB
    file in a guest's page cache is not the same measurement as 4 GiB).
    Units are fixed by the bundle schema, so they are part of the version.
    """
    digest = hashlib.sha1(
        json.dumps(options, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()[:12]
    major = tool_major(tool_version) if tool_version else tool
    return f"{SUITE_ID}/{SUITE_VERSION}|{test_id}|{major}|{digest}"
