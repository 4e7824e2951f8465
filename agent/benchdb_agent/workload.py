"""Which test a result is, from its workload, never from a file or job name.

A workload is what was measured: sequential or random, read, write or a mix,
block size, queue depth, jobs (threads), and how (engine, direct or buffered,
file size, runtime).  ``identify`` gives a test id: the suite's own id when
the workload equals one of the suite's fio tests in what decides the figure
(pattern, direction, block size, queue depth, jobs), so an imported
CrystalDiskMark "RND4K Q32T1" read is ``fio-rand-read-4k-q32t1`` and compares
with agent runs of it; otherwise an id in the same grammar prefixed ``io-``
("io-rand-read-4k-q32t16", "io-rand-rw50-4k-q64t2").  What the output does
not record (engine, direct I/O, file size, runtime) is listed by
``differences`` as the reasons a comparison with the agent's test is weaker,
never assumed equal.

``main_metric`` says which figure a test is about, whatever its origin:
bandwidth for sequential tests, IOPS for random ones, latency for ioping and
fsync tests.
"""

from __future__ import annotations

import re

from . import suite

_SIZE = re.compile(r"^(\d+)\s*([kmg]?)(i?b?)$", re.I)
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
# Options that do not change which test a result is, but do change how alike
# two of its measurements are: name -> how a person reads it.
HOW = {
    "ioengine": "engine",
    "direct": "direct I/O",
    "size": "file size",
    "runtime": "runtime",
}


def size_bytes(value) -> int | None:
    """A block or file size as fio and the parsers write it ("4k", "1m",
    "4096", 4096), in bytes; None when absent or not a plain size (a range)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value).strip())
    if not m:
        return None
    return int(m.group(1)) * _SCALE[m.group(2).lower()]


def size_label(nbytes: int | None) -> str:
    """The suite's spelling of a size: 512, 4k, 64k, 1m, 4m."""
    if nbytes is None:
        return "bsunknown"
    for unit, scale in (("g", 2**30), ("m", 2**20), ("k", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def describe(tool: str, directions, options: dict) -> dict:
    """The workload of one test's records: ``pattern`` (seq, rand, ioping,
    dd, fsync), ``direction`` (read, write, or None for a mix), ``mix`` (the
    read percentage of a mix), ``bs`` (bytes), ``iodepth``, ``numjobs``."""
    options = options or {}
    directions = sorted(set(directions))
    rw = str(options.get("rw") or options.get("readwrite") or "").lower()
    if tool == "ioping":
        pattern = "ioping"
    elif tool == "dd":
        pattern = "dd"
    elif str(options.get("fsync", "0")) not in ("0", ""):
        pattern = "fsync"
    elif rw.startswith("rand"):
        pattern = "rand"
    elif rw in ("read", "write", "rw", "readwrite", "trim"):
        pattern = "seq"
    else:
        pattern = "unknown"
    mixed = rw in ("rw", "readwrite", "randrw") or len(directions) > 1
    mix = _int(options.get("rwmixread")) if mixed else None
    if mixed and mix is None and rw in ("rw", "readwrite", "randrw"):
        mix = 50  # fio's default rwmixread
    iodepth, numjobs = _int(options.get("iodepth")), _int(options.get("numjobs"))
    if tool == "fio" and rw:
        # A fio job's options list what its job file set; fio's own default
        # for the others is 1 (fio HOWTO: iodepth, numjobs).
        iodepth = 1 if iodepth is None else iodepth
        numjobs = 1 if numjobs is None else numjobs
    return {
        "pattern": pattern,
        "direction": None if mixed else (directions[0] if directions else None),
        "mix": mix,
        "bs": size_bytes(options.get("bs") or options.get("blocksize")),
        "iodepth": iodepth,
        "numjobs": numjobs,
    }


def _key(w: dict) -> tuple:
    return (w["pattern"], w["direction"], w["mix"], w["bs"], w["iodepth"], w["numjobs"])


def _suite_index() -> dict:
    """The suite's tests by workload; the first of equal workloads wins (the
    quick profile's tests come first, the sweep's duplicates after)."""
    index: dict = {}
    for test in suite.catalogue():
        options = test["options"]
        tool = test["tool"]
        directions = [test["direction"]]
        w = describe(tool, directions, options)
        if tool == "ioping":
            if options.get("linear") == "1":
                continue  # -L: ioping's output does not say it
            w["bs"] = size_bytes(options.get("size"))
        if tool == "dd":
            continue  # dd's output says neither its block size nor conv
        index.setdefault(_key(w), test["test_id"])
    return index


_INDEX = _suite_index()


def _dd_index() -> dict:
    """The suite's dd tests by (block size, conv, direction): a dd whose
    options state both (a published source's command line) is one of them;
    an output alone says neither, so it never is."""
    return {
        (
            size_bytes(t["options"].get("bs")),
            t["options"].get("conv"),
            t["direction"],
        ): (t["test_id"])
        for t in suite.catalogue()
        if t["tool"] == "dd"
    }


_DD_INDEX = _dd_index()


def identify(tool: str, directions, options: dict) -> str:
    """The test id of a workload: the suite's when it is one of the suite's
    tests, else an ``io-`` id that names the workload (ioping and dd get
    ``ioping-<direction>-<size>`` and ``dd-<direction>``)."""
    w = describe(tool, directions, options)
    if tool == "ioping":
        w["bs"] = size_bytes((options or {}).get("size"))
        w["iodepth"] = w["numjobs"] = None
    if tool == "dd":
        options = options or {}
        conv = options.get("conv")
        found = _DD_INDEX.get((w["bs"], conv, w["direction"])) if conv else None
    else:
        found = _INDEX.get(_key(w))
    if found:
        return found
    direction = w["direction"] or "mixed"
    if tool == "ioping":
        return f"ioping-{direction}-{size_label(w['bs'])}"
    if tool == "dd":
        return f"dd-{direction}"
    what = direction if w["mix"] is None else f"rw{w['mix']}"
    depth = "q" + (str(w["iodepth"]) if w["iodepth"] is not None else "unknown")
    jobs = "t" + (str(w["numjobs"]) if w["numjobs"] is not None else "unknown")
    return f"io-{w['pattern']}-{what}-{size_label(w['bs'])}-{depth}{jobs}"


def main_metric(test_id: str) -> str | None:
    """The figure a test is about: the suite's choice for its tests; for the
    others, bandwidth for sequential and dd tests, IOPS for random ones,
    latency for ioping and fsync tests; None when the id does not say."""
    try:
        return suite.get_test(test_id)["metric"]
    except KeyError:
        pass
    if test_id.startswith("ioping-") or test_id.startswith("io-fsync-"):
        return "lat_mean_ns"
    if test_id.startswith(("io-seq-", "dd-")):
        return "bw_bytes"
    if test_id.startswith("io-rand-"):
        return "iops"
    return None


def differences(mine: dict, theirs: dict) -> list:
    """Why two measurements of one test are less alike than two agent runs:
    each option of ``HOW`` that one of them does not record, or that differs
    ("engine: diskspd against libaio", "file size not recorded")."""
    reasons = []
    for key, label in HOW.items():
        a, b = (mine or {}).get(key), (theirs or {}).get(key)
        if key == "size":
            a, b = size_bytes(a), size_bytes(b)
        if a is None or b is None:
            reasons.append(f"{label} not recorded")
        elif str(a) != str(b):
            shown = (
                (size_label(a), size_label(b)) if key == "size" else (str(a), str(b))
            )
            reasons.append(f"{label}: {shown[0]} against {shown[1]}")
    return reasons
