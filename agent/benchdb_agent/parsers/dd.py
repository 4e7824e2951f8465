"""dd's final statistics line, in every dialect seen in the wild.

- GNU coreutils before 8.24: ``1073741824 bytes (1.1 GB) copied, 6.8543 s, 157 MB/s``
- GNU coreutils 8.24+: ``... (1.1 GB, 1.0 GiB) copied, 6.8543 s, 157 MB/s``
- translated (LC_MESSAGES) and with decimal commas (LC_NUMERIC):
  ``8388608 Bytes (8,4 MB, 8,0 MiB) kopiert, 0,0086932 s, 965 MB/s``,
  ``8388608 字节 (8.4 MB, 8.0 MiB) 已复制，0.00915813 s，916 MB/s``
- busybox: ``8388608 bytes (8.0MB) copied, 0.011086 seconds, 721.6MB/s``; its
  suffixes are powers of 1024 (make_human_readable_str), unlike GNU's.
- BSD and macOS: ``1073741824 bytes transferred in 6.854321 secs (156653243 bytes/sec)``

GNU's rate has SI prefixes (MB = 10^6 bytes) and is rounded to two or three
digits; so the record's ``bw_bytes`` is computed from the exact byte count
(``io_bytes``) and the seconds (``runtime_s``) printed on the same line:
bytes / seconds, in decimal arithmetic.  With ``status=progress`` dd rewrites
a line of the same form every second (``\r``-separated): only a statistics
line that follows the "N+M records out" line (or a "truncated record" line)
counts; an output without those lines is taken line by line.  dd does not
say whether it read or wrote: the caller names the direction, or the record
comes back with direction None and a note.  One record per run, so a file
holding several runs gives several records.
"""

from __future__ import annotations

import re

from .common import NO_DIRECTION, NUMBER, ParseError, dec, num, rate, record

_SEP = r"\s*[,，]\s*"
_PARENS = re.compile(r"\s*\([^)]*\)\s*")
_GNU_TAIL = re.compile(
    r"(?P<secs>" + NUMBER + r")\s*\S+?" + _SEP + r"(?P<rate>" + NUMBER + r"|inf)\s*"
    r"(?P<unit>[kKMGTPE]?i?B)/\S+\s*$"
)
_BUSYBOX = re.compile(
    r"^(?P<bytes>\d+) bytes \([^)]*\) copied, (?P<secs>" + NUMBER + r") seconds, "
    r"(?P<rate>" + NUMBER + r")(?P<unit>[KMGTPE]?)B/s\s*$"
)
_BSD = re.compile(
    r"^(?P<bytes>\d+) bytes transferred in (?P<secs>" + NUMBER + r") secs "
    r"\((?P<rate>\d+) bytes/sec\)\s*$"
)


def _line_record(line: str, direction: str, source: str):
    m = _BSD.match(line)
    if m:
        return _exact(m, direction, source), "bsd"
    m = _BUSYBOX.match(line)
    if m:
        return _exact(m, direction, source), "busybox"
    lead = re.match(r"^(?P<bytes>\d+)\s*\D", line)
    if not lead:
        return None, None
    # Drop the "(1.1 GB, 1.0 GiB)" part: its commas are not field separators.
    rest = _PARENS.sub(" ", line[lead.end() - 1 :])
    m = _GNU_TAIL.search(rest)
    if not m:
        return None, None
    io_bytes = int(lead.group("bytes"))
    secs = dec(m.group("secs"), source)
    return record(
        "dd",
        direction,
        io_bytes=io_bytes,
        runtime_s=num(secs),
        bw_bytes=rate(io_bytes, secs),
    ), "gnu"


def _exact(m, direction, source):
    io_bytes = int(m.group("bytes"))
    secs = dec(m.group("secs"), source)
    return record(
        "dd",
        direction,
        io_bytes=io_bytes,
        runtime_s=num(secs),
        bw_bytes=rate(io_bytes, secs),
    )


_RECORDS_LINE = re.compile(r"^\d+\+\d+\s+\S")
_TRUNCATED = re.compile(r"^\d+\s+\S+.*\brecords?\b", re.I)


def parse(text: str, source: str, direction: str | None = None) -> dict:
    lines = [ln.strip() for ln in text.splitlines()]  # \r splits too
    has_counts = any(_RECORDS_LINE.match(ln) for ln in lines)
    records = []
    dialect = None
    previous = ""
    for line in lines:
        if not line:
            continue
        after_counts = bool(_RECORDS_LINE.match(previous)) or (
            "truncated" in previous and _TRUNCATED.match(previous)
        )
        previous = line
        if not line[0].isdigit() or _RECORDS_LINE.match(line):
            continue
        if has_counts and not after_counts:
            continue  # a status=progress line, or noise
        rec, kind = _line_record(line, direction, source)
        if rec is not None:
            records.append(rec)
            dialect = kind
    if not records:
        raise ParseError(
            source,
            "expected dd's statistics line, e.g. '1073741824 bytes (1.1 GB, 1.0 GiB) "
            "copied, 6.85 s, 157 MB/s' (GNU), '... bytes transferred in ... secs' "
            "(BSD) or busybox's '... seconds, ...B/s'",
        )
    out = {"tool": "dd", "tool_version": dialect, "records": records}
    if direction is None:
        out["notes"] = [NO_DIRECTION.format(tool="dd")]
    return out
