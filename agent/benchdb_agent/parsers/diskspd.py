"""DiskSpd output: XML (``-Rxml``) and the default text report.

One record per target, time span and direction.  DiskSpd counts bytes and
I/Os exactly per thread and target and prints the test time to 10 ms
(``TestTimeSeconds``, "actual test time"); bandwidth and IOPS are those
exact counts divided by that time, as DiskSpd's own text report and
PerfKitBenchmarker's parser compute them.  Latency (only with ``-L``) is
in milliseconds to three decimals: the mean and standard deviation of the
whole I/O (``lat_mean_ns``, ``lat_stdev_ns``), min and max, and the
percentiles 50, 99 and 99.9 (DiskSpd's percentiles are of the whole I/O,
stored in the ``clat_p*`` fields, the record's only percentile fields).

The profile the run used (block size, random or sequential, outstanding
I/Os per thread, threads, write ratio, OS cache disabled, file size,
duration) becomes fio-like options: ``rw``, ``bs``, ``iodepth``,
``numjobs``, ``rwmixread``, ``direct``, ``size``, ``runtime``.
"""

from __future__ import annotations

import re
from decimal import Decimal

from .common import NUMBER, ParseError, dec, num, record, xml_root, xml_text

MS = Decimal(10**6)  # nanoseconds per millisecond


def looks_like_xml(text: str) -> bool:
    head = text[:2000]
    return "<Results>" in head and ("<TimeSpan>" in text or "<Profile>" in text)


def looks_like_text(text: str) -> bool:
    return "Input parameters:" in text[:3000] and "Total IO" in text


def _bs_text(size: int) -> str:
    if size % 2**20 == 0:
        return f"{size // 2**20}m"
    if size % 1024 == 0:
        return f"{size // 1024}k"
    return str(size)


def _options(random: bool, block: int, depth, threads, write_ratio, **extra) -> dict:
    if write_ratio in (None, ""):
        rw = None
    elif int(write_ratio) == 0:
        rw = "randread" if random else "read"
    elif int(write_ratio) == 100:
        rw = "randwrite" if random else "write"
    else:
        rw = "randrw" if random else "rw"
    out = {"bs": _bs_text(block)}
    if rw:
        out["rw"] = rw
    if rw in ("randrw", "rw"):
        out["rwmixread"] = str(100 - int(write_ratio))
    if depth is not None:
        out["iodepth"] = str(depth)
    if threads is not None:
        out["numjobs"] = str(threads)
    out["ioengine"] = "diskspd"
    out.update({k: str(v) for k, v in extra.items() if v is not None})
    return out


def _int(el, path: str, source: str, default=None):
    value = xml_text(el, path)
    if value is None:
        return default
    if not re.fullmatch(r"\d+", value):
        raise ParseError(source, f"<{path}> is {value!r}, not a whole number")
    return int(value)


