"""Phoronix Test Suite result files (``composite.xml``) of the ``pts/fio``
profiles.

A ``<Result>`` is one option set of one test profile; fio's profile writes two
per option set, twins that share the ``<Description>`` ("Type: Random Read -
Engine: Linux AIO - Direct: Yes - Block Size: 4KB - Job Count: 1 - Disk
Target: ...") and differ in ``<Scale>`` (IOPS, MB/s).  Each ``<Data>/<Entry>``
is one system's value (the mean of its trials) with the trials in
``<RawString>`` ("v1:v2:v3").  One record per option set, of the file's one
system, with the trials kept in its options.

Units, from the profile's own definition (phoronix-test-suite/test-profiles,
``pts/fio-2.x/results-definition.xml``): IOPS are fio's, exact; "MB/s" is
fio's summary ``bw=`` figure either in MiB/s as printed (fio prints MiB/s from
10,000 KiB/s up) or, below that, its KiB/s divided by 1000.  A value of 10 or
more is therefore MiB/s (x 1,048,576 bytes), one below 9.77 is KiB/s / 1000
(x 1,024,000); one in between could be either and is left out, as is the
bandwidth of profiles other than 2.x, whose definitions were not read.
The 2.x job file sets ``iodepth=64``, ``size=1g``, ``runtime=60``.
"""

from __future__ import annotations

import re

from .common import ParseError, dec, num, record, xml_root, xml_text

_TYPES = {
    "Random Read": "randread",
    "Random Write": "randwrite",
    "Sequential Read": "read",
    "Sequential Write": "write",
}
_ENGINES = {
    "IO_uring": "io_uring",
    "POSIX AIO": "posixaio",
    "Sync": "sync",
    "Linux AIO": "libaio",
    "Windows AIO": "windowsaio",
}
_V2_JOB = {"iodepth": "64", "size": "1g", "runtime": "60"}


def looks_like(text: str) -> bool:
    head = text[:4000]
    return "<PhoronixTestSuite>" in head or (
        "<PhoronixTestSuite" in head and "pts/fio" in text
    )


def _options(description: str, source: str) -> dict:
    parts = dict(
        (k.strip(), v.strip())
        for k, _sep, v in (p.partition(":") for p in description.split(" - "))
    )
    if parts.get("Type") not in _TYPES:
        raise ParseError(
            source, f"<Description> {description!r}: no known 'Type: ...' of pts/fio"
        )
    out = {"rw": _TYPES[parts["Type"]]}
    if parts.get("Engine") in _ENGINES:
        out["ioengine"] = _ENGINES[parts["Engine"]]
    if parts.get("Direct") in ("Yes", "No"):
        out["direct"] = "1" if parts["Direct"] == "Yes" else "0"
    m = re.fullmatch(r"(\d+)(KB|MB)", parts.get("Block Size", ""))
    if m:
        out["bs"] = m.group(1) + ("k" if m.group(2) == "KB" else "m")
    if re.fullmatch(r"\d+", parts.get("Job Count", "")):
        out["numjobs"] = parts["Job Count"]
    if parts.get("Disk Target"):
        out["directory"] = parts["Disk Target"]
    return out


def _bandwidth(value, where: str):
    """bytes/s of a pts/fio-2.x "MB/s" value (see the module's docstring)."""
    v = dec(value, where, "MB/s")
    if v >= 10:
        return num(v * 2**20)
    if v < dec("9.77"):
        return num(v * 1024 * 1000)
    return None


def parse(text: str, source: str, direction=None) -> dict:
    root = xml_root(text, source, "Phoronix Test Suite", "PhoronixTestSuite")
    systems = [xml_text(s, "Identifier") or "" for s in root.findall("System")]
    if len(systems) > 1:
        raise ParseError(
            source,
            f"the result file holds {len(systems)} systems ({', '.join(systems)}): "
            "import one system's results (phoronix-test-suite "
            "extract-from-result-file)",
        )
    by_option: dict = {}
    version = None
    for i, result in enumerate(root.findall("Result")):
        where = f"{source}: Result[{i}]"
        identifier = xml_text(result, "Identifier") or ""
        if not identifier.startswith("pts/fio"):
            continue
        version = identifier
        description = xml_text(result, "Description") or ""
        scale = xml_text(result, "Scale")
        entries = result.findall("Data/Entry")
        if len(entries) != 1:
            raise ParseError(where, f"{len(entries)} <Entry> values; expected one")
        value = xml_text(entries[0], "Value")
        if not value:
            continue  # every trial failed: no figure
        options = _options(description, where)
        rec = by_option.get(description)
        if rec is None:
            d = "read" if options["rw"].endswith("read") else "write"
            rec = by_option[description] = record("fio", d, job=description)
            if identifier.startswith("pts/fio-2."):
                options.update(_V2_JOB)
            rec["options"] = options
        raw = xml_text(entries[0], "RawString")
        if scale == "IOPS":
            rec["iops"] = num(dec(value, where, "IOPS"))
            if raw:
                rec["options"]["trials_iops"] = raw
        elif scale == "MB/s":
            if identifier.startswith("pts/fio-2."):
                rec["bw_bytes"] = _bandwidth(value, where)
            if raw:
                rec["options"]["trials_mb_s"] = raw
        else:
            raise ParseError(where, f"<Scale> {scale!r}: expected IOPS or MB/s")
    records = list(by_option.values())
    if not records:
        raise ParseError(source, "the result file holds no pts/fio result")
    meta = {}
    if systems:
        system = root.find("System")
        meta = {
            "system": systems[0],
            "hardware": xml_text(system, "Hardware"),
            "software": xml_text(system, "Software"),
        }
    return {
        "tool": "fio",
        "tool_version": f"Phoronix Test Suite {version}",
        "records": records,
        "meta": {k: v for k, v in meta.items() if v},
    }
