"""Server-side checks of an uploaded bundle, each error with a JSON pointer.

The agent's own ``benchdb_agent.bundle.validate`` checks the contract's
shape; this module adds what only the server must enforce before it stores
anything: limits (tests, repeats, string lengths, decompressed raw sizes),
plausible number ranges, vocabulary values that become database columns,
and that every raw output parses with the agent's parsers.  A bundle that
passes here is stored by the ingest task without a database error.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import uuid
import zlib
from datetime import timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from benchdb.results.ingest import parse_direction
from benchdb.results.models import METRIC_FIELDS
from benchdb_agent import bundle as agent_bundle
from benchdb_agent import parsers, vocab

MAX_TESTS = 200
MAX_REPEATS = 50
MAX_RECORDS = 64
MAX_WARNINGS = 500
MAX_STRING = 4096
MAX_COMMAND_ARGS = 200
MAX_DEPTH = 12
# A raw output decompressed: fio JSON of a large job file is a few hundred KiB.
MAX_RAW_BYTES = 16 * 1024 * 1024

RAW_FORMATS = parsers.FORMATS
RAW_ENCODINGS = ("gzip+base64", "plain")
PROFILES = ("quick", "standard", "full", "custom")
SUBMITTABLE_SOURCES = ("measured", "imported")
ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
# ASCII digits only: str.isdigit() also accepts "¹", which int() refuses.
DIGITS = re.compile(r"[0-9]{1,18}")

# Upper bounds far beyond any real device, so only garbage is refused.  Values
# inside these but beyond a disk class's reach are stored and marked suspect
# by ingest's plausibility checks instead.
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

# Free-text tags end up in columns of these lengths.
TAG_MAX_LENGTH = {
    "hypervisor_version": 100,
    "host_filesystem": 50,
    "guest_filesystem": 50,
    "disk_model": 200,
    "raid_controller": 200,
    "note": 2000,
}
TAG_INTEGER_MAX = {"disk_count": 10_000, "controller_cache": 2**50}


class Errors(list):
    """A list of ``{"pointer", "message"}`` with a helper to add one."""

    def add(self, pointer: str, message: str) -> None:
        self.append({"pointer": pointer, "message": message})


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(errors, doc, key, pointer, *, max_length, required=False, pattern=None):
    value = doc.get(key)
    where = f"{pointer}/{key}"
    if value is None:
        if required:
            errors.add(where, "is required")
        return None
    if not isinstance(value, str):
        errors.add(where, f"must be a string, not {type(value).__name__}")
        return None
    if required and not value:
        errors.add(where, "must not be empty")
    if len(value) > max_length:
        errors.add(where, f"is {len(value)} characters long; at most {max_length}")
    elif pattern is not None and value and not pattern.match(value):
        errors.add(where, f"must match {pattern.pattern}")
    return value


def _choice(errors, doc, key, pointer, vocabulary, *, required=False):
    value = doc.get(key)
    where = f"{pointer}/{key}"
    allowed = vocabulary if isinstance(vocabulary, tuple) else ()
    allowed = tuple(v[0] if isinstance(v, tuple) else v for v in allowed)
    if value is None:
        if required:
            errors.add(where, "is required")
        return None
    if value not in allowed:
        errors.add(where, f"{value!r} is not one of: {', '.join(allowed)}")
        return None
    return value


def _integer(errors, doc, key, pointer, *, low=0, high=2**62, required=False):
    value = doc.get(key)
    where = f"{pointer}/{key}"
    if value is None:
        if required:
            errors.add(where, "is required")
        return None
    if not _is_int(value):
        errors.add(where, f"must be a whole number, not {type(value).__name__}")
        return None
    if not low <= value <= high:
        errors.add(where, f"{value} is outside {low}..{high}")
        return None
    return value


def _object(errors, doc, key, pointer, *, required=False) -> dict:
    value = doc.get(key)
    if value is None:
        if required:
            errors.add(f"{pointer}/{key}", "is required")
        return {}
    if not isinstance(value, dict):
        errors.add(f"{pointer}/{key}", f"must be an object, not {type(value).__name__}")
        return {}
    return value


def _array(errors, doc, key, pointer, *, max_items, required=False) -> list:
    value = doc.get(key)
    if value is None:
        if required:
            errors.add(f"{pointer}/{key}", "is required")
        return []
    if not isinstance(value, list):
        errors.add(f"{pointer}/{key}", f"must be an array, not {type(value).__name__}")
        return []
    if len(value) > max_items:
        errors.add(f"{pointer}/{key}", f"has {len(value)} items; at most {max_items}")
        return []
    return value


def _walk_limits(errors, value, pointer: str, depth: int = 0) -> None:
    """Any string too long or any nesting too deep, wherever it is."""
    if depth > MAX_DEPTH:
        errors.add(pointer, f"is nested deeper than {MAX_DEPTH} levels")
        return
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            errors.add(
                pointer, f"is {len(value)} characters long; at most {MAX_STRING}"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            if len(key) > 200:
                errors.add(pointer, "has a key longer than 200 characters")
                continue
            esc = key.replace("~", "~0").replace("/", "~1")
            if pointer.endswith("/raw") and key == "data":
                continue
            _walk_limits(errors, item, f"{pointer}/{esc}", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk_limits(errors, item, f"{pointer}/{i}", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        errors.add(pointer, "must be a finite number")


def decode_raw_checked(raw: dict, pointer: str, errors: Errors) -> str | None:
    """The raw output's text, or None with an error (bad base64, gzip, size)."""
    data = raw.get("data")
    if not isinstance(data, str):
        errors.add(f"{pointer}/data", "must be a string")
        return None
    if raw.get("encoding") == "plain":
        if len(data) > MAX_RAW_BYTES:
            errors.add(f"{pointer}/data", f"is larger than {MAX_RAW_BYTES} bytes")
            return None
        return data
    try:
        packed = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        errors.add(f"{pointer}/data", "is not valid base64")
        return None
    try:
        # wbits 16+MAX: gzip framing; max_length bounds a decompression bomb.
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflater.decompress(packed, MAX_RAW_BYTES + 1)
    except zlib.error:
        errors.add(f"{pointer}/data", "is not gzip-compressed data")
        return None
    if len(text) > MAX_RAW_BYTES or inflater.unconsumed_tail:
        errors.add(f"{pointer}/data", f"decompresses beyond {MAX_RAW_BYTES} bytes")
        return None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        errors.add(f"{pointer}/data", "is not UTF-8 text")
        return None