def parse_xml(text: str, source: str, direction=None) -> dict:
    root = xml_root(text, source, "DiskSpd", "Results")
    version = xml_text(root, "System/Tool/Version")
    spans_profile = root.findall("Profile/TimeSpans/TimeSpan")
    spans = root.findall("TimeSpan")
    if not spans:
        raise ParseError(source, "DiskSpd XML has no <TimeSpan> result (truncated?)")
    records = []
    for s, span in enumerate(spans):
        where = f"{source}: TimeSpan[{s}]"
        if span.find("Error") is not None:
            raise ParseError(
                where, xml_text(span, "Error") or "DiskSpd reported an error"
            )
        seconds = xml_text(span, "TestTimeSeconds")
        if seconds is None:
            raise ParseError(where, "has no <TestTimeSeconds>")
        seconds = dec(seconds, where, "test time")
        if seconds == 0:
            raise ParseError(where, "<TestTimeSeconds> is 0")
        profile = spans_profile[s] if s < len(spans_profile) else None
        targets = profile.findall("Targets/Target") if profile is not None else []
        span_threads = (
            _int(profile, "ThreadCount", where) if profile is not None else None
        )
        duration = _int(profile, "Duration", where) if profile is not None else None
        latency = span.find("Latency")
        # Totals per target path, over threads.
        totals: dict = {}
        for thread in span.findall("Thread"):
            for target in thread.findall("Target"):
                path = xml_text(target, "Path") or ""
                t = totals.setdefault(path, dict.fromkeys(("rb", "rc", "wb", "wc"), 0))
                t["rb"] += _int(target, "ReadBytes", where, 0)
                t["rc"] += _int(target, "ReadCount", where, 0)
                t["wb"] += _int(target, "WriteBytes", where, 0)
                t["wc"] += _int(target, "WriteCount", where, 0)
        if not totals:
            raise ParseError(where, "has no <Thread>/<Target> counts (truncated?)")
        for path, t in totals.items():
            spec = next((x for x in targets if xml_text(x, "Path") == path), None)
            options = {}
            if spec is not None:
                threads = (
                    span_threads
                    if span_threads
                    else _int(spec, "ThreadsPerFile", where)
                )
                options = _options(
                    xml_text(spec, "RandomAccess") == "true",
                    _int(spec, "BlockSize", where),
                    _int(spec, "RequestCount", where),
                    threads,
                    xml_text(spec, "WriteRatio"),
                    direct="1" if xml_text(spec, "DisableOSCache") == "true" else "0",
                    size=_int(spec, "FileSize", where),
                    runtime=duration,
                )
            for d, nbytes, count in (
                ("read", t["rb"], t["rc"]),
                ("write", t["wb"], t["wc"]),
            ):
                if not count:
                    continue
                rec = record(
                    "diskspd",
                    d,
                    job=f"{path} #{s + 1}" if len(spans) > 1 else path,
                    io_bytes=nbytes,
                    runtime_s=num(seconds),
                    bw_bytes=num(Decimal(nbytes) / seconds),
                    iops=num(Decimal(count) / seconds),
                )
                if latency is not None and len(totals) == 1:
                    _xml_latency(rec, latency, d, where)
                rec["options"] = dict(options)
                records.append(rec)
    if not records:
        raise ParseError(source, "DiskSpd XML holds no target with any I/O")
    return {
        "tool": "other",
        "tool_version": f"DiskSpd {version}" if version else "DiskSpd",
        "records": records,
    }


def _xml_latency(rec: dict, latency, direction: str, where: str) -> None:
    side = "Read" if direction == "read" else "Write"
    mean = xml_text(latency, f"Average{side}Milliseconds")
    stdev = xml_text(latency, f"{side}LatencyStdev")
    if mean is not None:
        rec["lat_mean_ns"] = num(dec(mean, where) * MS)
    if stdev is not None:
        rec["lat_stdev_ns"] = num(dec(stdev, where) * MS)
    for bucket in latency.findall("Bucket"):
        p = xml_text(bucket, "Percentile")
        value = xml_text(bucket, f"{side}Milliseconds")
        if p is None or value is None:
            continue
        key = {
            "0": "lat_min_ns",
            "50": "clat_p50_ns",
            "99": "clat_p99_ns",
            "99.9": "clat_p99_9_ns",
            "100": "lat_max_ns",
        }.get(p)
        if key:
            rec[key] = num(dec(value, where) * MS)


# Text report ------------------------------------------------------------------

_TIME = re.compile(r"^actual test time:\s*(?P<t>" + NUMBER + r")s\s*$")
_TOTAL = re.compile(
    r"^total:\s*(?P<bytes>\d+)\s*\|\s*(?P<ios>\d+)\s*\|\s*(?P<mibs>"
    + NUMBER
    + r")\s*\|\s*(?P<iops>"
    + NUMBER
    + r")\s*(?:\|\s*(?P<lat>"
    + NUMBER
    + r")\s*(?:\|\s*(?P<iopsdev>"
    + NUMBER
    + r")\s*)?(?:\|\s*(?P<latdev>"
    + NUMBER
    + r"|N/A)\s*)?)?$"
)
_PCT = re.compile(
    r"^\s*(?P<p>min|max|\d+th|\d-nines)\s*\|\s*(?P<r>" + NUMBER + r"|N/A)\s*\|"
    r"\s*(?P<w>" + NUMBER + r"|N/A)\s*\|\s*(?P<t>" + NUMBER + r"|N/A)\s*$"
)
_PCT_KEYS = {
    "min": "lat_min_ns",
    "50th": "clat_p50_ns",
    "99th": "clat_p99_ns",
    "3-nines": "clat_p99_9_ns",
    "max": "lat_max_ns",
}
_PARAM = {
    "block": re.compile(r"^\s*block size:\s*(?P<v>\d+)\s*(?P<u>KiB|MiB)?"),
    "random": re.compile(r"^\s*using random I/O"),
    "sequential": re.compile(r"^\s*using sequential I/O"),
    "depth": re.compile(
        r"^\s*number of outstanding I/O operations(?: per thread)?:\s*(?P<v>\d+)"
    ),
    "threads": re.compile(r"^\s*threads per file:\s*(?P<v>\d+)"),
    "duration": re.compile(r"^\s*duration:\s*(?P<v>\d+)s"),
    "mix": re.compile(r"read/write ratio:\s*(?P<r>\d+)/(?P<w>\d+)"),
    "reading": re.compile(r"^\s*performing read test"),
    "writing": re.compile(r"^\s*performing write test"),
    "nocache": re.compile(r"^\s*software cache disabled"),
    "cache": re.compile(r"^\s*using software cache"),
}


