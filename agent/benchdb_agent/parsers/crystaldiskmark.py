"""CrystalDiskMark (5 to 8) and KDiskMark text exports ("Copy" / "Save text").

One record per result row and direction, named by its workload ("Read
RND4K Q32T1"), with the row's queue depth, threads and block size as fio
options (``rw``, ``bs``, ``iodepth``, ``numjobs``) so that
``workload.identify`` can say which suite test it is.

Units, each from the tool's own code or header:

- CrystalDiskMark: "MB/s = 1,000,000 bytes/s" (its header); the latency in
  ``< us>`` (CDM 7 and later) is DiskSpd's mean latency of an I/O, stored as
  ``lat_mean_ns``.  CDM 5 and 6 print no latency, and their sequential rows
  no block size (absent, not assumed).
- KDiskMark: its "MB/s" is fio's ``bw`` (KiB/s) divided by 1000
  (``src/benchmark.cpp``: ``value("bw").toInt() / 1000.0``), so one printed
  "MB/s" is 1,024,000 bytes/s; its ``< us>`` is fio's ``clat_ns`` mean, stored
  as ``clat_mean_ns``.

Mix rows ("[Mix] Read 70%/Write 30%") have no single direction: they are
returned under ``mixed`` (shown in previews), not as records.  The footer
(profile, test size, loops, measure and interval times, date, OS, comment,
KDiskMark's target and fio version) is returned under ``meta``.
"""

from __future__ import annotations

import re

from .common import NUMBER, ParseError, dec, num, record

_CDM_ROW = re.compile(
    r"^\s*(?P<kind>SEQ|RND)\s+(?P<bs>\d+)\s*(?P<bsu>KiB|MiB)\s*"
    r"\(Q=\s*(?P<q>\d+),\s*T=\s*(?P<t>\d+)\)\s*:\s*(?P<mbs>" + NUMBER + r")\s*MB/s"
    r"\s*\[\s*(?P<iops>" + NUMBER + r")\s*IOPS\s*\]"
    r"(?:\s*<\s*(?P<lat>" + NUMBER + r")\s*us\s*>)?\s*$"
)
_KDM_ROW = re.compile(
    r"^\s*(?P<kind>Sequential|Random)\s+(?P<bs>\d+)\s*(?P<bsu>KiB|MiB)\s*"
    r"\(Q=\s*(?P<q>\d+),\s*T=\s*(?P<t>\d+)\)\s*:\s*(?P<mbs>" + NUMBER + r")\s*MB/s"
    r"\s*\[\s*(?P<iops>" + NUMBER + r")\s*IOPS\s*\]"
    r"(?:\s*<\s*(?P<lat>" + NUMBER + r")\s*us\s*>)?\s*$"
)
# CDM 5 and 6: "Sequential Read (Q= 32,T= 1) :   554.872 MB/s",
# "Sequential Write (T= 1) : ...", "Random Read 4KiB (Q= 8,T= 8) : ... [ 1926.8 IOPS]".
_OLD_ROW = re.compile(
    r"^\s*(?P<kind>Sequential|Random)\s+(?P<dir>Read|Write)\s*"
    r"(?:(?P<bs>\d+)\s*(?P<bsu>KiB|MiB))?\s*"
    r"\((?:Q=\s*(?P<q>\d+)\s*,\s*)?T=\s*(?P<t>\d+)\)\s*:\s*(?P<mbs>" + NUMBER + r")\s*"
    r"MB/s(?:\s*\[\s*(?P<iops>" + NUMBER + r")\s*IOPS\s*\])?\s*$"
)
_SECTION = re.compile(r"^\s*\[(?P<name>Read|Write|Mix)\](?P<rest>.*)$")
_FOOTER = re.compile(
    r"^\s*(?P<key>Profile|Test|Mode|Time|Date|OS|Comment|Target)\s*:\s?(?P<value>.*)$"
)
_CDM_HEAD = re.compile(r"CrystalDiskMark\s+(?P<v>\d+(?:\.\d+)*\S*)")
_KDM_HEAD = re.compile(r"KDiskMark\s*\((?P<v>[^)]+)\)")
_FIO_HEAD = re.compile(r"Flexible I/O Tester\s*\((?P<v>fio-[^)]+)\)")
_MIX = re.compile(r"Read\s*(?P<r>\d+)%\s*/\s*Write\s*(?P<w>\d+)%")
_SIZE = re.compile(r"(?P<n>" + NUMBER + r")\s*(?P<u>MiB|GiB|MB|GB)")
_LOOPS = re.compile(r"\(x(?P<n>\d+)\)")
_SECONDS = re.compile(r"(?P<n>\d+)\s*(?P<u>sec|min)")

