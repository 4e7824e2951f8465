"""YABS (Yet-Another-Bench-Script) disk results: its JSON (``-j``, ``-w``)
and its text as people paste it.

YABS runs one fio job per block size (4k, 64k, 512k, 1m): ``--rw=randrw
--rwmixread=50 --iodepth=64 --numjobs=2 --ioengine=libaio --direct=1
--runtime=30 --group_reporting --minimal`` (yabs.sh, ``disk_test``), and
keeps fio's terse read and write bandwidth (KiB/s) and IOPS.  Those job
options are the script's, not the file's; they are the same in every
version that writes these formats.

- JSON ``fio[].speed_r``/``speed_w`` are fio's terse KiB/s (labelled
  "KBps"): bytes/s = value x 1024, exactly; ``iops_r``/``iops_w`` as fio gave.
- Text "405.41 MB/s (101.3k)": before v2026-07-03 YABS divided KiB/s by
  1000 and called it MB/s (so 1 "MB/s" = 1,024,000 bytes/s); from
  v2026-07-03 (yabs#120) it converts to real MB/s.  Both are cut (not
  rounded) to two decimals, IOPS to one decimal of thousands ("101.3k"):
  the figures are stored as printed and the result marked approximate.
  Without the banner's version the unit is unknown and bandwidth is absent.
"""

from __future__ import annotations

import json
import re

from .common import NUMBER, ParseError, count_of, dec, from_json_number, num, record

# The version from which YABS's text prints decimal MB/s (yabs#120).
SI_SINCE = "v2026-07-03"
_TEXT_UNITS_OLD = {"KB/s": 1024, "MB/s": 1024 * 1000, "GB/s": 1024 * 10**6}
_TEXT_UNITS_SI = {"KB/s": 10**3, "MB/s": 10**6, "GB/s": 10**9}
JOB_OPTIONS = {
    "rw": "randrw",
    "rwmixread": "50",
    "iodepth": "64",
    "numjobs": "2",
    "ioengine": "libaio",
    "direct": "1",
    "runtime": "30",
}
_VERSION = re.compile(r"\b(v\d{4}-\d{2}-\d{2})\b")
_HEAD = re.compile(r"fio Disk Speed Tests \(Mixed R/W 50/50\)")
_BS_ROW = re.compile(
    r"^\s*Block Size\s*\|\s*(?P<a>\S+)\s*\(IOPS\)\s*\|\s*(?P<b>\S+)\s*\(IOPS\)\s*$"
)
_CELL = (
    r"(?P<{n}v>"
    + NUMBER
    + r")\s*(?P<{n}u>[KMG]B/s)\s*\(\s*(?P<{n}i>"
    + NUMBER
    + r")(?P<{n}s>k?)\s*\)"
)
_ROW = re.compile(
    r"^\s*(?P<dir>Read|Write|Total)\s*\|\s*"
    + _CELL.format(n="a")
    + r"\s*\|\s*(?:"
    + _CELL.format(n="b")
    + r")?\s*$"
)
_INFO = re.compile(r"^\s*(?P<k>Processor|Distro|Kernel|VM Type|Disk)\s*:\s*(?P<v>.*)$")


def looks_like_json(text: str) -> bool:
    return '"fio"' in text and '"speed_units"' in text


def looks_like_text(text: str) -> bool:
    return bool(_HEAD.search(text))


def _job(bs: str, direction: str, **figures) -> dict:
    rec = record("fio", direction, job=f"rand_rw_{bs}", **figures)
    rec["options"] = {**JOB_OPTIONS, "bs": bs}
    return rec