def parse_text(text: str, source: str, direction=None) -> dict:
    lines = text.splitlines()
    params: dict = {}
    seconds = None
    section = None
    totals: dict = {}
    pct: dict = {"read": {}, "write": {}}
    for n, line in enumerate(lines, 1):
        for key, rx in _PARAM.items():
            m = rx.search(line)
            if m and key not in params:
                params[key] = m
        m = _TIME.match(line.strip())
        if m:
            if seconds is not None:
                raise ParseError(
                    source,
                    f"line {n}: a second time span; import one DiskSpd time span "
                    "per file",
                )
            seconds = dec(m.group("t"), f"{source}: line {n}", "test time")
            continue
        head = line.strip()
        if head in ("Total IO", "Read IO", "Write IO"):
            section = head.split()[0].lower()
            continue
        m = _TOTAL.match(head)
        if m and section:
            totals[section] = (m, n)
            section = None
            continue
        m = _PCT.match(line)
        if m and m.group("p") in _PCT_KEYS:
            for d, g in (("read", "r"), ("write", "w")):
                if m.group(g) != "N/A":
                    pct[d][_PCT_KEYS[m.group("p")]] = num(
                        dec(m.group(g), f"{source}: line {n}") * MS
                    )
    if seconds is None:
        raise ParseError(
            source, "expected DiskSpd's text report: no 'actual test time:' line"
        )
    if seconds == 0:
        raise ParseError(source, "'actual test time' is 0 s")
    missing = [s for s in ("total", "read", "write") if s not in totals]
    if missing:
        raise ParseError(
            source,
            "DiskSpd report lacks the 'total:' line of "
            + ", ".join(f"{s.title()} IO" for s in missing)
            + " (truncated?)",
        )
    write_ratio = None
    if "mix" in params:
        write_ratio = int(params["mix"].group("w"))
    elif "writing" in params:
        write_ratio = 100
    elif "reading" in params:
        write_ratio = 0
    options = {}
    if "block" in params:
        options = _options(
            "random" in params,
            int(params["block"].group("v"))
            * {None: 1, "KiB": 1024, "MiB": 2**20}[params["block"].group("u")],
            params["depth"].group("v") if "depth" in params else None,
            params["threads"].group("v") if "threads" in params else None,
            write_ratio,
            direct="1" if "nocache" in params else ("0" if "cache" in params else None),
            runtime=params["duration"].group("v") if "duration" in params else None,
        )
    records = []
    for d in ("read", "write"):
        m, n = totals[d]
        where = f"{source}: line {n}"
        count = int(m.group("ios"))
        if not count:
            continue
        nbytes = int(m.group("bytes"))
        rec = record(
            "diskspd",
            d,
            job="diskspd",
            io_bytes=nbytes,
            runtime_s=num(seconds),
            bw_bytes=num(Decimal(nbytes) / seconds),
            iops=num(Decimal(count) / seconds),
        )
        if m.group("lat"):
            rec["lat_mean_ns"] = num(dec(m.group("lat"), where) * MS)
        if m.group("latdev") not in (None, "N/A"):
            rec["lat_stdev_ns"] = num(dec(m.group("latdev"), where) * MS)
        for key, value in pct[d].items():
            rec[key] = value
        rec["options"] = dict(options)
        records.append(rec)
    if not records:
        raise ParseError(source, "DiskSpd report holds no read or write I/O")
    return {"tool": "other", "tool_version": "DiskSpd", "records": records}
