"""The shape of a reference bundle: published figures as the agent's bundle
(the seeds build theirs with these; ``reference`` loads them)."""

from __future__ import annotations

import uuid

NAMESPACE = uuid.UUID("5d7e2a8c-3b1f-4e6a-9c0d-8f2b1a4c6e90")


def bundle_id(seed: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{seed}/{key}"))


def published_bundle(seed: str, key: str, **fields) -> dict:
    """A bundle of published figures (no agent ran; nothing to detect)."""
    doc = {
        "schema_version": 1,
        "bundle_id": bundle_id(seed, key),
        "created": fields.pop("created", None),
        "agent": {"name": "reference-data", "version": ""},
        "suite": {"id": f"published-{seed}", "version": "1", "profile": "custom"},
        "role": fields.pop("role", "guest"),
        "pair_id": fields.pop("pair_id", None),
        "source": "published",
        "environment": fields.pop("environment", {}),
        "tags": fields.pop("tags", {}),
        "warnings": [],
        "tests": fields.pop("tests", []),
    }
    doc.update(fields)
    return doc


def figure(
    test_id: str,
    title: str,
    direction: str,
    seed: str,
    approximate=True,
    comparable=True,
    group="",
    options=None,
    **metrics,
) -> dict:
    """One published figure as a test with a single repeat."""
    record = {"tool": "other", "job": None, "direction": direction, "options": {}}
    record.update(metrics)
    return {
        "test_id": test_id,
        "tool": "other",
        "direction": direction,
        "title": title,
        "group": group,
        "options": options or {},
        "comparable": comparable,
        "approximate": approximate,
        "comparability_key": f"published-{seed}|{test_id}",
        "repeats": [{"index": 0, "records": [record]}],
    }
