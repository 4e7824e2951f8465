"""The run page says where the run stands among comparable runs: per main
test its percentile and how many other runs it is ranked among (the API's
``/similar/`` answer, one definition), a link to compare it with the nearest
ones, and the agent's command with the run's profile."""

from __future__ import annotations

import gzip
import json
import re
import uuid

import pytest

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Result
from tests.web.test_owner_pages import BUNDLES

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q32t1"


def run_of(*test_ids: str, title: str = "", owner=None):
    """A public agent run of the sample bundle's ``test_ids``."""
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = json.load(handle)
    doc["bundle_id"] = str(uuid.uuid4())
    doc["tests"] = [t for t in doc["tests"] if t["test_id"] in test_ids]
    run = store_bundle(doc, owner=owner)
    if title:
        run.title = title
        run.save()
    return run


def dd(html: str, test_id: str) -> str:
    m = re.search(rf'<dd data-rank-test="{test_id}"[^>]*>(.*?)</dd>', html, re.S)
    assert m, html[:2000]
    return m.group(0)


def test_it_ranks_the_run_among_the_others_as_the_api_does(client):
    runs = [run_of(READ, title=f"r{i}") for i in range(4)]
    for run, iops in zip(runs, (1000.0, 2000.0, 3000.0, 4000.0), strict=True):
        Result.objects.filter(run=run, test_id=READ).update(iops_mean=iops)
    me = runs[2]
    page = client.get(me.get_absolute_url()).content.decode()
    api = client.get(
        f"/api/v1/runs/{me.pk}/similar/", {"test_id": READ, "metric": "iops"}
    ).json()
    assert api["ranked_among"] == 3
    cell = dd(page, READ)
    assert 'data-ranked-among="3"' in cell
    assert f'data-percentile="{api["percentile"]}"' in cell or (
        f"percentile {round(api['percentile'])}" in cell
    )
    assert "3 other runs" in cell
    # The nearest: 2000 and 4000 (tie, by id), then 1000.
    nearest = [runs[1].pk, runs[3].pk, runs[0].pk]
    href = f"?runs={me.pk},{','.join(map(str, nearest))}&amp;ref={me.pk}"
    assert href in cell
    # The command that measures another machine the same way.
    assert "benchdb-agent.pyz run" in page


def test_a_run_alone_says_no_other_run(client):
    run = run_of(READ)
    cell = dd(client.get(run.get_absolute_url()).content.decode(), READ)
    assert 'data-ranked-among="0"' in cell
    assert "no other comparable run yet" in cell
    assert "nearest" not in cell