def _record(errors, rec, pointer):
    if not isinstance(rec, dict):
        errors.add(pointer, "must be an object")
        return
    _choice(errors, rec, "direction", pointer, vocab.DIRECTION, required=True)
    _string(errors, rec, "job", pointer, max_length=200)
    for field in METRIC_FIELDS:
        value = rec.get(field)
        if value is None:
            continue
        where = f"{pointer}/{field}"
        if not _is_number(value):
            errors.add(where, f"must be a number or null, not {type(value).__name__}")
        elif not math.isfinite(value):
            errors.add(where, "must be a finite number")
        elif value < 0:
            errors.add(where, f"{value} is negative")
        elif value > METRIC_MAX[field]:
            errors.add(
                where, f"{value} is beyond any real device ({METRIC_MAX[field]})"
            )


def _raw(errors, raw, pointer, parse, direction=None) -> None:
    if not isinstance(raw, dict):
        errors.add(pointer, "must be an object")
        return
    before = len(errors)
    fmt = _choice(errors, raw, "format", pointer, RAW_FORMATS, required=True)
    _choice(errors, raw, "encoding", pointer, RAW_ENCODINGS, required=True)
    if len(errors) > before:
        return
    text = decode_raw_checked(raw, pointer, errors)
    if text is None or parse is None or fmt is None:
        return
    try:
        parsed = parse(text, fmt, source=pointer, direction=direction)
    except (ValueError, KeyError, TypeError) as exc:
        errors.add(pointer, f"the {fmt} output does not parse: {exc}")
        return
    records = parsed.get("records") or []
    if not records:
        errors.add(pointer, f"the {fmt} output holds no measurement")
    if any(r.get("direction") is None for r in records):
        # dd, ioping -B: the test (or raw) must name the direction (issue 12).
        errors.add(pointer, (parsed.get("notes") or ["direction unknown"])[0])
        return
    for i, rec in enumerate(records):
        _record(errors, rec, f"{pointer}/(parsed)/{i}")


