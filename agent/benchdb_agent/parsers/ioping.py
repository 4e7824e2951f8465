"""ioping output: human statistics, ``-B`` raw lines, ``-J`` JSON.

Human output (all versions) ends with a statistics block; 1.0 and newer say
"N requests completed in T, S read|written, I iops, R/s" with a unit on every
time, older ones "N requests completed in T ms, I iops, R mb/s" and one unit
after "min/avg/max/mdev".  ``-B`` prints one raw line: 8 fields in
microseconds before 1.0, 10 fields in nanoseconds from 1.0 on.  ``-J`` (1.2+)
is a JSON array whose last element carries ``stat`` in nanoseconds.  Neither
raw form says whether the test read or wrote, so the caller names it.
"""

from __future__ import annotations

import json
import re

from .common import (
    NO_DIRECTION,
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

_REQUEST = re.compile(
    r"^(?P<size>"
    + NUMBER
    + r") ?(?P<unit>[KMGT]?i?B|bytes) (?P<arrow><<<|>>>|from|to) "
)
_STATS_HEAD = re.compile(r"^--- .* ioping statistics ---$")
_COMPLETED = re.compile(
    r"^(?P<count>"
    + NUMBER
    + r") ?(?P<csfx>[kMG]?) requests completed in (?P<t>"
    + NUMBER
    + r") ?(?P<tu>ns|us|ms|s|min|hour)"
    r"(?:, (?P<size>" + NUMBER + r") ?(?P<su>[KMGT]?i?B) (?P<dir>read|written))?"
    r", (?P<iops>" + NUMBER + r") ?(?P<isfx>[kMG]?) iops"
    r", (?P<rate>" + NUMBER + r") ?(?P<ru>[KMGT]?i?B|[kmg]?b)/s"
)
_MINMAX_NEW = re.compile(
    r"^min/avg/max/mdev = (?P<min>"
    + NUMBER
    + r") (?P<minu>\w+) / (?P<avg>"
    + NUMBER
    + r") (?P<avgu>\w+) / (?P<max>"
    + NUMBER
    + r") (?P<maxu>\w+) / (?P<mdev>"
    + NUMBER
    + r") (?P<mdevu>\w+)"
)
_MINMAX_OLD = re.compile(
    r"^min/avg/max/mdev = (?P<min>"
    + NUMBER
    + r")/(?P<avg>"
    + NUMBER
    + r")/(?P<max>"
    + NUMBER
    + r")/(?P<mdev>"
    + NUMBER
    + r") (?P<unit>\w+)"
)
# Old ioping printed "mb/s" meaning MiB/s (it divided by 1 << 20).
_OLD_RATE = {"b": "B", "kb": "KiB", "mb": "MiB", "gb": "GiB"}


def parse_human(text: str, source: str, direction: str | None = None) -> dict:
    lines = [ln.strip() for ln in text.splitlines()]
    seen_dir = None
    size = None
    for ln in lines:
        m = _REQUEST.match(ln)
        if m:
            seen_dir = "read" if m.group("arrow") in ("<<<", "from") else "write"
            unit = "B" if m.group("unit") == "bytes" else m.group("unit")
            size = bytes_of(m.group("size"), unit, source)
    try:
        start = next(i for i, ln in enumerate(lines) if _STATS_HEAD.match(ln))
    except StopIteration:
        raise ParseError(
            source,
            "expected ioping output with a '--- ... ioping statistics ---' block",
        ) from None
    completed = minmax = None
    for ln in lines[start + 1 :]:
        completed = completed or _COMPLETED.match(ln)
        minmax = minmax or _MINMAX_NEW.match(ln) or _MINMAX_OLD.match(ln)
    if not completed:
        raise ParseError(
            source, "ioping statistics lack the 'N requests completed in ...' line"
        )
    if completed.group("dir"):
        seen_dir = "read" if completed.group("dir") == "read" else "write"
    direction = seen_dir or direction
    rate_unit = completed.group("ru")
    rate_unit = _OLD_RATE.get(rate_unit, rate_unit)
    io_bytes = None
    if completed.group("size"):
        io_bytes = bytes_of(completed.group("size"), completed.group("su"), source)
    rec = record(
        "ioping",
        direction,
        iops=count_of(completed.group("iops"), completed.group("isfx"), source),
        bw_bytes=bytes_of(completed.group("rate"), rate_unit, source),
        io_bytes=io_bytes,
        runtime_s=num(
            dec(ns_of(completed.group("t"), completed.group("tu"), source)) / 10**9
        ),
    )
    if minmax is not None:
        gd = minmax.groupdict()
        if "unit" in gd and gd.get("unit"):
            units = dict.fromkeys(("min", "avg", "max", "mdev"), gd["unit"])
        else:
            units = {k: gd[k + "u"] for k in ("min", "avg", "max", "mdev")}
        rec["lat_min_ns"] = ns_of(gd["min"], units["min"], source)
        rec["lat_mean_ns"] = ns_of(gd["avg"], units["avg"], source)
        rec["lat_max_ns"] = ns_of(gd["max"], units["max"], source)
        rec["lat_stdev_ns"] = ns_of(gd["mdev"], units["mdev"], source)
    # Rapid runs print "41.1 k requests": the count is then rounded.
    rec["options"] = {
        "count": count_of(completed.group("count"), completed.group("csfx"), source)
    }
    if size is not None:
        rec["options"]["size"] = size
    return _result(None, rec, direction)


def _result(version, rec, direction) -> dict:
    out = {"tool": "ioping", "tool_version": version, "records": [rec]}
    if direction is None:
        out["notes"] = [NO_DIRECTION.format(tool="ioping")]
    return out


def parse_batch(text: str, source: str, direction: str | None = None) -> dict:
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    raw = [f for f in lines if len(f) in (8, 10) and all(_is_number(x) for x in f)]
    if not raw:
        raise ParseError(
            source,
            "expected an ioping -B line of 8 (before 1.0, usec) "
            "or 10 (1.0+, nsec) numbers",
        )
    f = raw[-1]
    scale = 1 if len(f) == 10 else 1000  # 8 fields: microseconds
    count, total, iops, bps, mn, avg, mx, mdev = f[:8]
    rec = record(
        "ioping",
        direction,
        iops=num(dec(iops, source)),
        bw_bytes=num(dec(bps, source)),
        runtime_s=num(dec(total, source) * scale / 10**9),
        lat_min_ns=num(dec(mn, source) * scale),
        lat_mean_ns=num(dec(avg, source) * scale),
        lat_max_ns=num(dec(mx, source) * scale),
        lat_stdev_ns=num(dec(mdev, source) * scale),
    )
    rec["options"] = {"count": int(dec(count, source))}
    return _result(">=1.0" if len(f) == 10 else "<1.0", rec, direction)


def _is_number(s: str) -> bool:
    return re.fullmatch(NUMBER, s) is not None


def parse_json(
    text: str, source: str, direction: str | None = None, loads=None
) -> dict:
    """ioping -J output; ``loads``: as for ``parsers.parse``."""
    try:
        doc = (loads or json.loads)(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            source, f"ioping JSON is malformed or truncated: {exc}"
        ) from None
    if not isinstance(doc, list) or not doc:
        raise ParseError(source, "expected ioping -J output: a JSON array")
    stat = None
    seen_dir = None
    size = None
    for item in doc:
        if not isinstance(item, dict):
            continue
        io = item.get("io")
        if isinstance(io, dict) and io.get("operation") in ("read", "write"):
            seen_dir = io["operation"]
            size = io.get("size")
        if isinstance(item.get("stat"), dict):
            stat = item["stat"]
    if stat is None:
        raise ParseError(source, "ioping JSON has no final 'stat' object (truncated?)")
    direction = seen_dir or direction

    def n(key, scale=1):
        return from_json_number(stat.get(key), scale, source, f"stat.{key}")

    rec = record(
        "ioping",
        direction,
        iops=n("iops"),
        bw_bytes=n("bps"),
        io_bytes=n("size"),
        runtime_s=n("time", "0.000000001"),
        lat_min_ns=n("min"),
        lat_mean_ns=n("avg"),
        lat_max_ns=n("max"),
        lat_stdev_ns=n("mdev"),
    )
    rec["options"] = {"count": stat.get("count")}
    if size is not None:
        rec["options"]["size"] = size
    return _result(">=1.2", rec, direction)
