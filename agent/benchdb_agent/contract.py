"""The bundle contract: every rule a bundle must meet, in one place.

The agent checks a bundle with ``check`` before it writes or sends it, and the
server checks an upload with the same function (benchdb/api/validation.py
adds only who may send what), so the agent never uploads what the server
refuses.  Standard library only, Python 3.8.

What it checks, each problem with a JSON pointer into the bundle:

- shape and types, the vocabularies (benchdb_agent.vocab), tag rules
  (``check_tag``, also used by ``--tag`` and the server's PATCH), limits
  (``LIMITS``: counts, string lengths, nesting depth);
- text PostgreSQL can store: no NUL (U+0000), no lone surrogate, anywhere;
- raw outputs: base64/gzip decoded once, at most ``MAX_RAW_BYTES`` each and
  ``MAX_TOTAL_RAW_BYTES`` in all (a 700 KiB upload cannot inflate to 500 MB);
  parsed with the agent's parsers (the direction from ``parse_direction``);
  the records sent must be the records the raw output gives, and a fio raw
  output's job options must be the test's options (no raw of another job);
- numbers: finite, not negative, within what any real device could report.

``check`` returns a ``Checked`` with the errors and, for the caller that
stores the bundle, the decoded text and parsed records of each raw output, so
nothing is decoded or parsed twice in one request.  ``json_schema`` renders
the shape rules as the JSON Schema shipped beside this module
(bundle.schema.json; a test keeps the file equal to it).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import re
import unicodedata
import uuid
import zlib
from typing import Any, Dict, List, Optional, Tuple

from . import parsers, suite, vocab

SCHEMA_VERSION = 1
MAX_TESTS = 200
MAX_REPEATS = 50
MAX_RECORDS = 64
MAX_WARNINGS = 500
MAX_NOT_RUN = 500
# Runs in one sweep (rounds x settings), the bound of its round and position.
MAX_SWEEP_RUNS = 1000
MAX_STRING = 4096
MAX_KEY = 200
MAX_COMMAND_ARGS = 200
MAX_MOUNT_OPTIONS = 100
MAX_DEPTH = 12
# One raw output decompressed (fio JSON of a large job file is a few hundred
# KiB), and all of a bundle's raw outputs together.
MAX_RAW_BYTES = 16 * 1024 * 1024
MAX_TOTAL_RAW_BYTES = 64 * 1024 * 1024

RAW_FORMATS = parsers.FORMATS
RAW_ENCODINGS = ("gzip+base64", "plain")
PROFILES = ("quick", "standard", "full", "custom")
SUBMITTABLE_SOURCES = ("measured", "imported")
TEST_STATUSES = ("complete", "partial", "failed")
NOT_RUN_STATUSES = ("failed", "not-run")
# Where a tag's value came from: read from the VM's configuration on the host
# by the agent, or typed by a person.
TAG_SOURCES = ("host-config", "user")
ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
DIGITS_RE = re.compile(r"^[0-9]{1,18}$")
DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?"
    r"([Zz]|[+-]\d{2}:\d{2})$"
)
URL_RE = re.compile(r"^https?://\S+$")

# Upper bounds far beyond any real device, so only garbage is refused.  Values
# inside these but beyond a disk class's reach are stored and marked suspect
# by the server's plausibility checks instead.
METRIC_MAX = {
    "iops": 1e9,
    "bw_bytes": 1e13,
    "io_bytes": 1e17,
    "runtime_s": 30 * 86400,
    "lat_mean_ns": 86400e9,
    "clat_mean_ns": 86400e9,
    "clat_p50_ns": 86400e9,
    "clat_p99_ns": 86400e9,
    "clat_p99_9_ns": 86400e9,
    "lat_min_ns": 86400e9,
    "lat_max_ns": 86400e9,
    "lat_stdev_ns": 86400e9,
}
# Free-text tags end up in database columns of these lengths (default 200).
TAG_MAX_LENGTH = {
    "hypervisor_version": 100,
    "host_filesystem": 50,
    "guest_filesystem": 50,
    "disk_model": 200,
    "raid_controller": 200,
    "virtio_win_version": 64,
    "note": 2000,
}
TAG_DEFAULT_MAX_LENGTH = 200
TAG_INTEGER_MAX = {"disk_count": 10000, "controller_cache": 2**50}
# fio job options a raw output must share with its test, where both name them.
FIO_CHECKED_OPTIONS = ("rw", "readwrite", "bs", "iodepth", "numjobs", "ioengine")
# What a raw output says of its workload, by the tool that wrote it, checked
# against the test's options and its catalogue test id: fio's job options,
# ioping's request size.
WORKLOAD_OPTIONS = {
    "fio": FIO_CHECKED_OPTIONS,
    "ioping": ("size",),
    "dd": ("bs", "count"),
}
# dd's whole and partial records out ("4+0 records out"; GNU, BSD, busybox in
# English): with the bytes copied, its block size (``_dd_workload``).
DD_RECORDS_OUT = re.compile(r"^(\d+)\+(\d+) records out", re.MULTILINE)
# Records and their re-parse agree to this relative precision (the agent
# writes the parser's floats; JSON keeps them exactly, other writers may not).
RECORD_REL_TOL = 1e-9

Error = Dict[str, Any]


class Checked:
    """What ``check`` found: ``errors`` (``{"pointer", "message"}``, empty when
    the bundle is valid) and ``raws``: pointer of each raw output -> (text,
    records parsed from it, selected by the raw's ``job`` if any)."""

    def __init__(self) -> None:
        self.errors: List[Error] = []
        self.raws: Dict[str, Tuple[str, List[dict]]] = {}
        self.raw_bytes = 0

    def add(self, pointer: str, message: str) -> None:
        self.errors.append({"pointer": pointer, "message": message})

    def __bool__(self) -> bool:
        return not self.errors


def escape(key: str) -> str:
    """A key as one JSON pointer segment."""
    return str(key).replace("~", "~0").replace("/", "~1")


def text_problem(value: str) -> Optional[str]:
    """Why a string cannot be stored as text (PostgreSQL), or None."""
    if "\x00" in value:
        return "must not contain NUL (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain a lone surrogate (not valid Unicode)"
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MAX_UTC_OFFSET_MIN = 14 * 60


def parse_datetime(value) -> Optional[datetime.datetime]:
    """An RFC 3339 date-time with a time zone (-14:00 to +14:00), or None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    m = DATETIME_RE.match(value)
    if not m:
        return None
    if len(value) == 20 and value[19] in "Zz" and value.isascii():
        # The agent's own form, "2026-11-28T08:06:38Z" (each repeat's start):
        # ASCII digits where the pattern has them, read by fromisoformat
        # (Python 3.8 on: the date-time part without its zone) at a quarter
        # of the fields' cost; the same datetime, the same refusals
        # (tests/api/test_contract.py).
        try:
            return datetime.datetime.fromisoformat(value[:19]).replace(
                tzinfo=datetime.timezone.utc
            )
        except ValueError:
            return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
    zone = m.group(8)
    if zone in ("Z", "z"):
        tz = datetime.timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        # No place is further from UTC than 14 hours (Kiribati, +14:00), and
        # PostgreSQL refuses offsets past 15:59: +16:00 failed in ingest.
        if minutes > 59 or hours * 60 + minutes > MAX_UTC_OFFSET_MIN:
            return None
        tz = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
    try:
        return datetime.datetime(
            year, month, day, hour, minute, second, int(fraction), tzinfo=tz
        )
    except ValueError:
        return None


# Field helpers ---------------------------------------------------------------


def _string(out, doc, key, pointer, *, max_length, required=False, pattern=None):
    value = doc.get(key)
    where = f"{pointer}/{key}"
    if value is None:
        if required:
            out.add(where, "is required")
        return None
    if not isinstance(value, str):
        out.add(where, f"must be a string, not {type(value).__name__}")
        return None
    if required and not value:
        out.add(where, "must not be empty")
    if len(value) > max_length:
        out.add(where, f"is {len(value)} characters long; at most {max_length}")
    elif pattern is not None and value and not pattern.match(value):
        out.add(where, f"must match {pattern.pattern}")
    return value


_CHOICES: Dict[Any, tuple] = {}


def _choice_values(allowed) -> tuple:
    """The values of a vocabulary (a tuple's first items), once per one."""
    try:
        return _CHOICES[allowed]
    except (KeyError, TypeError):
        values = tuple(v[0] if isinstance(v, tuple) else v for v in allowed)
        if isinstance(allowed, tuple):
            _CHOICES[allowed] = values
        return values


def _choice(out, doc, key, pointer, allowed, *, required=False):
    value = doc.get(key)
    allowed = _choice_values(allowed)
    if type(value) is str and value in allowed:
        return value
    where = f"{pointer}/{key}"
    if value is None:
        if required:
            out.add(where, "is required")
        return None
    if not isinstance(value, str) or value not in allowed:
        out.add(where, f"{value!r} is not one of: {', '.join(allowed)}")
        return None
    return value


def _integer(out, doc, key, pointer, *, low=0, high=2**62, required=False):
    value = doc.get(key)
    where = f"{pointer}/{key}"
    if value is None:
        if required:
            out.add(where, "is required")
        return None
    if not _is_int(value):
        out.add(where, f"must be a whole number, not {type(value).__name__}")
        return None
    if not low <= value <= high:
        out.add(where, f"{value} is outside {low}..{high}")
        return None
    return value


# A tool process's wall time, in seconds: a week is beyond any run.
MAX_SECONDS = 7 * 24 * 3600


def _seconds(out, doc, key, pointer) -> None:
    """An optional duration in seconds (``tool_wall_s``...): absent in
    bundles written before issue 29, else a number 0..MAX_SECONDS."""
    value = doc.get(key)
    if value is None:
        return
    if not _is_number(value) or not 0 <= value <= MAX_SECONDS:
        out.add(f"{pointer}/{key}", f"must be a number of seconds, 0..{MAX_SECONDS}")


def _object(out, doc, key, pointer, *, required=False) -> dict:
    value = doc.get(key)
    if value is None:
        if required:
            out.add(f"{pointer}/{key}", "is required")
        return {}
    if not isinstance(value, dict):
        out.add(f"{pointer}/{key}", f"must be an object, not {type(value).__name__}")
        return {}
    return value


def _array(out, doc, key, pointer, *, max_items, required=False) -> list:
    value = doc.get(key)
    if value is None:
        if required:
            out.add(f"{pointer}/{key}", "is required")
        return []
    if not isinstance(value, list):
        out.add(f"{pointer}/{key}", f"must be an array, not {type(value).__name__}")
        return []
    if len(value) > max_items:
        out.add(f"{pointer}/{key}", f"has {len(value)} items; at most {max_items}")
        return []
    return value


def _bool(out, doc, key, pointer) -> None:
    if key in doc and not isinstance(doc[key], bool):
        out.add(f"{pointer}/{key}", "must be true or false")


def _pointer(parent: str, key) -> str:
    """The pointer of ``parent``'s member ``key`` (None: ``parent`` itself)."""
    if key is None:
        return parent
    return f"{parent}/{escape(key) if isinstance(key, str) else key}"


def _quiet(value) -> bool:
    """A value ``_walk`` finds nothing wrong with at any depth within limits:
    a whole number, true, false, null, a finite float, short ASCII text
    without NUL."""
    kind = type(value)
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is str:
        return len(value) <= MAX_STRING and value.isascii() and "\x00" not in value
    return False


def _walk(out: Checked, value, pointer: str, depth: int = 0) -> None:
    """Limits and text rules on every string and number, wherever it is.

    Iterative, so no body can exhaust the stack; raw data strings are left to
    the raw checks.  A member's pointer is built only where it is needed (a
    container's, or a problem's): a bundle has thousands of values.
    """
    stack = [(value, pointer, None, depth)]
    while stack:
        value, parent, member, depth = stack.pop()
        if depth > MAX_DEPTH:
            out.add(
                _pointer(parent, member), f"is nested deeper than {MAX_DEPTH} levels"
            )
            continue
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                out.add(
                    _pointer(parent, member),
                    f"is {len(value)} characters long; at most {MAX_STRING}",
                )
                continue
            # ASCII text has no lone surrogate: only NUL to look for.
            if value.isascii() and "\x00" not in value:
                continue
            problem = text_problem(value)
            if problem:
                out.add(_pointer(parent, member), problem)
        elif isinstance(value, dict):
            pointer = _pointer(parent, member)
            is_raw = pointer.endswith("/raw")
            # Members within the depth limit that no rule can refuse are not
            # visited (the answer, and the order of problems, is the same).
            quiet = depth < MAX_DEPTH
            for key, item in value.items():
                if not isinstance(key, str) or len(key) > MAX_KEY:
                    out.add(pointer, f"has a key longer than {MAX_KEY} characters")
                    continue
                if not key.isascii() or "\x00" in key:
                    problem = text_problem(key)
                    if problem:
                        out.add(pointer, f"has a key that {problem}")
                        continue
                if is_raw and key == "data":
                    continue
                if quiet and _quiet(item):
                    continue
                stack.append((item, pointer, key, depth + 1))
        elif isinstance(value, list):
            pointer = _pointer(parent, member)
            quiet = depth < MAX_DEPTH
            for i, item in enumerate(value):
                if quiet and _quiet(item):
                    continue
                stack.append((item, pointer, i, depth + 1))
        elif isinstance(value, float) and not math.isfinite(value):
            out.add(_pointer(parent, member), "must be a finite number")


# Tags ------------------------------------------------------------------------


def check_tag(key: str, value) -> Optional[str]:
    """Why a tag is not acceptable, or None: the rule for bundles, the agent's
    ``--tag`` and the server's edit of a run's tags alike."""
    if key not in vocab.TAG_VOCABULARIES:
        known = ", ".join(sorted(vocab.TAG_VOCABULARIES))
        return f"unknown tag {key!r}; known tags: {known}"
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    problem = text_problem(value)
    if problem:
        return problem
    allowed = vocab.TAG_VOCABULARIES[key]
    if allowed is not None:
        values = vocab.values(allowed)
        if value not in values:
            return f"{value!r} is not one of: {', '.join(values)}"
        return None
    if key in TAG_INTEGER_MAX:
        if not DIGITS_RE.match(value) or int(value) > TAG_INTEGER_MAX[key]:
            return f"must be a whole number 0..{TAG_INTEGER_MAX[key]}"
        return None
    limit = TAG_MAX_LENGTH.get(key, TAG_DEFAULT_MAX_LENGTH)
    if len(value) > limit:
        return f"is {len(value)} characters long; at most {limit}"
    return invisible_problem(value)


# Characters a free-text tag may not hold: controls (Cc), format characters
# (Cf: zero-width spaces and joiners, right-to-left overrides, the BOM, soft
# hyphens) and line or paragraph separators.  Each makes a value that reads
# like another ("Samsung\u200b980" is not "Samsung 980", and would be a
# hardware row of its own) or that shows reversed.
INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def invisible_problem(value: str) -> Optional[str]:
    """Why ``value`` cannot be a free-text tag (an invisible, control or
    direction character), or None."""
    for i, char in enumerate(value):
        if unicodedata.category(char) in INVISIBLE_CATEGORIES:
            name = unicodedata.name(char, "a control character")
            return (
                f"must not contain U+{ord(char):04X} ({name}) at character {i}: "
                "type the value as it reads"
            )
    return None


def check_tags(tags, pointer: str = "/tags") -> List[Error]:
    """``check_tag`` over a tags object, as pointer errors."""
    if not isinstance(tags, dict):
        return [{"pointer": pointer, "message": "must be an object"}]
    out = []
    for key, value in tags.items():
        problem = check_tag(key, value)
        if problem:
            out.append({"pointer": f"{pointer}/{escape(key)}", "message": problem})
    return out


# Raw outputs -----------------------------------------------------------------


def parse_direction(raw: dict, test: dict) -> Optional[str]:
    """The direction a parser needs where the output does not say it (dd,
    ioping -B): the raw's or the test's, if it is a single direction."""
    direction = raw.get("direction") or test.get("direction")
    return direction if direction in ("read", "write", "trim") else None


def decode_raw(raw: dict, pointer: str, out: Checked) -> Optional[str]:
    """A raw output's text, or None with an error: bad base64 or gzip, not
    UTF-8, or larger than the per-raw or the bundle's total limit."""
    data = raw.get("data")
    if not isinstance(data, str):
        out.add(f"{pointer}/data", "must be a string")
        return None
    room = min(MAX_RAW_BYTES, MAX_TOTAL_RAW_BYTES - out.raw_bytes)
    if raw.get("encoding") == "plain":
        if len(data) > MAX_RAW_BYTES:
            out.add(f"{pointer}/data", f"is larger than {MAX_RAW_BYTES} bytes")
            return None
        problem = text_problem(data)
        if problem and "surrogate" in problem:
            out.add(f"{pointer}/data", problem)
            return None
        text_bytes = len(data.encode("utf-8"))
        if text_bytes > room:
            out.add(f"{pointer}/data", _total_message())
            return None
        out.raw_bytes += text_bytes
        return data
    try:
        packed = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        out.add(f"{pointer}/data", "is not valid base64")
        return None
    try:
        # gzip framing; max_length bounds what one decompression may produce.
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflater.decompress(packed, room + 1)
    except zlib.error:
        out.add(f"{pointer}/data", "is not gzip-compressed data")
        return None
    if len(text) > room or inflater.unconsumed_tail:
        if room < MAX_RAW_BYTES:
            out.add(f"{pointer}/data", _total_message())
        else:
            out.add(f"{pointer}/data", f"decompresses beyond {MAX_RAW_BYTES} bytes")
        return None
    out.raw_bytes += len(text)
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        out.add(f"{pointer}/data", "is not UTF-8 text")
        return None


def _total_message() -> str:
    return (
        f"the bundle's raw outputs decompress beyond {MAX_TOTAL_RAW_BYTES} bytes in all"
    )


def _same_number(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not (_is_number(a) and _is_number(b)):
        return False
    return math.isclose(a, b, rel_tol=RECORD_REL_TOL, abs_tol=1e-12)


# Values an equality check can settle for ``_same_number`` (not bool).
_PLAIN_VALUES = (int, float, type(None))


def _compare_records(out: Checked, sent: list, parsed: list, pointer: str) -> None:
    """The records a repeat sends must be those its raw output gives."""
    if not sent:
        return  # records left out: the server takes them from the raw output
    if len(sent) != len(parsed):
        out.add(
            f"{pointer}/records",
            f"{len(sent)} records, but the raw output gives {len(parsed)}",
        )
        return
    for i, rec in enumerate(sent):
        ref = parsed[i]
        if not isinstance(rec, dict):
            continue
        where = f"{pointer}/records/{i}"
        if rec.get("direction") != ref.get("direction"):
            out.add(
                f"{where}/direction",
                f"{rec.get('direction')!r}, but the raw output says "
                f"{ref.get('direction')!r}",
            )
            continue
        if rec.get("job") not in (None, "") and rec.get("job") != ref.get("job"):
            out.add(
                f"{where}/job",
                f"{rec.get('job')!r}, but the raw output's job is {ref.get('job')!r}",
            )
            continue
        for key in parsers.METRIC_KEYS:
            if key not in rec:
                continue
            sent_value, value = rec[key], ref.get(key)
            if (
                sent_value == value
                and type(sent_value) in _PLAIN_VALUES
                and type(value) in _PLAIN_VALUES
            ):
                continue  # what _same_number says of equal numbers, sooner
            if not _same_number(sent_value, value):
                out.add(
                    f"{where}/{key}",
                    f"{rec.get(key)!r} contradicts the raw output ({ref.get(key)!r})",
                )


SIZE_RE = re.compile(r"(\d+)\s*([kmgt]?)(?:i?b)?")


def _size_bytes(value) -> Optional[int]:
    """A block or request size as fio and ioping write it ("4k", "1M",
    "4KiB", "512", 4096) in bytes (k = 1024, as both tools count), None when
    it is not one."""
    m = SIZE_RE.fullmatch(str(value).strip().lower())
    if m is None:
        return None
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")


def _same_option(key: str, a, b) -> bool:
    if a == b and type(a) is str:
        return True  # the same text: the same size too, or no size at all
    if key in ("bs", "size"):
        size_a, size_b = _size_bytes(a), _size_bytes(b)
        if size_a is not None and size_b is not None:
            return size_a == size_b
    return str(a).strip().lower() == str(b).strip().lower()


def _workload_mismatch(options: dict, parsed: list) -> Optional[Tuple[str, str, str]]:
    """The first of the raw tool's ``WORKLOAD_OPTIONS`` on which ``options``
    and a raw output's parsed records disagree: (key, the options' value,
    the raw's)."""
    for rec in parsed:
        job_options = rec.get("options")
        if not isinstance(job_options, dict):
            continue
        for key in WORKLOAD_OPTIONS.get(rec.get("tool"), ()):
            if key in options and key in job_options:
                if not _same_option(key, options[key], job_options[key]):
                    return key, str(options[key]), str(job_options[key])
    return None


def _dd_workload(text: str, found: list) -> list:
    """dd's workload as its output says it, as a record to check the test's
    options and id against (``_workload_mismatch``): the block size is the
    bytes copied over the whole records out, the count those records.  None
    said (a localised output, a partial last record): nothing to check."""
    m = DD_RECORDS_OUT.search(text)
    copied = found[0].get("io_bytes") if found else None
    if m is None or not _is_int(copied) or int(m.group(2)) or not int(m.group(1)):
        return []
    whole = int(m.group(1))
    if copied % whole:
        return []
    return [{"tool": "dd", "options": {"bs": copied // whole, "count": whole}}]


def _compare_options(out: Checked, test: dict, parsed: list, pointer: str) -> None:
    """A raw output must be of the test's job: for fio the same rw, bs, depth
    and jobs; for ioping the same request size; for dd the same block size
    and count."""
    options = test.get("options")
    if not isinstance(options, dict):
        return
    found = _workload_mismatch(options, parsed)
    if found is not None:
        key, want, got = found
        tool = parsed[0].get("tool") or "tool"
        out.add(
            pointer,
            f"is the output of a {tool} job with {key}={got.lower()}, but the "
            f"test's options say {key}={want.lower()}",
        )


def _raw(out: Checked, raw, test: dict, pointer: str, rep_pointer: str, records, loads):
    """Check one raw output; (its tool, format, tool version, parsed
    records and what it says of its workload) when it
    parses, for ``_identity``."""
    if not isinstance(raw, dict):
        out.add(pointer, "must be an object")
        return None
    before = len(out.errors)
    fmt = _choice(out, raw, "format", pointer, RAW_FORMATS, required=True)
    _choice(out, raw, "encoding", pointer, RAW_ENCODINGS, required=True)
    _choice(out, raw, "direction", pointer, vocab.values(vocab.DIRECTION))
    _string(out, raw, "job", pointer, max_length=200)
    if len(out.errors) > before:
        return
    text = decode_raw(raw, pointer, out)
    if text is None or fmt is None:
        return
    try:
        parsed = parsers.parse(
            text,
            fmt,
            source=pointer,
            direction=parse_direction(raw, test),
            loads=loads,
        )
    except (ValueError, KeyError, TypeError) as exc:
        out.add(pointer, f"the {fmt} output does not parse: {exc}")
        return
    found = parsed.get("records") or []
    if raw.get("job") is not None:
        # One output of several fio jobs, imported as one test per job.
        found = [r for r in found if r.get("job") == raw["job"]]
    if not found:
        out.add(pointer, f"the {fmt} output holds no measurement")
        return
    if any(rec.get("direction") is None for rec in found):
        # dd, ioping -B: the test (or the raw output) must name the direction.
        fallback = (
            f"the {fmt} output does not say whether it was a read or write: give "
            "the test (or the raw output) a direction"
        )
        out.add(pointer, (parsed.get("notes") or [fallback])[0])
        return
    for i, rec in enumerate(found):
        _record(out, rec, f"{pointer}/(parsed)/{i}")
    out.raws[pointer] = (text, found)
    workload = found
    if parsed.get("tool") == "dd":
        workload = found + _dd_workload(text, found)
    _compare_options(out, test, workload, pointer)
    if isinstance(records, list):
        _compare_records(out, records, found, rep_pointer)
    return parsed.get("tool"), fmt, parsed.get("tool_version"), workload


def _record(out: Checked, rec, pointer: str) -> None:
    if not isinstance(rec, dict):
        out.add(pointer, "must be an object")
        return
    _choice(out, rec, "direction", pointer, vocab.DIRECTION, required=True)
    _string(out, rec, "job", pointer, max_length=200)
    for field in parsers.METRIC_KEYS:
        value = rec.get(field)
        if value is None:
            continue
        kind = type(value)
        if (kind is int or kind is float) and 0 <= value <= METRIC_MAX[field]:
            continue  # a finite number in range (NaN fails the comparison)
        where = f"{pointer}/{field}"
        if not _is_number(value):
            out.add(where, f"must be a number or null, not {type(value).__name__}")
        elif not math.isfinite(value):
            out.add(where, "must be a finite number")
        elif value < 0:
            out.add(where, f"{value} is negative")
        elif value > METRIC_MAX[field]:
            out.add(where, f"{value} is beyond any real device ({METRIC_MAX[field]})")


# Tests, environment, the bundle ----------------------------------------------


def _key_problem(test: dict, suite_version: Optional[str], buffered: bool):
    """Why the test's comparability key is not the one its own fields give
    (``suite.comparability_key`` of its test id, tool, tool version and
    options; ``imported/1|test id|tool major`` for an imported test), or
    None.  The fields are checked against the raw outputs (``_identity``),
    so a key that agrees with them is the raw outputs' key."""
    key = test.get("comparability_key")
    if not isinstance(key, str) or not key:
        return None
    test_id, tool = test.get("test_id"), test.get("tool")
    version = test.get("tool_version") or None
    options = test.get("options") if isinstance(test.get("options"), dict) else {}
    if key.startswith("imported/"):
        expected = f"imported/1|{test_id}|{_tool_major(version)}"
    else:
        expected = suite.comparability_key(test_id, tool, options, version)
        if suite_version:
            # The suite version the bundle says it ran (an older agent's).
            prefix = f"{suite.SUITE_ID}/{suite.SUITE_VERSION}|"
            expected = f"{suite.SUITE_ID}/{suite_version}|" + expected[len(prefix) :]
        if buffered:
            expected += "|buffered"
    if key == expected:
        return None
    return (
        f"{key!r}, but the test's id, tool, tool version and options give {expected!r}"
    )


# The suite's tests as ``_identity`` reads them, built on first use: test id
# -> (tool, options but ioengine: the agent falls back to psync where libaio
# is missing).  ``suite.get_test`` copies a test (JSON there and back) per
# call, and a bundle asks for each of its tests.
_WORKLOADS: Optional[Dict[str, Tuple[str, dict]]] = None


def _catalogue_workload(test_id: str) -> Optional[Tuple[str, dict]]:
    global _WORKLOADS
    if _WORKLOADS is None:
        # Whole before it is seen (threads): never a test missing from it.
        _WORKLOADS = {
            test["test_id"]: (
                test["tool"],
                {k: v for k, v in test["options"].items() if k != "ioengine"},
            )
            for test in suite.catalogue()
        }
    return _WORKLOADS.get(test_id)


# ``suite.tool_major`` of the versions seen: a bundle names one or two tool
# versions, each of its tests again.  Bounded: a server sees many bundles.
_MAJORS: Dict[Optional[str], str] = {}


def _tool_major(version: Optional[str]) -> str:
    try:
        return _MAJORS[version]
    except KeyError:
        major = suite.tool_major(version)
        if len(_MAJORS) < 1024:
            _MAJORS[version] = major
        return major


def _identity(out: Checked, test: dict, pointer: str, raws: list, bundle: dict):
    """What a test is comes from its raw outputs, not from the client: the
    tool that wrote them, the workload they ran (fio's rw, bs, depth and
    jobs, ioping's request size; against the test's options in ``_raw``),
    the catalogue test id's workload, and the comparability key those give
    (``_key_problem``).  The first disagreement is refused with its field."""
    tool = test.get("tool")
    for raw_tool, fmt, _version, _found in raws:
        if raw_tool and raw_tool != tool:
            out.add(
                f"{pointer}/tool",
                f"{tool!r}, but the raw output is {raw_tool}'s ({fmt})",
            )
            return
    # The tool's major version (in the key) where the output names it (fio).
    claimed = test.get("tool_version") or None
    if claimed is not None and not isinstance(claimed, str):
        return  # refused as it is (``_test``): it has no major version
    claimed_major = _tool_major(claimed)
    majors: Dict[Any, str] = {}  # the repeats' outputs name one version
    for _tool, _fmt, version, _found in raws:
        if version not in majors:
            majors[version] = _tool_major(version) if isinstance(version, str) else ""
        said = majors[version]
        if said.startswith(tool) and said != tool and said != claimed_major:
            out.add(
                f"{pointer}/tool_version",
                f"{claimed!r}, but the raw output was written by {version}",
            )
            return
    test_id = test.get("test_id")
    known = _catalogue_workload(test_id) if isinstance(test_id, str) else None
    if known is not None:
        known_tool, workload = known
        # A test imported from another tool (CrystalDiskMark, DiskSpd) is
        # named by its workload (``workload.identify``), whatever its tool.
        if known_tool != tool and tool != "other":
            out.add(f"{pointer}/test_id", f"{test_id!r} is a {known_tool} test")
            return
        for _raw_tool, _fmt, _version, found in raws:
            mismatch = _workload_mismatch(workload, found)
            if mismatch is not None:
                key, want, got = mismatch
                out.add(
                    f"{pointer}/test_id",
                    f"{test_id!r} runs {key}={want.lower()}, but the raw output "
                    f"is of a {tool} job with {key}={got.lower()}",
                )
                return
    suite_doc = bundle.get("suite") if isinstance(bundle.get("suite"), dict) else {}
    version = suite_doc.get("version")
    if suite_doc.get("id") != suite.SUITE_ID or not isinstance(version, str):
        version = None
    buffered = bool(test.get("buffered") or bundle.get("buffered"))
    problem = _key_problem(test, version, buffered)
    if problem is not None:
        out.add(f"{pointer}/comparability_key", problem)


def _test(
    out: Checked,
    test,
    pointer: str,
    *,
    needs_raw: bool,
    seen: set,
    bundle: Optional[dict] = None,
    loads=None,
) -> None:
    if not isinstance(test, dict):
        out.add(pointer, "must be an object")
        return
    test_id = _string(
        out, test, "test_id", pointer, max_length=100, required=True, pattern=TEST_ID_RE
    )
    if test_id:
        if test_id in seen:
            out.add(f"{pointer}/test_id", f"{test_id!r} appears twice")
        seen.add(test_id)
    _choice(out, test, "tool", pointer, vocab.TOOL, required=True)
    _choice(out, test, "direction", pointer, (*vocab.values(vocab.DIRECTION), "mixed"))
    _choice(out, test, "status", pointer, TEST_STATUSES)
    _string(out, test, "comparability_key", pointer, max_length=300)
    _string(out, test, "tool_version", pointer, max_length=64)
    _string(out, test, "title", pointer, max_length=200)
    _string(out, test, "group", pointer, max_length=64)
    _object(out, test, "options", pointer)
    command = _array(out, test, "command", pointer, max_items=MAX_COMMAND_ARGS)
    for i, arg in enumerate(command):
        if not isinstance(arg, str):
            out.add(f"{pointer}/command/{i}", "must be a string")
    for flag in ("preconditioned", "warmup_discarded", "comparable", "approximate"):
        _bool(out, test, flag, pointer)
    _integer(out, test, "extra_repeats", pointer, high=MAX_REPEATS)
    _seconds(out, test, "warmup_wall_s", pointer)
    repeats = _array(
        out, test, "repeats", pointer, max_items=MAX_REPEATS, required=True
    )
    if isinstance(test.get("repeats"), list) and not test["repeats"]:
        out.add(f"{pointer}/repeats", "must hold at least one repeat")
    indexes = set()
    raws = []
    for r, repeat in enumerate(repeats):
        where = f"{pointer}/repeats/{r}"
        if not isinstance(repeat, dict):
            out.add(where, "must be an object")
            continue
        index = _integer(out, repeat, "index", where, high=MAX_REPEATS * 2)
        index = r if index is None else index
        if index in indexes:
            out.add(f"{where}/index", f"repeat index {index} appears twice")
        indexes.add(index)
        started = repeat.get("started")
        if started is not None and parse_datetime(started) is None:
            out.add(f"{where}/started", "must be an RFC 3339 date-time")
        _seconds(out, repeat, "tool_wall_s", where)
        records = _array(out, repeat, "records", where, max_items=MAX_RECORDS)
        for i, rec in enumerate(records):
            _record(out, rec, f"{where}/records/{i}")
        raw = repeat.get("raw")
        if raw is None:
            if needs_raw:
                out.add(f"{where}/raw", "is required: the server re-parses it")
            elif not records:
                out.add(f"{where}/records", "must hold at least one record")
        else:
            found = _raw(
                out, raw, test, f"{where}/raw", where, repeat.get("records"), loads
            )
            if found is not None:
                raws.append(found)
    if needs_raw and bundle is not None and raws:
        _identity(out, test, pointer, raws, bundle)


def _environment(out: Checked, env: dict, pointer: str) -> None:
    virt = _object(out, env, "virtualization", pointer)
    _choice(out, virt, "type", f"{pointer}/virtualization", vocab.VIRTUALIZATION)
    platform = _object(out, env, "platform", pointer)
    _choice(out, platform, "value", f"{pointer}/platform", vocab.PLATFORM)
    cpu = _object(out, env, "cpu", pointer)
    _string(out, cpu, "model", f"{pointer}/cpu", max_length=200)
    _integer(out, cpu, "sockets", f"{pointer}/cpu", high=1024)
    _integer(out, cpu, "cores", f"{pointer}/cpu", high=2**20)
    _integer(out, cpu, "threads", f"{pointer}/cpu", high=2**20)
    _integer(out, env, "memory_bytes", pointer, high=2**60)
    os_info = _object(out, env, "os", pointer)
    _string(out, os_info, "name", f"{pointer}/os", max_length=200)
    _string(out, os_info, "kernel", f"{pointer}/os", max_length=200)
    target = _object(out, env, "target", pointer)
    where = f"{pointer}/target"
    _choice(out, target, "disk_bus", where, vocab.DISK_BUS)
    _string(out, target, "filesystem", where, max_length=50)
    _string(out, target, "model", where, max_length=200)
    _integer(out, target, "size_bytes", where, high=2**62)
    if "rotational" in target and target["rotational"] not in (True, False, None):
        out.add(f"{where}/rotational", "must be true, false or null")
    options = _array(out, target, "mount_options", where, max_items=MAX_MOUNT_OPTIONS)
    if any(not isinstance(o, str) for o in options):
        out.add(f"{where}/mount_options", "must be an array of strings")


def check(doc, *, allow_published: bool = False, now=None, loads=None) -> Checked:
    """Every problem of a bundle; ``Checked.errors`` is empty when it is valid.

    ``allow_published``: published reference figures (source "published",
    without raw outputs), which only the server's staff may send.
    ``loads``: what reads the raw outputs that are JSON (``parsers.parse``).
    """
    out = Checked()
    if not isinstance(doc, dict):
        out.add("", f"must be a JSON object, not {type(doc).__name__}")
        return out
    _walk(out, doc, "")
    if out.errors:
        return out
    version = doc.get("schema_version")
    if not _is_int(version) or version != SCHEMA_VERSION:
        out.add("/schema_version", f"must be {SCHEMA_VERSION}")
    bundle_id = doc.get("bundle_id")
    if not isinstance(bundle_id, str):
        out.add("/bundle_id", "is required: a UUID string")
    else:
        try:
            uuid.UUID(bundle_id)
        except ValueError:
            out.add("/bundle_id", "must be a UUID")
    created = parse_datetime(doc.get("created"))
    if created is None:
        out.add(
            "/created",
            "must be an RFC 3339 date-time with a time zone (-14:00 to +14:00)",
        )
    else:
        now = now or datetime.datetime.now(datetime.timezone.utc)
        if created > now + datetime.timedelta(days=1):
            out.add("/created", "lies in the future")
        elif created.year < 2000:
            out.add("/created", "lies before 2000")
    agent = _object(out, doc, "agent", "", required=True)
    _string(out, agent, "name", "/agent", max_length=64, required=True)
    _string(out, agent, "version", "/agent", max_length=32, required=True)
    suite_doc = _object(out, doc, "suite", "", required=True)
    _string(out, suite_doc, "id", "/suite", max_length=64, required=True)
    _string(out, suite_doc, "version", "/suite", max_length=32, required=True)
    _choice(out, suite_doc, "profile", "/suite", PROFILES, required=True)
    _choice(out, doc, "role", "", vocab.ROLE, required=True)
    for key in ("pair_id", "sweep_id"):
        if doc.get(key) is not None:
            _string(out, doc, key, "", max_length=64, pattern=ID_RE)
    # A sweep's run order: its round and its place in the whole sweep.
    for key in ("sweep_round", "sweep_position"):
        _integer(out, doc, key, "", low=1, high=MAX_SWEEP_RUNS)
    for key, value in _object(out, doc, "tag_sources", "").items():
        if value not in TAG_SOURCES:
            out.add(
                f"/tag_sources/{escape(key)}",
                f"must be one of {', '.join(TAG_SOURCES)}",
            )
    sources = vocab.values(vocab.SOURCE) if allow_published else SUBMITTABLE_SOURCES
    source = _choice(out, doc, "source", "", tuple(sources), required=True)
    _string(out, doc, "title", "", max_length=200)
    _string(out, doc, "notes", "", max_length=MAX_STRING)
    citation = _string(out, doc, "citation", "", max_length=MAX_STRING)
    url = _string(out, doc, "citation_url", "", max_length=500)
    if url and not URL_RE.match(url):
        out.add("/citation_url", "must be an http(s) URL")
    if source == "published" and not citation:
        out.add("/citation", "is required for published figures")
    _environment(
        out, _object(out, doc, "environment", "", required=True), "/environment"
    )
    out.errors.extend(check_tags(_object(out, doc, "tags", ""), "/tags"))
    warnings = _array(out, doc, "warnings", "", max_items=MAX_WARNINGS)
    for i, warning in enumerate(warnings):
        if not isinstance(warning, dict):
            out.add(f"/warnings/{i}", "must be an object")
            continue
        _string(out, warning, "code", f"/warnings/{i}", max_length=64, required=True)
        _string(out, warning, "message", f"/warnings/{i}", max_length=MAX_STRING)
    _bool(out, doc, "partial", "")
    _bool(out, doc, "virtual_host", "")
    _string(out, doc, "stop_reason", "", max_length=MAX_STRING)
    timing = _object(out, doc, "timing", "")
    for key in ("run_s", "tool_s"):
        _seconds(out, timing, key, "/timing")
    _integer(out, timing, "tool_processes", "/timing", high=10**6)
    for i, item in enumerate(_array(out, doc, "not_run", "", max_items=MAX_NOT_RUN)):
        if not isinstance(item, dict):
            out.add(f"/not_run/{i}", "must be an object")
            continue
        _string(out, item, "test_id", f"/not_run/{i}", max_length=100, required=True)
        _choice(out, item, "status", f"/not_run/{i}", NOT_RUN_STATUSES, required=True)
    tests = _array(out, doc, "tests", "", max_items=MAX_TESTS, required=True)
    if isinstance(doc.get("tests"), list) and not doc["tests"]:
        out.add("/tests", "must hold at least one test")
    seen: set = set()
    for t, test in enumerate(tests):
        _test(
            out,
            test,
            f"/tests/{t}",
            needs_raw=source != "published",
            seen=seen,
            bundle=doc,
            loads=loads,
        )
    return out


# The JSON Schema -------------------------------------------------------------


def json_schema() -> dict:
    """The shape rules as a JSON Schema (draft 2020-12), from the same
    vocabularies and limits ``check`` uses.  ``check`` is the full contract;
    the schema is for other writers' tools and editors."""
    string = {"type": "string"}

    # Optional fields may be null (``check`` treats null as absent); which
    # are required is in each object's "required".
    def text(max_length: int) -> dict:
        return {"type": ["string", "null"], "maxLength": max_length}

    def enum(values) -> dict:
        return {"enum": [*values, None]}

    number = {"type": ["number", "null"], "minimum": 0}
    record = {
        "type": "object",
        "required": ["direction"],
        "properties": {
            "direction": enum(vocab.values(vocab.DIRECTION)),
            "job": text(200),
            **{
                key: {**number, "maximum": METRIC_MAX[key]}
                for key in parsers.METRIC_KEYS
            },
        },
    }
    raw = {
        "type": "object",
        "required": ["format", "encoding", "data"],
        "properties": {
            "format": enum(RAW_FORMATS),
            "encoding": enum(RAW_ENCODINGS),
            "data": string,
            "direction": enum(vocab.values(vocab.DIRECTION)),
            "job": text(200),
        },
    }
    seconds = {"type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS}
    repeat = {
        "type": "object",
        "properties": {
            "index": {
                "type": ["integer", "null"],
                "minimum": 0,
                "maximum": MAX_REPEATS * 2,
            },
            "started": {"type": ["string", "null"], "format": "date-time"},
            "tool_wall_s": seconds,
            "records": {
                "type": ["array", "null"],
                "maxItems": MAX_RECORDS,
                "items": record,
            },
            "raw": raw,
        },
    }
    test = {
        "type": "object",
        "required": ["test_id", "tool", "repeats"],
        "properties": {
            "test_id": {"type": "string", "pattern": TEST_ID_RE.pattern},
            "tool": enum(vocab.values(vocab.TOOL)),
            "direction": enum((*vocab.values(vocab.DIRECTION), "mixed")),
            "status": enum(TEST_STATUSES),
            "comparability_key": text(300),
            "tool_version": text(64),
            "title": text(200),
            "group": text(64),
            "options": {"type": ["object", "null"]},
            "command": {
                "type": ["array", "null"],
                "maxItems": MAX_COMMAND_ARGS,
                "items": string,
            },
            "preconditioned": {"type": "boolean"},
            "warmup_discarded": {"type": "boolean"},
            "comparable": {"type": "boolean"},
            "approximate": {"type": "boolean"},
            "extra_repeats": {
                "type": ["integer", "null"],
                "minimum": 0,
                "maximum": MAX_REPEATS,
            },
            "warmup_wall_s": seconds,
            "repeats": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_REPEATS,
                "items": repeat,
            },
        },
    }
    tags = {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            key: (
                {"type": "string", "enum": list(vocab.values(allowed))}
                if allowed is not None
                else (
                    {"type": "string", "pattern": DIGITS_RE.pattern}
                    if key in TAG_INTEGER_MAX
                    else {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": TAG_MAX_LENGTH.get(key, TAG_DEFAULT_MAX_LENGTH),
                    }
                )
            )
            for key, allowed in sorted(vocab.TAG_VOCABULARIES.items())
        },
    }
    # An empty pair or sweep id is no id (as null).
    nullable_id = {"type": ["string", "null"], "pattern": "^[A-Za-z0-9._-]{0,64}$"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://benchdb.invalid/schemas/bundle-1.json",
        "title": "benchdb bundle",
        "description": "One run of the benchdb suite (docs/bundle.md). Generated "
        "by benchdb_agent.contract.json_schema(); benchdb_agent.contract.check "
        "is the full contract (raw outputs re-parsed, limits, text rules).",
        "type": "object",
        "required": [
            "schema_version",
            "bundle_id",
            "created",
            "agent",
            "suite",
            "role",
            "source",
            "environment",
            "tests",
        ],
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION},
            "bundle_id": {"type": "string", "format": "uuid"},
            "created": {"type": "string", "format": "date-time"},
            "agent": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": text(64), "version": text(32)},
            },
            "suite": {
                "type": "object",
                "required": ["id", "version", "profile"],
                "properties": {
                    "id": text(64),
                    "version": text(32),
                    "profile": enum(PROFILES),
                },
            },
            "role": enum(vocab.values(vocab.ROLE)),
            "pair_id": nullable_id,
            "sweep_id": nullable_id,
            "sweep_round": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_SWEEP_RUNS,
            },
            "sweep_position": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_SWEEP_RUNS,
            },
            "source": enum(vocab.values(vocab.SOURCE)),
            "title": text(200),
            "notes": text(MAX_STRING),
            "citation": text(MAX_STRING),
            "citation_url": {
                "type": ["string", "null"],
                "maxLength": 500,
                "pattern": "^https?://",
            },
            "environment": {"type": "object"},
            "tags": tags,
            "tag_sources": {
                "type": ["object", "null"],
                "additionalProperties": enum(TAG_SOURCES),
            },
            "warnings": {
                "type": ["array", "null"],
                "maxItems": MAX_WARNINGS,
                "items": {
                    "type": "object",
                    "required": ["code"],
                    "properties": {"code": text(64), "message": text(MAX_STRING)},
                },
            },
            "partial": {"type": "boolean"},
            "virtual_host": {"type": "boolean"},
            "stop_reason": {"type": ["string", "null"]},
            "timing": {
                "type": ["object", "null"],
                "properties": {
                    "run_s": seconds,
                    "tool_s": seconds,
                    "tool_processes": {
                        "type": ["integer", "null"],
                        "minimum": 0,
                        "maximum": 10**6,
                    },
                },
            },
            "not_run": {
                "type": ["array", "null"],
                "maxItems": MAX_NOT_RUN,
                "items": {
                    "type": "object",
                    "required": ["test_id", "status"],
                    "properties": {
                        "test_id": text(100),
                        "status": enum(NOT_RUN_STATUSES),
                    },
                },
            },
            "tests": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_TESTS,
                "items": test,
            },
        },
    }


def schema_text() -> str:
    """``json_schema`` as the committed file holds it."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m benchdb_agent.contract > bundle.schema.json
    import sys

    sys.stdout.write(schema_text())