def _test(errors, test, pointer, *, needs_raw, parse, seen_ids) -> None:
    if not isinstance(test, dict):
        errors.add(pointer, "must be an object")
        return
    test_id = _string(
        errors,
        test,
        "test_id",
        pointer,
        max_length=100,
        required=True,
        pattern=TEST_ID_RE,
    )
    if test_id:
        if test_id in seen_ids:
            errors.add(f"{pointer}/test_id", f"{test_id!r} appears twice")
        seen_ids.add(test_id)
    _choice(errors, test, "tool", pointer, vocab.TOOL, required=True)
    _choice(
        errors, test, "direction", pointer, (*vocab.values(vocab.DIRECTION), "mixed")
    )
    _string(errors, test, "comparability_key", pointer, max_length=300)
    _string(errors, test, "tool_version", pointer, max_length=64)
    _string(errors, test, "title", pointer, max_length=200)
    _string(errors, test, "group", pointer, max_length=64)
    _object(errors, test, "options", pointer)
    command = _array(errors, test, "command", pointer, max_items=MAX_COMMAND_ARGS)
    for i, arg in enumerate(command):
        if not isinstance(arg, str):
            errors.add(f"{pointer}/command/{i}", "must be a string")
    for flag in ("preconditioned", "warmup_discarded", "comparable", "approximate"):
        if flag in test and not isinstance(test[flag], bool):
            errors.add(f"{pointer}/{flag}", "must be true or false")
    _integer(errors, test, "extra_repeats", pointer, high=MAX_REPEATS)
    repeats = _array(
        errors, test, "repeats", pointer, max_items=MAX_REPEATS, required=True
    )
    if not repeats and isinstance(test.get("repeats"), list):
        if len(test["repeats"]) == 0:
            errors.add(f"{pointer}/repeats", "must hold at least one repeat")
    indexes = set()
    for r, repeat in enumerate(repeats):
        where = f"{pointer}/repeats/{r}"
        if not isinstance(repeat, dict):
            errors.add(where, "must be an object")
            continue
        index = _integer(errors, repeat, "index", where, high=MAX_REPEATS * 2)
        index = r if index is None else index
        if index in indexes:
            errors.add(f"{where}/index", f"repeat index {index} appears twice")
        indexes.add(index)
        started = repeat.get("started")
        if started is not None and not _datetime_ok(started):
            errors.add(f"{where}/started", "must be an RFC 3339 date-time")
        records = _array(errors, repeat, "records", where, max_items=MAX_RECORDS)
        for i, rec in enumerate(records):
            _record(errors, rec, f"{where}/records/{i}")
        raw = repeat.get("raw")
        if raw is None:
            if needs_raw:
                errors.add(f"{where}/raw", "is required: the server re-parses it")
            elif not records:
                errors.add(f"{where}/records", "must hold at least one record")
        else:
            _raw(errors, raw, f"{where}/raw", parse, parse_direction(raw, test))


