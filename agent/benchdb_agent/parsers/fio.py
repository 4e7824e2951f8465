"""fio output: JSON (2.x and 3.x, json+), terse (versions 3 and 4), normal text.

fio 3.x JSON reports ``bw_bytes`` (bytes/s), ``io_bytes`` (bytes) and latency
objects ``clat_ns``/``lat_ns`` in nanoseconds.  fio 2.x reported ``bw`` in
KiB/s, ``io_bytes`` in KiB (despite the name; 3.x added ``io_kbytes`` and made
``io_bytes`` bytes) and ``clat``/``lat`` in microseconds.  Terse output is in
KiB, KiB/s, milliseconds and microseconds (HOWTO, "Terse output").  The normal
text output prints rounded, unit-suffixed figures; they are taken as printed.
"""

from __future__ import annotations

import json
import re

from .common import (
    NUMBER,
    ParseError,
    bytes_of,
    count_of,
    dec,
    from_json_number,
    ns_of,
    num,
    record,
)

DIRECTIONS = ("read", "write", "trim")
# Options worth keeping on a record (as given: fio prints them as strings).
OPTION_KEYS = (
    "rw",
    "readwrite",
    "bs",
    "blocksize",
    "iodepth",
    "numjobs",
    "ioengine",
    "direct",
    "size",
    "runtime",
    "time_based",
    "rwmixread",
    "fsync",
    "buffered",
    "filename",
    "directory",
    "group_reporting",
    "sync",
)


def _options(global_opts: dict, job_opts: dict) -> dict:
    merged = dict(global_opts or {})
    merged.update(job_opts or {})
    out = {}
    for key in OPTION_KEYS:
        if key in merged:
            name = {"readwrite": "rw", "blocksize": "bs"}.get(key, key)
            out[name] = merged[key]
    return out


def _percentiles(block) -> dict:
    """A latency block's percentiles by their float key ("99.900000" ->
    99.9), the first of equal keys kept; keys that are not numbers left
    out.  Read once per block, for the three percentiles taken from it."""
    out: dict = {}
    for k, v in ((block or {}).get("percentile") or {}).items():
        try:
            out.setdefault(float(k), v)
        except ValueError:
            continue
    return out


def _percentile(pct: dict, key: str, scale: int, source: str, what: str):
    if float(key) in pct:
        return from_json_number(pct[float(key)], scale, source, what)
    return None


def _lat(block, field: str, scale: int, source: str, what: str):
    if not block:
        return None
    return from_json_number(block.get(field), scale, source, what)


def _document(text: str, loads):
    """The JSON document ``text`` starts with (lines fio printed after it
    ignored): by ``loads`` when it reads it whole, else by json's decoder."""
    if loads is not None:
        try:
            return loads(text)
        except ValueError:
            pass  # text after the document (or malformed: json says where)
    return json.JSONDecoder().raw_decode(text)[0]


