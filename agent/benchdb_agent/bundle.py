"""Bundles: one JSON document per run, the contract between agent and server.

``docs/bundle.schema.json`` (shipped in this package as ``bundle.schema.json``)
is the machine-readable definition; ``validate`` checks the same rules with
the standard library only, so the agent can refuse to write or send a bundle
the server would refuse.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import math
import re
import uuid
from pathlib import Path

from . import __version__, parsers, suite, vocab

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "bundle.schema.json"
PAIR_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
# The raw formats are the parsers' formats; the metrics are the records'.
RAW_FORMATS = parsers.FORMATS
NUMERIC_KEYS = parsers.METRIC_KEYS
# Where a tag's value came from (``tag_sources``): read from the VM's
# configuration on the host by the agent, or typed by a person.
TAG_SOURCES = ("host-config", "user")


def now() -> str:
    return (
        datetime.datetime.now(datetime.timezone.utc)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z")
    )


def encode_raw(text: str, fmt: str, direction: str | None = None) -> dict:
    """A raw tool output as the bundle carries it (gzip, then base64)."""
    raw = {
        "format": fmt,
        "encoding": "gzip+base64",
        "data": base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode(
            "ascii"
        ),
    }
    if direction:
        raw["direction"] = direction
    return raw


def decode_raw(raw: dict) -> str:
    if raw.get("encoding") == "plain":
        return raw["data"]
    return gzip.decompress(base64.b64decode(raw["data"])).decode("utf-8")


def new_bundle(
    *,
    role: str,
    profile: str,
    environment: dict,
    tags: dict,
    pair_id: str | None = None,
    source: str = "measured",
) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "bundle_id": str(uuid.uuid4()),
        "created": now(),
        "agent": {"name": "benchdb-agent", "version": __version__},
        "suite": {
            "id": suite.SUITE_ID,
            "version": suite.SUITE_VERSION,
            "profile": profile,
        },
        "role": role,
        "pair_id": pair_id,
        "source": source,
        "environment": environment,
        "tags": dict(tags),
        "warnings": [],
        "tests": [],
    }


def _bad_number(value) -> bool:
    return (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))
        or value < 0
    )


def validate(doc) -> list:
    """Every way ``doc`` breaks the bundle contract, as (JSON pointer, message).

    An empty list means the bundle is valid.
    """
    errors = []

    def err(pointer, message):
        errors.append((pointer, message))

    if not isinstance(doc, dict):
        return [("", "a bundle is a JSON object")]
    if doc.get("schema_version") != SCHEMA_VERSION:
        err("/schema_version", f"must be {SCHEMA_VERSION}")
    try:
        uuid.UUID(str(doc.get("bundle_id")))
    except ValueError:
        err("/bundle_id", "must be a UUID")
    if not isinstance(doc.get("created"), str):
        err("/created", "must be an RFC 3339 date-time string")
    agent = doc.get("agent")
    if not isinstance(agent, dict) or not isinstance(agent.get("version"), str):
        err("/agent", "must be an object with a version string")
    s = doc.get("suite")
    if not isinstance(s, dict) or not all(
        isinstance(s.get(k), str) for k in ("id", "version", "profile")
    ):
        err("/suite", "must be an object with id, version and profile strings")
    if doc.get("role") not in vocab.values(vocab.ROLE):
        err("/role", f"must be one of {', '.join(vocab.values(vocab.ROLE))}")
    pair = doc.get("pair_id")
    if pair is not None and (not isinstance(pair, str) or not PAIR_RE.match(pair)):
        err("/pair_id", "must be null or 1-64 characters of A-Z a-z 0-9 . _ -")
    sweep = doc.get("sweep_id")
    if sweep is not None and (not isinstance(sweep, str) or not PAIR_RE.match(sweep)):
        err("/sweep_id", "must be null or 1-64 characters of A-Z a-z 0-9 . _ -")
    if doc.get("source") not in ("measured", "imported"):
        err("/source", "must be measured or imported")
    if not isinstance(doc.get("environment"), dict):
        err("/environment", "must be an object")
    tags = doc.get("tags")
    if not isinstance(tags, dict):
        err("/tags", "must be an object")
    else:
        for key, value in tags.items():
            problem = check_tag(key, value)
            if problem:
                err(f"/tags/{key}", problem)
    sources = doc.get("tag_sources")
    if sources is not None:
        if not isinstance(sources, dict):
            err("/tag_sources", "must be an object")
        else:
            for key, value in sources.items():
                if value not in TAG_SOURCES:
                    err(
                        f"/tag_sources/{key}",
                        f"must be one of {', '.join(TAG_SOURCES)}",
                    )
    warnings = doc.get("warnings")
    if not isinstance(warnings, list):
        err("/warnings", "must be an array")
    else:
        for i, w in enumerate(warnings):
            if (
                not isinstance(w, dict)
                or not isinstance(w.get("code"), str)
                or not isinstance(w.get("message"), str)
            ):
                err(f"/warnings/{i}", "must be an object with code and message strings")
    if "partial" in doc and not isinstance(doc["partial"], bool):
        err("/partial", "must be true or false")
    if doc.get("stop_reason") is not None and not isinstance(doc["stop_reason"], str):
        err("/stop_reason", "must be null or a string")
    not_run = doc.get("not_run", [])
    if not isinstance(not_run, list):
        err("/not_run", "must be an array")
    else:
        for i, item in enumerate(not_run):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("test_id"), str)
                or item.get("status") not in ("failed", "not-run")
            ):
                err(f"/not_run/{i}", "needs a test_id and status failed or not-run")
    tests = doc.get("tests")
    if not isinstance(tests, list):
        err("/tests", "must be an array")
        return errors
    seen = set()
    for t, test in enumerate(tests):
        where = f"/tests/{t}"
        if not isinstance(test, dict):
            err(where, "must be an object")
            continue
        test_id = test.get("test_id")
        if not isinstance(test_id, str) or not TEST_ID_RE.match(test_id):
            err(f"{where}/test_id", "must be 1-100 characters of A-Z a-z 0-9 . _ : -")
        elif test_id in seen:
            err(f"{where}/test_id", f"{test_id!r} appears twice")
        seen.add(test_id)
        if test.get("tool") not in vocab.values(vocab.TOOL):
            err(
                f"{where}/tool", f"must be one of {', '.join(vocab.values(vocab.TOOL))}"
            )
        if test.get("status", "complete") not in ("complete", "partial", "failed"):
            err(f"{where}/status", "must be complete, partial or failed")
        if not isinstance(test.get("options", {}), dict):
            err(f"{where}/options", "must be an object")
        repeats = test.get("repeats")
        if not isinstance(repeats, list) or not repeats:
            err(f"{where}/repeats", "must be a non-empty array")
            continue
        for r, rep in enumerate(repeats):
            rw = f"{where}/repeats/{r}"
            if not isinstance(rep, dict):
                err(rw, "must be an object")
                continue
            raw = rep.get("raw")
            if raw is not None:
                if not isinstance(raw, dict) or raw.get("format") not in RAW_FORMATS:
                    err(f"{rw}/raw/format", f"must be one of {', '.join(RAW_FORMATS)}")
                elif raw.get("encoding") not in (
                    "gzip+base64",
                    "plain",
                ) or not isinstance(raw.get("data"), str):
                    err(
                        f"{rw}/raw",
                        "needs encoding gzip+base64 or plain and a data string",
                    )
            records = rep.get("records")
            if not isinstance(records, list) or (raw is None and not records):
                err(f"{rw}/records", "must be an array (non-empty without raw)")
                continue
            for i, rec in enumerate(records):
                if not isinstance(rec, dict) or rec.get(
                    "direction"
                ) not in vocab.values(vocab.DIRECTION):
                    err(f"{rw}/records/{i}/direction", "must be read, write or trim")
                    continue
                for key in NUMERIC_KEYS:
                    value = rec.get(key)
                    if value is not None and _bad_number(value):
                        err(
                            f"{rw}/records/{i}/{key}",
                            "must be null or a finite number >= 0",
                        )
    return errors


def check_tag(key: str, value) -> str | None:
    """Why a tag is not acceptable, or None."""
    if key not in vocab.TAG_VOCABULARIES:
        known = ", ".join(sorted(vocab.TAG_VOCABULARIES))
        return f"unknown tag {key!r}; known tags: {known}"
    if not isinstance(value, str) or not value or len(value) > 200:
        return "must be a non-empty string of at most 200 characters"
    allowed = vocab.TAG_VOCABULARIES[key]
    if allowed is not None and value not in vocab.values(allowed):
        return f"{value!r} is not one of {', '.join(vocab.values(allowed))}"
    return None


def dump(doc: dict) -> str:
    """Serialize a bundle; refuses NaN and Infinity, which JSON cannot carry."""
    return json.dumps(doc, indent=1, allow_nan=False, sort_keys=False)
