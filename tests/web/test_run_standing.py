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
from benchdb.results.models import Result, Run
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


def test_the_nearest_are_read_in_a_window_of_the_stored_population():
    """``nearest_runs`` asks only for the figures within the k-th nearest of
    the stored population, and gives what the whole sort gave: with runs
    added since it was stored, and with runs removed since (then the window
    holds fewer than k and the whole key is asked)."""
    from benchdb.results import similar, standing

    runs = [run_of(READ, title=f"r{i}") for i in range(6)]
    for i, run in enumerate(runs):
        Result.objects.filter(run=run, test_id=READ).update(iops_mean=1000.0 * i)
    me = runs[3]

    def expected():
        answer = similar.similar_systems(me, READ, "iops")
        others = sorted(
            (abs(1000.0 * i - 3000.0), r.pk)
            for i, r in enumerate(runs)
            if r.pk != me.pk and Run.objects.filter(pk=r.pk).exists()
        )
        return answer, [pk for _gap, pk in others[: standing.NEAREST]]

    answer, nearest = expected()
    assert standing.nearest_runs(me, answer) == nearest
    # The window: the 3rd nearest of the population is 2000 away.
    low, high = standing._window(3000.0, answer["population"], standing.NEAREST)
    assert low == pytest.approx(1000.0) and high == pytest.approx(5000.0)
    # A run added since, nearer than the stored ones: in the window.
    added = run_of(READ, title="added")
    Result.objects.filter(run=added, test_id=READ).update(iops_mean=3100.0)
    found = standing.nearest_runs(me, answer)
    assert found[0] == added.pk and len(found) == standing.NEAREST
    # Runs removed since: fewer than k in the window, so the whole key.
    Run.objects.filter(pk__in=[runs[1].pk, runs[2].pk, runs[4].pk]).delete()
    found = standing.nearest_runs(me, answer)
    assert found == [added.pk, runs[5].pk, runs[0].pk]


def test_the_window_is_that_of_the_sort_of_every_gap():
    """``_window`` walks out from the run's figure in the stored (ordered)
    population: the k-th nearest gap is the one a sort of every gap finds,
    with ties, at the ends and when the figure is one of the population."""
    import random

    from benchdb.results import standing

    rng = random.Random(35)
    for _ in range(300):
        population = sorted(
            rng.choice([rng.randint(0, 20), rng.random()])
            for _ in range(rng.randint(3, 30))
        )
        value = rng.choice([*population, rng.uniform(-5, 25)])
        k = rng.randint(1, len(population))
        gap = sorted(abs(p - value) for p in population)[k - 1]
        low, high = standing._window(value, population, k)
        assert low == pytest.approx(value - gap, abs=1e-6)
        assert high == pytest.approx(value + gap, abs=1e-6)
        assert low <= value - gap and high >= value + gap
    assert standing._window(1.0, [1.0, 2.0], 3) is None


def test_the_page_reads_no_figure_of_its_own_run_again(client):
    """The run's key and figure of each headline test come from the results
    the page read (``standing.run_standing``), not from a query each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run = run_of(READ, "fio-seq-read-1m-q8t1")
    client.get(run.get_absolute_url())
    with CaptureQueriesContext(connection) as queries:
        client.get(run.get_absolute_url())
    own = [
        q["sql"]
        for q in queries
        if '"results_result"."run_id" = ' in q["sql"]
        and '"results_result"."test_id" = ' in q["sql"]
    ]
    assert own == []
