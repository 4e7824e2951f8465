"""Bundles: one JSON document per run, the contract between agent and server.

The rules are ``contract.check`` (the server checks uploads with the same
function); ``validate`` is it as (pointer, message) pairs, so the agent
refuses to write or send a bundle the server would refuse.
``bundle.schema.json`` beside this module is generated from the contract.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import uuid
from pathlib import Path

from . import __version__, contract, parsers, suite

SCHEMA_VERSION = contract.SCHEMA_VERSION
# The JSON Schema, generated from the contract (python -m benchdb_agent.contract).
SCHEMA_PATH = Path(__file__).resolve().parent / "bundle.schema.json"
PAIR_RE = contract.ID_RE
TEST_ID_RE = contract.TEST_ID_RE
# The raw formats are the parsers' formats; the metrics are the records'.
RAW_FORMATS = parsers.FORMATS
NUMERIC_KEYS = parsers.METRIC_KEYS
TAG_SOURCES = contract.TAG_SOURCES


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


def validate(doc) -> list:
    """Every way ``doc`` breaks the bundle contract, as (JSON pointer, message).

    An empty list means the bundle is valid: the server, which checks with the
    same ``contract.check``, will accept it.
    """
    return [(e["pointer"], e["message"]) for e in contract.check(doc).errors]


def check_tag(key: str, value) -> str | None:
    """Why a tag is not acceptable, or None (``contract.check_tag``)."""
    return contract.check_tag(key, value)


def dump(doc: dict) -> str:
    """Serialize a bundle; refuses NaN and Infinity, which JSON cannot carry."""
    return json.dumps(doc, indent=1, allow_nan=False, sort_keys=False)
