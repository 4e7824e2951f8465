"""An agent run and a published run compare on the tests they really share
(the same workload by its parameters: seed 001's ``dd bs=1M
conv=fdatasync`` is the agent's ``dd-write-1m-fdatasync``); a comparison
with nothing in common says so and offers nothing to save."""

from __future__ import annotations

import gzip
import json
import uuid

import pytest
from django.core.management import call_command

from benchdb.results import compare
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.web.test_owner_pages import BUNDLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_and_seeds():
    call_command("load_reference")
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = json.load(handle)
    doc["bundle_id"] = str(uuid.uuid4())
    return store_bundle(doc)


def seed_run(test_id: str) -> Run:
    return Run.objects.filter(source="published", results__test_id=test_id).first()


def test_an_agent_run_and_a_published_one_share_their_dd_test(client, agent_and_seeds):
    agent = agent_and_seeds
    seed = seed_run("dd-write-1g-zero-fdatasync")
    data = compare.build_comparison([agent, seed])
    assert [t["test_id"] for t in data["tests"]] == ["dd-write-1m-fdatasync"]
    [weaker] = data["weaker"]
    assert "published figures" in weaker["reasons"][0]
    page = client.get(f"/compare/?runs={agent.pk},{seed.pk}").content.decode()
    assert "nothing-shared" not in page
    assert 'id="save-comparison"' in page and 'id="copy-markdown"' in page


def test_nothing_in_common_says_so_and_offers_nothing_to_save(client, agent_and_seeds):
    agent = agent_and_seeds
    seed = seed_run("fio-randread-4k-q16t8")
    page = client.get(f"/compare/?runs={agent.pk},{seed.pk}").content.decode()
    assert 'id="nothing-shared"' in page
    assert "share no test" in page
    assert 'id="save-comparison"' not in page
    assert 'id="copy-markdown"' not in page