def parse_json(text: str, source: str, loads=None) -> dict:
    """fio's JSON output; ``loads``: as for ``parsers.parse``."""
    start = text.find("{")
    if start < 0:
        raise ParseError(source, "expected fio JSON output (no '{' found)")
    try:
        doc = _document(text[start:], loads)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"fio JSON is malformed or truncated: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ParseError(source, "expected fio JSON with a 'jobs' list")
    version = doc.get("fio version")
    global_opts = doc.get("global options") or {}
    records = []
    for j, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict):
            raise ParseError(source, f"jobs[{j}] is not an object")
        name = job.get("jobname")
        opts = _options(global_opts, job.get("job options") or {})
        for direction in DIRECTIONS:
            d = job.get(direction)
            if not isinstance(d, dict):
                continue
            where = f"jobs[{j}].{direction}"
            v3 = "bw_bytes" in d or "clat_ns" in d or "io_kbytes" in d
            total_ios = d.get("total_ios")
            io_raw = d.get("io_bytes")
            if (total_ios == 0) or (total_ios is None and not io_raw):
                continue  # this job did no I/O in this direction
            if v3:
                lat_scale = 1
                clat, lat = d.get("clat_ns"), d.get("lat_ns")
                bw = from_json_number(d.get("bw_bytes"), 1, source, f"{where}.bw_bytes")
                if bw is None:
                    bw = from_json_number(d.get("bw"), 1024, source, f"{where}.bw")
                io_bytes = from_json_number(io_raw, 1, source, f"{where}.io_bytes")
            else:
                lat_scale = 1000  # fio 2.x: microseconds
                clat, lat = d.get("clat"), d.get("lat")
                bw = from_json_number(d.get("bw"), 1024, source, f"{where}.bw")
                io_bytes = from_json_number(io_raw, 1024, source, f"{where}.io_bytes")
            runtime_ms = d.get("runtime")
            pct = _percentiles(clat)
            rec = record(
                "fio",
                direction,
                job=name,
                iops=from_json_number(d.get("iops"), 1, source, f"{where}.iops"),
                bw_bytes=bw,
                io_bytes=io_bytes,
                runtime_s=from_json_number(
                    runtime_ms, "0.001", source, f"{where}.runtime"
                ),
                lat_mean_ns=_lat(lat, "mean", lat_scale, source, f"{where}.lat"),
                clat_mean_ns=_lat(clat, "mean", lat_scale, source, f"{where}.clat"),
                clat_p50_ns=_percentile(pct, "50", lat_scale, source, where),
                clat_p99_ns=_percentile(pct, "99", lat_scale, source, where),
                clat_p99_9_ns=_percentile(pct, "99.9", lat_scale, source, where),
                lat_min_ns=_lat(lat, "min", lat_scale, source, f"{where}.lat"),
                lat_max_ns=_lat(lat, "max", lat_scale, source, f"{where}.lat"),
                lat_stdev_ns=_lat(lat, "stddev", lat_scale, source, f"{where}.lat"),
            )
            rec["options"] = dict(opts)
            records.append(rec)
    if not records:
        raise ParseError(source, "fio JSON holds no job with any I/O")
    return {"tool": "fio", "tool_version": version, "records": records}


# Terse: one line per job, fields separated by ';'.  Each direction block has
# 41 fields: io KiB, bw KiB/s, iops, runtime ms, slat min/max/mean/dev (us),
# clat min/max/mean/dev (us), 20 clat percentiles "p%=us", lat
# min/max/mean/dev (us), bw min/max/agg%/mean/dev.  Version 3 has read and
# write blocks, version 4 adds trim.
TERSE_BLOCK = 41
TERSE_FIRST = 5  # 0-based index of the first field of the read block


def _terse_pct(fields: list, wanted: str, source: str):
    for f in fields:
        if "=" not in f:
            continue
        k, v = f.split("=", 1)
        k = k.rstrip("%")
        try:
            if float(k) == float(wanted) and float(k) > 0:
                return num(dec(v, source) * 1000)
        except ValueError:
            continue
    return None


def parse_terse(text: str, source: str) -> dict:
    records = []
    version = None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    terse_lines = [ln for ln in lines if re.match(r"^[34];fio-", ln)]
    if not terse_lines:
        raise ParseError(source, "expected fio terse output (lines starting '3;fio-')")
    for n, line in enumerate(terse_lines):
        fields = line.strip().split(";")
        tv = int(fields[0])
        blocks = 2 if tv == 3 else 3
        need = TERSE_FIRST + blocks * TERSE_BLOCK
        if len(fields) < need:
            raise ParseError(
                source,
                f"terse line {n + 1} has {len(fields)} fields; terse version {tv} "
                f"needs at least {need} (truncated?)",
            )
        version = fields[1]
        name = fields[2]
        for b, direction in enumerate(DIRECTIONS[:blocks]):
            f = fields[
                TERSE_FIRST + b * TERSE_BLOCK : TERSE_FIRST + (b + 1) * TERSE_BLOCK
            ]
            io_kib = dec(f[0], source, "io KiB")
            if io_kib == 0:
                continue

            def us(i, f=f):
                return num(dec(f[i], source, "latency") * 1000)

            rec = record(
                "fio",
                direction,
                job=name,
                io_bytes=num(io_kib * 1024),
                bw_bytes=num(dec(f[1], source, "bandwidth") * 1024),
                iops=num(dec(f[2], source, "iops")),
                runtime_s=num(dec(f[3], source, "runtime") / 1000),
                clat_mean_ns=us(10),
                clat_p50_ns=_terse_pct(f[12:32], "50", source),
                clat_p99_ns=_terse_pct(f[12:32], "99", source),
                clat_p99_9_ns=_terse_pct(f[12:32], "99.9", source),
                lat_min_ns=us(32),
                lat_max_ns=us(33),
                lat_mean_ns=us(34),
                lat_stdev_ns=us(35),
            )
            records.append(rec)
    if not records:
        raise ParseError(source, "fio terse output holds no job with any I/O")
    return {"tool": "fio", "tool_version": version, "records": records}