def _datetime_ok(value) -> bool:
    if not isinstance(value, str) or len(value) > 64:
        return False
    try:
        parsed = parse_datetime(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return parsed is not None and parsed.tzinfo is not None


def _environment(errors, env, pointer) -> None:
    virt = _object(errors, env, "virtualization", pointer)
    _choice(errors, virt, "type", f"{pointer}/virtualization", vocab.VIRTUALIZATION)
    platform = _object(errors, env, "platform", pointer)
    _choice(errors, platform, "value", f"{pointer}/platform", vocab.PLATFORM)
    cpu = _object(errors, env, "cpu", pointer)
    _string(errors, cpu, "model", f"{pointer}/cpu", max_length=200)
    _integer(errors, cpu, "sockets", f"{pointer}/cpu", high=1024)
    _integer(errors, cpu, "cores", f"{pointer}/cpu", high=2**20)
    _integer(errors, cpu, "threads", f"{pointer}/cpu", high=2**20)
    _integer(errors, env, "memory_bytes", pointer, high=2**60)
    os_info = _object(errors, env, "os", pointer)
    _string(errors, os_info, "name", f"{pointer}/os", max_length=200)
    _string(errors, os_info, "kernel", f"{pointer}/os", max_length=200)
    target = _object(errors, env, "target", pointer)
    where = f"{pointer}/target"
    _choice(errors, target, "disk_bus", where, vocab.DISK_BUS)
    _string(errors, target, "filesystem", where, max_length=50)
    _string(errors, target, "model", where, max_length=200)
    _integer(errors, target, "size_bytes", where, high=2**62)
    if "rotational" in target and target["rotational"] not in (True, False, None):
        errors.add(f"{where}/rotational", "must be true, false or null")


def _tags(errors, tags, pointer) -> None:
    for key, value in tags.items():
        where = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
        if key not in vocab.TAG_VOCABULARIES:
            errors.add(
                where, f"unknown tag; known: {', '.join(vocab.TAG_VOCABULARIES)}"
            )
            continue
        if not isinstance(value, str):
            errors.add(where, f"must be a string, not {type(value).__name__}")
            continue
        allowed = vocab.TAG_VOCABULARIES[key]
        if allowed is not None:
            values = vocab.values(allowed)
            if value not in values:
                errors.add(where, f"{value!r} is not one of: {', '.join(values)}")
        elif key in TAG_INTEGER_MAX:
            if not DIGITS.fullmatch(value) or int(value) > TAG_INTEGER_MAX[key]:
                errors.add(where, f"must be a whole number 0..{TAG_INTEGER_MAX[key]}")
        elif len(value) > TAG_MAX_LENGTH.get(key, 200):
            errors.add(
                where,
                f"is {len(value)} characters long; at most "
                f"{TAG_MAX_LENGTH.get(key, 200)}",
            )


def check_bundle(doc, *, allow_published: bool = False, parse=None) -> list[dict]:
    """Every problem of a bundle as ``{"pointer", "message"}``; empty if fine.

    ``parse`` is the agent's ``parsers.parse``: each raw output is parsed
    here, so a bundle whose numbers cannot be re-derived is refused at once
    with a pointer instead of failing later in the worker.
    """
    errors = Errors()
    if not isinstance(doc, dict):
        errors.add("", f"must be a JSON object, not {type(doc).__name__}")
        return errors
    _walk_limits(errors, doc, "")
    if errors:
        return errors
    version = doc.get("schema_version")
    if not _is_int(version) or version != 1:
        errors.add("/schema_version", "must be 1")
    bundle_id = doc.get("bundle_id")
    try:
        uuid.UUID(str(bundle_id)) if isinstance(bundle_id, str) else None
        if not isinstance(bundle_id, str):
            errors.add("/bundle_id", "is required: a UUID string")
    except ValueError:
        errors.add("/bundle_id", "must be a UUID")
    created = doc.get("created")
    if not _datetime_ok(created):
        errors.add("/created", "must be an RFC 3339 date-time with a time zone")
    else:
        when = parse_datetime(created.replace("Z", "+00:00"))
        if when > timezone.now() + timedelta(days=1):
            errors.add("/created", "lies in the future")
        elif when.year < 2000:
            errors.add("/created", "lies before 2000")
    agent = _object(errors, doc, "agent", "", required=True)
    _string(errors, agent, "name", "/agent", max_length=64, required=True)
    _string(errors, agent, "version", "/agent", max_length=32, required=True)
    suite = _object(errors, doc, "suite", "", required=True)
    _string(errors, suite, "id", "/suite", max_length=64, required=True)
    if not isinstance(suite.get("version"), str | int) or isinstance(
        suite.get("version"), bool
    ):
        errors.add("/suite/version", "is required: a string")
    elif len(str(suite["version"])) > 32:
        errors.add("/suite/version", "is longer than 32 characters")
    _choice(errors, suite, "profile", "/suite", PROFILES)
    _choice(errors, doc, "role", "", vocab.ROLE, required=True)
    pair_id = doc.get("pair_id")
    if pair_id is not None:
        _string(errors, doc, "pair_id", "", max_length=64, pattern=ID_RE)
    if doc.get("sweep_id") is not None:
        _string(errors, doc, "sweep_id", "", max_length=64, pattern=ID_RE)
    tag_sources = _object(errors, doc, "tag_sources", "")
    for key, value in tag_sources.items():
        if value not in agent_bundle.TAG_SOURCES:
            errors.add(
                f"/tag_sources/{key}",
                f"must be one of {', '.join(agent_bundle.TAG_SOURCES)}",
            )
    sources = vocab.values(vocab.SOURCE) if allow_published else SUBMITTABLE_SOURCES
    source = _choice(errors, doc, "source", "", tuple(sources), required=True)
    _string(errors, doc, "title", "", max_length=200)
    _string(errors, doc, "notes", "", max_length=MAX_STRING)
    citation = _string(errors, doc, "citation", "", max_length=MAX_STRING)
    url = _string(errors, doc, "citation_url", "", max_length=500)
    if url and not re.match(r"^https?://\S+$", url):
        errors.add("/citation_url", "must be an http(s) URL")
    if source == "published" and not citation:
        errors.add("/citation", "is required for published figures")
    _environment(
        errors, _object(errors, doc, "environment", "", required=True), "/environment"
    )
    _tags(errors, _object(errors, doc, "tags", ""), "/tags")
    warnings = _array(errors, doc, "warnings", "", max_items=MAX_WARNINGS)
    for i, warning in enumerate(warnings):
        if not isinstance(warning, dict):
            errors.add(f"/warnings/{i}", "must be an object")
            continue
        _string(errors, warning, "code", f"/warnings/{i}", max_length=64, required=True)
        _string(errors, warning, "message", f"/warnings/{i}", max_length=MAX_STRING)
    tests = _array(errors, doc, "tests", "", max_items=MAX_TESTS, required=True)
    if isinstance(doc.get("tests"), list) and not doc["tests"]:
        errors.add("/tests", "must hold at least one test")
    seen: set[str] = set()
    for t, test in enumerate(tests):
        _test(
            errors,
            test,
            f"/tests/{t}",
            needs_raw=source != "published",
            parse=parse,
            seen_ids=seen,
        )
    return errors
