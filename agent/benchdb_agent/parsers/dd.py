"""dd's final statistics line, in every dialect seen in the wild.

- GNU coreutils before 8.24: ``1073741824 bytes (1.1 GB) copied, 6.8543 s, 157 MB/s``
- GNU coreutils 8.24+: ``... (1.1 GB, 1.0 GiB) copied, 6.8543 s, 157 MB/s``
- translated (LC_MESSAGES) and with decimal commas (LC_NUMERIC):
  ``8388608 Bytes (8,4 MB, 8,0 MiB) kopiert, 0,0086932 s, 965 MB/s``,
  ``8388608 字节 (8.4 MB, 8.0 MiB) 已复制，0.00915813 s，916 MB/s``
- busybox: ``8388608 bytes (8.0MB) copied, 0.011086 seconds, 721.6MB/s``; its
  suffixes are powers of 1024 (make_human_readable_str), unlike GNU's.
- BSD and macOS: ``1073741824 bytes transferred in 6.854321 secs (156653243 bytes/sec)``

GNU's rate has SI prefixes (MB = 10^6 bytes).  The record keeps the rate as
printed (``bw_bytes``), the exact byte count (``io_bytes``) and the seconds
(``runtime_s``).  dd does not say whether it read or wrote: the caller names
the direction.  One record per statistics line, so a file holding several runs
gives several records.
"""

from __future__ import annotations

import re

from .common import NUMBER, ParseError, bytes_of, dec, num, record

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
_BUSYBOX_UNITS = {"": "B", "K": "KiB", "M": "MiB", "G": "GiB", "T": "TiB", "P": "PiB"}


def _line_record(line: str, direction: str, source: str):
    m = _BSD.match(line)
    if m:
        return record(
            "dd",
            direction,
            io_bytes=int(m.group("bytes")),
            runtime_s=num(dec(m.group("secs"), source)),
            bw_bytes=int(m.group("rate")),
        ), "bsd"
    m = _BUSYBOX.match(line)
    if m:
        return record(
            "dd",
            direction,
            io_bytes=int(m.group("bytes")),
            runtime_s=num(dec(m.group("secs"), source)),
            bw_bytes=bytes_of(m.group("rate"), _BUSYBOX_UNITS[m.group("unit")], source),
        ), "busybox"
    lead = re.match(r"^(?P<bytes>\d+)\s*\D", line)
    if not lead:
        return None, None
    # Drop the "(1.1 GB, 1.0 GiB)" part: its commas are not field separators.
    rest = _PARENS.sub(" ", line[lead.end() - 1 :])
    m = _GNU_TAIL.search(rest)
    if not m:
        return None, None
    rate = m.group("rate")
    return record(
        "dd",
        direction,
        io_bytes=int(lead.group("bytes")),
        runtime_s=num(dec(m.group("secs"), source)),
        bw_bytes=None if rate == "inf" else bytes_of(rate, m.group("unit"), source),
    ), "gnu"


def parse(text: str, source: str, direction: str | None = None) -> dict:
    records = []
    dialect = None
    for line in text.splitlines():
        line = line.strip()
        if not line or not line[0].isdigit():
            continue
        rec, kind = _line_record(line, direction or "write", source)
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
    if direction is None:
        raise ParseError(source, "dd output does not say read or write; name it")
    return {"tool": "dd", "tool_version": dialect, "records": records}
