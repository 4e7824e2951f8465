"""One parser per tool output format; the agent and the server share them.

``parse(text, fmt=None, source=..., direction=None)`` returns
``{"tool", "tool_version", "format", "records"}``; every record has the keys of
``common.RECORD_KEYS`` in fixed units (bytes/s, bytes, s, ns, IOPS), each a
number as the tool reported it, exactly rescaled, or None.  Unknown or
truncated input raises ParseError naming the source and what was expected:
never a wrong number.
"""

from __future__ import annotations

import re

from . import crystaldiskmark, dd, diskspd, fio, ioping, pts, yabs
from .common import MAX_INPUT_BYTES, METRIC_KEYS, RECORD_KEYS, ParseError, decode

__all__ = [
    "FORMATS",
    "MAX_INPUT_BYTES",
    "METRIC_KEYS",
    "ParseError",
    "RECORD_KEYS",
    "decode",
    "detect_format",
    "parse",
]

FORMATS = (
    "fio-json",
    "fio-terse",
    "fio-normal",
    "ioping-human",
    "ioping-batch",
    "ioping-json",
    "dd",
    "crystaldiskmark",
    "diskspd-xml",
    "diskspd-text",
    "yabs-json",
    "yabs-text",
    "pts-composite",
)

_PARSERS = {
    "fio-json": lambda t, s, d, j: fio.parse_json(t, s, loads=j),
    "fio-terse": lambda t, s, d, j: fio.parse_terse(t, s),
    "fio-normal": lambda t, s, d, j: fio.parse_normal(t, s),
    "ioping-human": lambda t, s, d, j: ioping.parse_human(t, s, d),
    "ioping-batch": lambda t, s, d, j: ioping.parse_batch(t, s, d),
    "ioping-json": lambda t, s, d, j: ioping.parse_json(t, s, d, loads=j),
    "dd": lambda t, s, d, j: dd.parse(t, s, d),
    "crystaldiskmark": lambda t, s, d, j: crystaldiskmark.parse(t, s, d),
    "diskspd-xml": lambda t, s, d, j: diskspd.parse_xml(t, s, d),
    "diskspd-text": lambda t, s, d, j: diskspd.parse_text(t, s, d),
    "yabs-json": lambda t, s, d, j: yabs.parse_json(t, s, d, loads=j),
    "yabs-text": lambda t, s, d, j: yabs.parse_text(t, s, d),
    "pts-composite": lambda t, s, d, j: pts.parse(t, s, d),
}


# Formats of tools other than fio, ioping and dd, each recognised by marks no
# fio, ioping or dd output has (checked after fio JSON, before the rest).
_OTHER_TOOLS = (
    ("diskspd-xml", diskspd.looks_like_xml),
    ("pts-composite", pts.looks_like),
    ("crystaldiskmark", crystaldiskmark.looks_like),
    ("diskspd-text", diskspd.looks_like_text),
    ("yabs-json", yabs.looks_like_json),
    ("yabs-text", yabs.looks_like_text),
)


def detect_format(text: str) -> str | None:
    """The format of a tool output, or None when it is none of FORMATS."""
    stripped = text.strip()
    if not stripped:
        return None
    if re.search(r'"fio version"\s*:', text) or re.search(r'"jobs"\s*:\s*\[', text):
        return "fio-json"
    for fmt, looks_like in _OTHER_TOOLS:
        if looks_like(text):
            return fmt
    if stripped.startswith("[") and ('"stat"' in text or '"io"' in text[:2000]):
        return "ioping-json"
    if re.search(r"^[34];fio-", text, re.M):
        return "fio-terse"
    if re.search(r"^\s*(read|write|trim)\s*: (IOPS=|io=)", text, re.M) or re.search(
        r"^\s*(READ|WRITE|TRIM): (bw=|io=)", text, re.M
    ):
        return "fio-normal"
    if "ioping statistics ---" in text:
        return "ioping-human"
    last = stripped.splitlines()[-1].split()
    if len(last) in (8, 10) and all(re.fullmatch(r"\d+(\.\d+)?", x) for x in last):
        return "ioping-batch"
    if re.search(r"^\d+\s*\D.*\d\s*[kKMGTPE]?i?B/\S+\s*$", text, re.M) or re.search(
        r"^\d+ bytes transferred in ", text, re.M
    ):
        return "dd"
    return None


def parse(
    text: str,
    fmt: str | None = None,
    *,
    source: str = "<input>",
    direction=None,
    loads=None,
) -> dict:
    """Parse one tool output; ``direction`` names read/write where the output
    itself cannot (dd, ioping -B).  ``loads`` reads the JSON outputs (fio,
    ioping, YABS): a function that gives what ``json.loads`` gives, or raises
    what it raises (the server's is faster); None: ``json.loads``."""
    if not isinstance(text, str):
        raise ParseError(source, "expected text")
    if fmt is None:
        fmt = detect_format(text)
        if fmt is None:
            raise ParseError(
                source,
                "not a recognised benchmark output (expected one of: "
                + ", ".join(FORMATS)
                + ")",
            )
    if fmt not in _PARSERS:
        raise ParseError(source, f"unknown format {fmt!r}; expected one of {FORMATS}")
    if direction is not None and direction not in ("read", "write", "trim"):
        raise ParseError(
            source, f"direction must be read, write or trim, not {direction!r}"
        )
    result = _PARSERS[fmt](text, source, direction, loads)
    result["format"] = fmt
    return result
