"""Reference data: the published measurements benchdb was started from.

Five documents (the project's seed articles) measured what benchdb exists to
compare: cache modes, storage layouts, native against virtual.  Each becomes
one or more runs with ``source=published`` and a citation.  Values are as
published: printed tool output goes through the agent's parsers as raw
output (seed 001's dd lines, seed 003's fio lines); figures the text only
states in words ("about 190 MB/s", "up to 950 IOPS") are single records
marked ``approximate``.  Tests that are not the agent's (bonnie++, an archive
time) are marked not comparable with the standard suite.

``load()`` is idempotent: every bundle has a fixed UUID (uuid5 of the seed and
the run), and a run that exists is left as it is.
"""

from __future__ import annotations

import uuid

from django.db import transaction

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run

from . import seed000, seed001, seed002, seed003, seed004

NAMESPACE = uuid.UUID("5d7e2a8c-3b1f-4e6a-9c0d-8f2b1a4c6e90")
MODULES = (seed000, seed001, seed002, seed003, seed004)


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


def all_bundles() -> list:
    out = []
    for module in MODULES:
        out.extend(module.bundles())
    return out


def load() -> tuple[int, int]:
    """Store every reference run that is not stored yet: (created, present)."""
    created = present = 0
    for doc in all_bundles():
        with transaction.atomic():
            if Run.objects.filter(uuid=doc["bundle_id"]).exists():
                present += 1
                continue
            store_bundle(doc)
            created += 1
    return created, present