# Normal (human) output.
_HEADER = re.compile(r"^(?P<name>[^\s:][^:]*): \(g=\d+\): (?P<opts>.*)$")
_JOB = re.compile(r"^(?P<name>[^\s:][^:]*): \(groupid=\d+, jobs=\d+\)")
_DIR3 = re.compile(
    r"^\s*(?P<dir>read|write|trim)\s*: IOPS=(?P<iops>" + NUMBER + r")(?P<isfx>[kMG]?),"
    r" BW=(?P<bw>" + NUMBER + r")(?P<bwu>[KMGTP]?i?B)/s"
    r"(?: \([^)]*\))?"
    r"\((?P<io>" + NUMBER + r")(?P<iou>[KMGTP]?i?B)/(?P<run>\d+)msec\)"
)
_DIR2 = re.compile(
    r"^\s*(?P<dir>read|write|trim)\s*: io=(?P<io>" + NUMBER + r")(?P<iou>[KMGTP]?B),"
    r" bw=(?P<bw>" + NUMBER + r")(?P<bwu>[KMGTP]?B)/s, iops=(?P<iops>\d+)"
    r"(?P<isfx>[kM]?), runt=\s*(?P<run>\d+)msec"
)
_LAT = re.compile(
    r"^\s*(?P<kind>clat|lat|slat) \((?P<unit>nsec|usec|msec)\): min=\s*(?P<min>"
    + NUMBER
    + r")(?P<minsfx>[kM]?), max=\s*(?P<max>"
    + NUMBER
    + r")(?P<maxsfx>[kM]?), avg=\s*(?P<avg>"
    + NUMBER
    + r"), stdev=\s*(?P<dev>"
    + NUMBER
    + r")"
)
_PCT_HEAD = re.compile(r"^\s*clat percentiles \((?P<unit>nsec|usec|msec)\):")
_PCT = re.compile(r"(?P<p>\d+\.\d+)th=\[\s*(?P<v>\d+)\]")
_SUMMARY3 = re.compile(
    r"^\s*(?P<dir>READ|WRITE|TRIM): bw=(?P<bw>" + NUMBER + r")(?P<bwu>[KMGTP]?i?B)/s"
    r".*?io=(?P<io>"
    + NUMBER
    + r")(?P<iou>[KMGTP]?i?B).*?run=(?P<r1>\d+)-(?P<r2>\d+)msec"
)
_SUMMARY2 = re.compile(
    r"^\s*(?P<dir>READ|WRITE|TRIM): io=(?P<io>" + NUMBER + r")(?P<iou>[KMGTP]?B),"
    r" aggrb=(?P<bw>" + NUMBER + r")(?P<bwu>[KMGTP]?B)/s.*maxt=\s*(?P<r2>\d+)msec"
)
_VERSION = re.compile(r"^(fio-\d+\.\d+\S*)")
# fio 2.x prints binary sizes with SI-looking suffixes ("KB" = 1024 bytes).
_V2_UNITS = {"B": "B", "KB": "KiB", "MB": "MiB", "GB": "GiB", "TB": "TiB", "PB": "PiB"}