def parse_json(text: str, source: str, direction=None, loads=None) -> dict:
    """YABS's JSON output; ``loads``: as for ``parsers.parse``."""
    try:
        doc = (loads or json.loads)(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            source, f"YABS JSON is malformed or truncated: {exc}"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("fio"), list):
        raise ParseError(source, "expected YABS JSON with a 'fio' list")
    records = []
    for i, row in enumerate(doc["fio"]):
        where = f"{source}: fio[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("bs"), str):
            raise ParseError(where, "expected an object with 'bs'")
        units = row.get("speed_units")
        if units != "KBps":
            raise ParseError(where, f"speed_units {units!r}: only 'KBps' is known")
        bs = row["bs"].lower()
        for d, speed, iops in (
            ("read", "speed_r", "iops_r"),
            ("write", "speed_w", "iops_w"),
        ):
            if row.get(speed) is None and row.get(iops) is None:
                continue
            records.append(
                _job(
                    bs,
                    d,
                    bw_bytes=from_json_number(row.get(speed), 1024, where, speed),
                    iops=from_json_number(row.get(iops), 1, where, iops),
                )
            )
    if not records:
        raise ParseError(source, "YABS JSON holds no fio result (fio skipped?)")
    os_info = doc.get("os") or {}
    meta = {
        "version": doc.get("version"),
        "vm": os_info.get("vm"),
        "distro": os_info.get("distro"),
        "kernel": os_info.get("kernel"),
        "cpu": (doc.get("cpu") or {}).get("model"),
        "partition": doc.get("partition"),
    }
    return {
        "tool": "fio",
        "tool_version": f"YABS {doc.get('version') or ''}".strip(),
        "records": records,
        "meta": {k: v for k, v in meta.items() if v is not None},
    }


def _complete(rows: list, n, source: str) -> None:
    """A block of the table has its Read, Write and Total rows, in order."""
    if rows and rows != ["Read", "Write", "Total"]:
        where = f"before line {n}" if n else "at the end"
        raise ParseError(
            source,
            f"{where}: a block of the fio table has rows {', '.join(rows)}; "
            "expected Read, Write, Total (truncated or edited?)",
        )


def parse_text(text: str, source: str, direction=None) -> dict:
    if not _HEAD.search(text):
        raise ParseError(
            source,
            "expected YABS output with a 'fio Disk Speed Tests (Mixed R/W 50/50)' "
            "section",
        )
    m = _VERSION.search(text[: text.find("fio Disk Speed")])
    version = m.group(1) if m else None
    units = None
    if version:
        units = _TEXT_UNITS_SI if version >= SI_SINCE else _TEXT_UNITS_OLD
    notes = []
    if units is None:
        notes.append(
            "no YABS version banner: its MB/s meant 1,024,000 bytes/s before "
            f"{SI_SINCE} and 1,000,000 after, so bandwidth is left out"
        )
    meta = {"version": version}
    records = []
    rows: list = []
    sizes = None
    section = False
    for n, line in enumerate(text.splitlines(), 1):
        info = _INFO.match(line)
        if info:
            meta[info.group("k").lower().replace(" ", "_")] = info.group("v").strip()
            continue
        if _HEAD.search(line):
            section = True
            continue
        if not section:
            continue
        b = _BS_ROW.match(line)
        if b:
            _complete(rows, n, source)
            rows = []
            sizes = (b.group("a").lower(), b.group("b").lower())
            continue
        r = _ROW.match(line)
        if r:
            if sizes is None:
                raise ParseError(source, f"line {n}: a result row before 'Block Size'")
            rows.append(r.group("dir"))
            if r.group("dir") == "Total":
                continue
            for col, bs in (("a", sizes[0]), ("b", sizes[1])):
                if r.group(col + "v") is None:
                    continue
                where = f"{source}: line {n}"
                bw = None
                if units:
                    bw = num(dec(r.group(col + "v"), where) * units[r.group(col + "u")])
                records.append(
                    _job(
                        bs,
                        r.group("dir").lower(),
                        bw_bytes=bw,
                        iops=count_of(r.group(col + "i"), r.group(col + "s"), where),
                    )
                )
            continue
        if line.strip() and not line.strip().startswith(("-", "|")) and sizes:
            if re.match(r"^\s*(Block Size|Read|Write|Total)\b", line):
                raise ParseError(
                    source,
                    f"line {n}: a YABS result row that does not parse: "
                    f"{line.strip()[:80]!r}",
                )
            if records:
                break  # the next section (iperf, Geekbench)
    if not records:
        raise ParseError(source, "YABS text holds no fio result row (truncated?)")
    _complete(rows, None, source)
    out = {
        "tool": "fio",
        "tool_version": f"YABS {version}" if version else "YABS",
        "records": records,
        "approximate": True,
        "meta": {k: v for k, v in meta.items() if v is not None},
    }
    if notes:
        out["notes"] = notes
    return out