_FOOTER_OPTIONS = (
    ("test_size_bytes", "size"),
    ("measure_s", "runtime"),
    ("loops", "loops"),
    ("interval_s", "interval_s"),
    ("profile", "profile"),
)
CDM_MBS = 10**6  # CrystalDiskMark's header: "MB/s = 1,000,000 bytes/s"
KDM_MBS = 1024 * 1000  # KDiskMark: fio's KiB/s divided by 1000
_SIZE_UNITS = {"MiB": 2**20, "GiB": 2**30, "MB": 2**20, "GB": 2**30}


def looks_like(text: str) -> bool:
    head = text[:4000]
    return bool(_CDM_HEAD.search(head) or _KDM_HEAD.search(head)) and bool(
        re.search(r"MB/s", text)
    )


def _bs(number: str | None, unit: str | None) -> str | None:
    """A block size as fio writes it ("4k", "1m", "128k"), None if unsaid."""
    if not number:
        return None
    return f"{int(number)}{'k' if unit == 'KiB' else 'm'}"


def label(kind: str, bs: str | None, q, t) -> str:
    """CrystalDiskMark's own name of a row: "SEQ1M Q8T1", "RND4K Q32T16"."""
    size = (bs or "").upper()
    return f"{'SEQ' if kind == 'seq' else 'RND'}{size} Q{q}T{t}"


def _footer(meta: dict, key: str, value: str, source: str) -> None:
    value = value.strip()
    if key == "Profile":
        meta["profile"] = value
    elif key == "Test":
        meta["test"] = value
        m = _SIZE.search(value)
        if m:
            unit = m.group("u")
            meta["test_size_bytes"] = num(dec(m.group("n"), source) * _SIZE_UNITS[unit])
        m = _LOOPS.search(value)
        if m:
            meta["loops"] = int(m.group("n"))
        times = re.search(r"Measure:?\s*(.*?)\s*/\s*Interval:?\s*(.*?)\]?$", value)
        if times:
            _times(meta, times.group(1), times.group(2))
        old = re.search(r"Interval=\s*(\d+)\s*sec", value)
        if old:
            meta["interval_s"] = int(old.group(1))
    elif key == "Time":
        times = re.search(r"Measure\s*(.*?)\s*/\s*Interval\s*(.*)$", value)
        if times:
            _times(meta, times.group(1), times.group(2))
    else:
        meta[key.lower()] = value


def _times(meta: dict, measure: str, interval: str) -> None:
    for name, text in (("measure_s", measure), ("interval_s", interval)):
        m = _SECONDS.search(text)
        if m:
            meta[name] = int(m.group("n")) * (60 if m.group("u") == "min" else 1)