def _header_options(opts_text: str) -> dict:
    out = {}
    for key in ("rw", "ioengine", "iodepth"):
        m = re.search(r"\b" + key + r"=([^,\s]+)", opts_text)
        if m:
            out[key] = m.group(1)
    m = re.search(r"bs=\(R\) (\S+?)-", opts_text) or re.search(r"bs=(\S+?)-", opts_text)
    if m:
        out["bs"] = m.group(1)
    return out


def parse_normal(text: str, source: str) -> dict:
    version = None
    records = []
    header_opts: dict = {}
    job = None
    current = None
    pct_unit = None
    summaries = []
    for line in text.splitlines():
        m = _VERSION.match(line.strip())
        if m and version is None:
            version = m.group(1)
        m = _HEADER.match(line)
        if m:
            header_opts.setdefault(m.group("name"), _header_options(m.group("opts")))
            continue
        m = _JOB.match(line)
        if m:
            job = m.group("name")
            current = None
            continue
        m = _DIR3.match(line)
        v2 = False
        if not m:
            m = _DIR2.match(line)
            v2 = bool(m)
        if m:
            bwu = (
                _V2_UNITS.get(m.group("bwu"), m.group("bwu")) if v2 else m.group("bwu")
            )
            iou = (
                _V2_UNITS.get(m.group("iou"), m.group("iou")) if v2 else m.group("iou")
            )
            current = record(
                "fio",
                m.group("dir"),
                job=job,
                iops=count_of(m.group("iops"), m.group("isfx"), source),
                bw_bytes=bytes_of(m.group("bw"), bwu, source),
                io_bytes=bytes_of(m.group("io"), iou, source),
                runtime_s=num(dec(m.group("run"), source) / 1000),
            )
            current["options"] = dict(header_opts.get(job or "", {}))
            records.append(current)
            pct_unit = None
            continue
        m = _LAT.match(line)
        if m and current is not None:
            unit = m.group("unit")
            kind = m.group("kind")

            def t(group, sfx=None, m=m, unit=unit):
                value = dec(m.group(group), source)
                if sfx and m.group(sfx):
                    value *= {"k": 1000, "M": 10**6}[m.group(sfx)]
                return ns_of(str(value), unit, source)

            if kind == "clat":
                current["clat_mean_ns"] = t("avg")
            elif kind == "lat":
                current["lat_mean_ns"] = t("avg")
                current["lat_min_ns"] = t("min", "minsfx")
                current["lat_max_ns"] = t("max", "maxsfx")
                current["lat_stdev_ns"] = t("dev")
            continue
        m = _PCT_HEAD.match(line)
        if m and current is not None:
            pct_unit = m.group("unit")
            continue
        if pct_unit and current is not None and "th=[" in line:
            for pm in _PCT.finditer(line):
                key = {
                    "50.00": "clat_p50_ns",
                    "99.00": "clat_p99_ns",
                    "99.90": "clat_p99_9_ns",
                }
                name = key.get(pm.group("p"))
                if name:
                    current[name] = ns_of(pm.group("v"), pct_unit, source)
            continue
        if pct_unit and "th=[" not in line:
            pct_unit = None
        m = _SUMMARY3.match(line)
        v2 = False
        if not m:
            m = _SUMMARY2.match(line)
            v2 = bool(m)
        if m:
            summaries.append((m, v2))
    if not records:
        # Only the group summary lines: bandwidth, io and runtime, nothing else.
        for m, v2 in summaries:
            bwu = (
                _V2_UNITS.get(m.group("bwu"), m.group("bwu")) if v2 else m.group("bwu")
            )
            iou = (
                _V2_UNITS.get(m.group("iou"), m.group("iou")) if v2 else m.group("iou")
            )
            records.append(
                record(
                    "fio",
                    m.group("dir").lower(),
                    bw_bytes=bytes_of(m.group("bw"), bwu, source),
                    io_bytes=bytes_of(m.group("io"), iou, source),
                    runtime_s=num(dec(m.group("r2"), source) / 1000),
                )
            )
    if not records:
        raise ParseError(
            source,
            "expected fio normal output: a line like '  read: IOPS=..., BW=...' or "
            "a summary line '   READ: bw=..., io=..., run=...msec'",
        )
    return {"tool": "fio", "tool_version": version, "records": records}
