"""What every parser shares: the record shape, exact unit conversion, errors.

Conversions go through ``decimal.Decimal`` built from the printed text, so
"102.324867 us" becomes exactly 102324.867 ns and not 102324.86699999999:
the numbers benchdb stores are the tool's own, only rescaled.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from decimal import Decimal, InvalidOperation

# The numeric metrics of a record, in the units their names carry.
METRIC_KEYS = (
    "iops",
    "bw_bytes",
    "io_bytes",
    "runtime_s",
    "lat_mean_ns",
    "clat_mean_ns",
    "clat_p50_ns",
    "clat_p99_ns",
    "clat_p99_9_ns",
    "lat_min_ns",
    "lat_max_ns",
    "lat_stdev_ns",
)
RECORD_KEYS = ("tool", "job", "direction", *METRIC_KEYS, "options")
DIRECTIONS = ("read", "write", "trim")

# Byte units as tools print them.  SI prefixes are powers of 1000 (GNU dd's
# "MB/s"), IEC ones powers of 1024 (fio's "MiB/s", ioping's "KiB").
BYTE_UNITS = {
    "B": 1,
    "kB": 10**3,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "PB": 10**15,
    "EB": 10**18,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "PiB": 2**50,
    "EiB": 2**60,
}
TIME_UNITS_NS = {
    "ns": Decimal(1),
    "nsec": Decimal(1),
    "us": Decimal(1000),
    "usec": Decimal(1000),
    "µs": Decimal(1000),
    "ms": Decimal(10**6),
    "msec": Decimal(10**6),
    "s": Decimal(10**9),
    "sec": Decimal(10**9),
    "min": Decimal(60 * 10**9),
    "hour": Decimal(3600 * 10**9),
}
COUNT_SUFFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}


class ParseError(ValueError):
    """Input that is not (or not all of) the expected tool output."""

    def __init__(self, source: str, message: str):
        super().__init__(f"{source}: {message}")
        self.source = source


def dec(text, source: str = "<input>", what: str = "number") -> Decimal:
    """A Decimal from printed text; a decimal comma is accepted."""
    s = str(text).strip().replace(",", ".")
    try:
        value = Decimal(s)
    except InvalidOperation:
        raise ParseError(source, f"expected a {what}, found {text!r}") from None
    if not value.is_finite() or value < 0:
        raise ParseError(source, f"expected a non-negative {what}, found {text!r}")
    return value


def num(value: Decimal):
    """A JSON number: int when whole, else float (nearest to the decimal)."""
    if value == value.to_integral_value():
        return int(value)
    return float(value)


# Whole floats below this print every digit in their shortest repr
# ("123.0"), so int(value) is the number as printed; larger ones print in
# exponent form ("1e+23"), whose decimal value may differ from the float's.
_EXACT_WHOLE_FLOAT = float(2**53)


def from_json_number(value, scale=1, source: str = "<input>", what: str = "value"):
    """Scale a number read from JSON exactly (via its shortest repr)."""
    if value is None:
        return None
    kind = type(value)
    if scale == 1 and (kind is int or kind is float) and value >= 0:
        # Unscaled (most of fio's and ioping's figures): what the Decimal
        # path below gives, without it.  An int is itself; a finite float's
        # shortest repr reads back as the same float, or as an int when it
        # is whole.  Infinity and large whole floats take the path below.
        if kind is int:
            return value
        if value.is_integer():
            if value < _EXACT_WHOLE_FLOAT:
                return int(value)
        elif value != math.inf:
            return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(source, f"{what}: expected a number, found {value!r}")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ParseError(source, f"{what}: not a finite number")
    if value < 0:
        raise ParseError(source, f"{what}: negative value {value!r}")
    return num(Decimal(repr(value)) * Decimal(scale))


def bytes_of(number: str, unit: str, source: str = "<input>") -> int | float:
    unit = unit.strip()
    if unit not in BYTE_UNITS:
        raise ParseError(source, f"unknown size unit {unit!r}")
    return num(dec(number, source, "size") * BYTE_UNITS[unit])


def ns_of(number: str, unit: str, source: str = "<input>") -> int | float:
    unit = unit.strip()
    if unit not in TIME_UNITS_NS:
        raise ParseError(source, f"unknown time unit {unit!r}")
    return num(dec(number, source, "time") * TIME_UNITS_NS[unit])


def count_of(number: str, suffix: str = "", source: str = "<input>") -> int | float:
    suffix = (suffix or "").strip()
    if suffix not in COUNT_SUFFIX:
        raise ParseError(source, f"unknown count suffix {suffix!r}")
    return num(dec(number, source, "count") * COUNT_SUFFIX[suffix])


def record(tool: str, direction, **values) -> dict:
    """A normalized record with every key present (absent metrics are None).

    ``direction`` is None only where the output does not say it and the
    caller did not name it (dd, ioping -B): such a record is returned by
    ``parse`` with a note, and no bundle accepts it."""
    if direction is not None and direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    rec = dict.fromkeys(RECORD_KEYS)
    rec["tool"] = tool
    rec["direction"] = direction
    rec["options"] = {}
    for key, value in values.items():
        if key not in RECORD_KEYS:
            raise KeyError(key)
        rec[key] = value
    return rec


NUMBER = r"\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?"
_WS = re.compile(r"\s+")


def squeeze(text: str) -> str:
    return _WS.sub(" ", text).strip()


NO_DIRECTION = (
    "{tool} output does not say read or write: direction is null; "
    "name it (--direction read|write) to use the record in a bundle"
)


def rate(io_bytes: int, seconds: Decimal):
    """Bytes per second from the exact byte count and seconds (None for 0 s)."""
    if seconds == 0:
        return None
    return num(Decimal(io_bytes) / seconds)


# The most one tool output may weigh: the bundle contract's limit for one raw
# output (contract.MAX_RAW_BYTES), so what the agent reads it can also send.
MAX_INPUT_BYTES = 16 * 1024 * 1024
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def decode(data: bytes, source: str = "<input>") -> str:
    """The text of an uploaded or read tool output, or ParseError.

    UTF-8, or UTF-16 with its byte-order mark (CrystalDiskMark 7 saves its
    text export as UTF-16LE), or UTF-16LE without one (a NUL after each
    ASCII byte); anything else is refused, naming the byte where it fails,
    as is a file larger than ``MAX_INPUT_BYTES``.  Line ends are left as
    they are (the parsers split lines on any of them)."""
    if len(data) > MAX_INPUT_BYTES:
        raise ParseError(
            source,
            f"{len(data)} bytes is larger than {MAX_INPUT_BYTES} bytes "
            f"({MAX_INPUT_BYTES // 2**20} MiB), the most one tool output may be",
        )
    encoding = "utf-8"
    for bom, name in _BOMS:
        if data.startswith(bom):
            data, encoding = data[len(bom) :], name
            break
    else:
        if len(data) >= 4 and data[1:4:2] == b"\x00\x00" and data[0:4:2] != b"\x00\x00":
            encoding = "utf-16-le"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ParseError(
            source,
            f"line {line}: byte {exc.start} is not {encoding} text ({exc.reason}); "
            "save the output as UTF-8 or UTF-16",
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ParseError(
            source, f"line {line}: a NUL character: a binary file, not a tool output"
        )
    return text


def xml_root(text: str, source: str, tool: str, tag: str):
    """The root element of a tool's XML output, which must be ``<tag>``."""
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ParseError(
            source, f"{tool} XML is malformed or truncated: {exc}"
        ) from None
    if root.tag != tag:
        raise ParseError(source, f"expected {tool}'s <{tag}>, found <{root.tag}>")
    return root


def xml_text(el, path: str):
    """The stripped text of ``el``'s element at ``path``, or None."""
    found = el.find(path)
    return None if found is None or found.text is None else found.text.strip()
