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

from django.db import transaction

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run

from . import seed000, seed001, seed002, seed003, seed004
from .bundles import NAMESPACE, bundle_id, figure, published_bundle  # noqa: F401

MODULES = (seed000, seed001, seed002, seed003, seed004)


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
