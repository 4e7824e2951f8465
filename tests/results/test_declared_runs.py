"""Imported runs (configuration declared, not verified) enter population
answers only when a filter asks for their source; never silently."""

from __future__ import annotations

import copy
import gzip
import json
import uuid
from pathlib import Path

import pytest

from benchdb.results import population
from benchdb.results.ingest import store_bundle
from benchdb_agent import imports

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def test_declared_runs_are_left_out_unless_asked_for():
    with gzip.open(SAMPLES / "bundles" / "full-none.json.gz", "rt") as handle:
        doc = copy.deepcopy(json.load(handle))
    doc["bundle_id"] = str(uuid.uuid4())
    measured = store_bundle(doc)
    name = "crystaldiskmark/cdm-8.0.1-wd-blue.txt"
    text, parsed = imports.read_output((SAMPLES / name).read_bytes(), name)
    imported = store_bundle(
        imports.build([(name, text, parsed)], tags={"cache_mode": "none"})
    )

    def ids(params):
        return set(population.filter_runs(params).values_list("pk", flat=True))

    assert ids({}) == {measured.pk}
    assert ids({"cache_mode": "none"}) == {measured.pk}
    assert ids({"source": "imported"}) == {imported.pk}
    assert ids({"source": ["measured", "imported"]}) == {measured.pk, imported.pk}
    assert imported.pk not in set(
        population.population_runs().values_list("pk", flat=True)
    )
    assert imported.pk in set(
        population.population_runs(include_declared=True).values_list("pk", flat=True)
    )


def test_the_reports_say_imported_runs_are_not_in_their_answers(client):
    for url in ("/reports/cache-modes/", "/reports/overhead/"):
        page = client.get(url).content.decode()
        assert "declared, not verified) are not in these answers" in page
        assert "/runs/?source=imported" in page