def parse(text: str, source: str, direction=None) -> dict:
    head = text[:4000]
    kdm = _KDM_HEAD.search(head)
    cdm = _CDM_HEAD.search(head)
    if not (kdm or cdm):
        raise ParseError(
            source,
            "expected a CrystalDiskMark or KDiskMark text export: no "
            "'CrystalDiskMark <version>' or 'KDiskMark (<version>)' header line",
        )
    tool = "kdiskmark" if kdm else "crystaldiskmark"
    meta: dict = {"tool": tool}
    if kdm:
        meta["version"] = kdm.group("v").strip()
        fio = _FIO_HEAD.search(head)
        if fio:
            meta["fio_version"] = fio.group("v")
        mbs = KDM_MBS
    else:
        meta["version"] = cdm.group("v")
        mbs = CDM_MBS
    records: list = []
    mixed: list = []
    section = None
    mix_read = None
    seen_footer = False
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.strip().startswith(("*", "-", "=")):
            continue
        s = _SECTION.match(line)
        if s:
            section = s.group("name").lower()
            if section == "mix":
                m = _MIX.search(s.group("rest"))
                mix_read = int(m.group("r")) if m else None
            continue
        m = (_KDM_ROW if kdm else _CDM_ROW).match(line)
        old = None if m or kdm else _OLD_ROW.match(line)
        if m or old:
            if seen_footer:
                raise ParseError(
                    source, f"line {n}: a result row after the footer (two exports?)"
                )
            _row(records, mixed, m, old, section, mix_read, mbs, tool, source, n)
            continue
        f = _FOOTER.match(line)
        if f:
            seen_footer = True
            _footer(meta, f.group("key"), f.group("value"), source)
            continue
        if _CDM_HEAD.search(line) or _KDM_HEAD.search(line):
            if records:
                raise ParseError(
                    source,
                    f"line {n}: a second export header: one export per file",
                )
            continue
        if re.search(r"MB/s|IOPS", line):
            raise ParseError(
                source,
                f"line {n}: not a result row of this export: {line.strip()[:80]!r}",
            )
    if not records:
        raise ParseError(
            source,
            f"{tool} export holds no result row (expected lines like "
            "'SEQ    1MiB (Q=  8, T= 1):   531.458 MB/s [ 506.8 IOPS] < 15726.77 us>')",
        )
    if not seen_footer:
        raise ParseError(
            source,
            f"{tool} export ends before its footer ('Profile:', 'Test:' lines): "
            "truncated? Copy the whole export",
        )
    counts = {d: sum(r["direction"] == d for r in records) for d in ("read", "write")}
    if counts["read"] and counts["write"] and counts["read"] != counts["write"]:
        raise ParseError(
            source,
            f"{counts['read']} [Read] rows but {counts['write']} [Write] rows: "
            "a row is missing or was edited",
        )
    # The footer as fio-named options where fio has one (the test file's size
    # in bytes, the seconds each measurement ran), the rest by their own names.
    shared = {}
    for key, name in _FOOTER_OPTIONS:
        if key in meta:
            shared[name] = str(meta[key])
    for rec in records:
        rec["options"].update(shared)
    version = f"{'KDiskMark' if kdm else 'CrystalDiskMark'} {meta['version']}"
    return {
        "tool": "fio" if kdm else "other",
        "tool_version": version,
        "records": records,
        "mixed": mixed,
        "meta": meta,
    }


def _row(records, mixed, m, old, section, mix_read, mbs, tool, source, n) -> None:
    where = f"{source}: line {n}"
    if old:
        kind = "seq" if old.group("kind") == "Sequential" else "rnd"
        direction = old.group("dir").lower()
        bs = _bs(old.group("bs"), old.group("bsu"))
        q = old.group("q") or "1"
        t = old.group("t")
        iops = old.group("iops")
        lat = None
    else:
        kind = "seq" if m.group("kind") in ("SEQ", "Sequential") else "rnd"
        if section not in ("read", "write", "mix"):
            raise ParseError(
                source, f"line {n}: a result row outside [Read], [Write] or [Mix]"
            )
        direction = section
        bs = _bs(m.group("bs"), m.group("bsu"))
        q, t = m.group("q"), m.group("t")
        iops = m.group("iops")
        lat = m.group("lat")
    name = label(kind, bs, int(q), int(t))
    figures = {
        "bw_bytes": num(dec(m.group("mbs") if m else old.group("mbs"), where) * mbs),
        "iops": num(dec(iops, where)) if iops else None,
    }
    if lat is not None:
        key = "clat_mean_ns" if tool == "kdiskmark" else "lat_mean_ns"
        figures[key] = num(dec(lat, where) * 1000)
    if direction == "mix":
        mixed.append({"job": f"Mix {name}", "rwmixread": mix_read, **figures})
        return
    rw = ("" if kind == "seq" else "rand") + direction
    rec = record(tool, direction, job=f"{direction.title()} {name}", **figures)
    rec["options"] = {"rw": rw, "iodepth": str(int(q)), "numjobs": str(int(t))}
    if bs:
        rec["options"]["bs"] = bs
    if tool == "kdiskmark":
        # KDiskMark's helper runs fio with --ioengine=libaio (src/helper.cpp).
        rec["options"]["ioengine"] = "libaio"
    records.append(rec)
