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


def compared(client, cell: str) -> str:
    """Where the cell's "compare with the nearest" link leads: the run page
    links to ``/runs/N/nearest/?test=...``, which finds the nearest runs
    when asked and redirects to their comparison (its query string)."""
    href = re.search(r'<a class="nearest" rel="nofollow" href="([^"]+)"', cell)
    assert href, cell
    answer = client.get(href.group(1).replace("&amp;", "&"))
    assert answer.status_code == 302, answer.status_code
    assert answer["Location"].startswith("/compare/?")
    return answer["Location"][len("/compare/") :]


def page_and_api(client, run: Run) -> tuple[str, dict]:
    """The run page's rank of ``READ`` (its ``dd``) and the API's answer."""
    page = client.get(run.get_absolute_url()).content.decode()
    api = client.get(
        f"/api/v1/runs/{run.pk}/similar/", {"test_id": READ, "metric": "iops"}
    ).json()
    return dd(page, READ), api


def test_it_ranks_the_run_among_the_others_as_the_api_does(client):
    runs = [run_of(READ, title=f"r{i}") for i in range(4)]
    for run, iops in zip(runs, (1000.0, 2000.0, 3000.0, 4000.0), strict=True):
        Result.objects.filter(run=run, test_id=READ).update(iops_mean=iops)
    me = runs[2]
    cell, api = page_and_api(client, me)
    assert api["ranked_among"] == 3
    assert 'data-ranked-among="3"' in cell
    assert f'data-percentile="{api["percentile"]}"' in cell or (
        f"percentile {round(api['percentile'])}" in cell
    )
    assert "3 other runs" in cell
    # The nearest: 2000 and 4000 (tie, by id), then 1000.
    nearest = [runs[1].pk, runs[3].pk, runs[0].pk]
    assert compared(client, cell) == (
        f"?runs={me.pk},{','.join(map(str, nearest))}&ref={me.pk}"
    )
    assert "compare with the 3 nearest" in cell
    # The command that measures another machine the same way.
    assert "benchdb-agent.pyz run" in client.get(me.get_absolute_url()).content.decode()


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
        answer = similar.similar_standing(me, READ, "iops")
        others = sorted(
            (abs(1000.0 * i - 3000.0), r.pk)
            for i, r in enumerate(runs)
            if r.pk != me.pk and Run.objects.filter(pk=r.pk).exists()
        )
        return answer, [pk for _gap, pk in others[: standing.NEAREST]]

    answer, nearest = expected()
    assert standing.nearest_runs(me, answer) == nearest
    # The window: the 3rd nearest of the others (the 4th of the points,
    # which hold the run) is 2000 away.
    low, high = standing._window(3000.0, answer["points"], standing.NEAREST + 1)
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


# Populations past similar.RANK_POINTS: the page ranks from the stored points.


def clones(run: Run, figures) -> list[Run]:
    """Runs like ``run`` (the same hardware and facets) with its ``READ``
    result of each IOPS figure in ``figures``: a population in two bulk
    writes, where ``store_bundle`` would take seconds per hundred."""
    template = Result.objects.get(run=run, test_id=READ)
    made = []
    for _figure in figures:
        copy = Run.objects.get(pk=run.pk)
        copy.pk = None
        copy.uuid = uuid.uuid4()
        made.append(copy)
    made = Run.objects.bulk_create(made)
    results = []
    for copy, figure in zip(made, figures, strict=True):
        res = Result.objects.get(pk=template.pk)
        res.pk = None
        res.run = copy
        res.iops_mean = figure
        results.append(res)
    Result.objects.bulk_create(results)
    return made


def exact_nearest(me: Run, runs: list[Run], k: int = 3) -> list[int]:
    """The ``k`` runs nearest to ``me`` by the READ figure, from every
    figure (ties by id)."""
    figure = dict(
        Result.objects.filter(test_id=READ, run__in=[me, *runs]).values_list(
            "run_id", "iops_mean"
        )
    )
    others = sorted((abs(figure[r.pk] - figure[me.pk]), r.pk) for r in runs)
    return [pk for _gap, pk in others[:k]]


def test_a_large_population_is_ranked_to_half_a_percent_of_its_count(client):
    """Past ``RANK_POINTS`` runs the page says "about", at half a percent,
    of how many runs, within half a percent (and the run's own share of
    the count) of the API's exact rank; the nearest are still exact."""
    from benchdb.results import similar

    me = run_of(READ, title="me")
    Result.objects.filter(run=me, test_id=READ).update(iops_mean=2930.0)
    runs = clones(me, [10.0 * i for i in range(1, 1001)])
    cell, api = page_and_api(client, me)
    assert api["ranked_among"] == 1000
    assert 'data-ranked-among="1000"' in cell and "1,000 other runs" in cell
    assert f'data-resolution="{similar.POINTS_RESOLUTION}"' in cell
    shown = float(re.search(r'data-percentile="([^"]*)"', cell).group(1))
    assert shown * 2 == round(shown * 2)  # half a percent, never finer
    assert abs(shown - api["percentile"]) <= 0.5 + 100 / 1000
    assert "better than about " in cell and "0.5% resolution" in cell
    nearest = exact_nearest(me, runs)
    assert compared(client, cell).startswith(
        f"?runs={me.pk},{','.join(map(str, nearest))}&"
    )


def test_the_nearest_from_the_points_are_those_of_every_figure():
    """Whatever the run's figure (below, among, between and above the
    others, tied ones), ``nearest_runs`` reads a window of the key's index
    from the stored points and gives the k nearest that every figure gives,
    with the window alone (no second query over the whole key)."""
    import random

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from benchdb.results import similar, standing

    rng = random.Random(35)
    me = run_of(READ, title="me")
    figures = [
        float(rng.choice([rng.randint(1, 50) * 100, rng.randint(1, 5000)]))
        for _ in range(700)
    ]
    runs = clones(me, figures)
    for value in (0.5, 100.0, 2500.0, 2500.5, 4999.0, 5000.0, 9999.0):
        Result.objects.filter(run=me, test_id=READ).update(iops_mean=value)
        answer = similar.similar_standing(me, READ, "iops")
        assert answer["count"] == 701 and len(answer["points"]) == similar.RANK_POINTS
        with CaptureQueriesContext(connection) as queries:
            found = standing.nearest_runs(me, answer)
        assert found == exact_nearest(me, runs), value
        assert len(queries) == 1 and "BETWEEN" in queries[0]["sql"], value
    # Its SQL compiled once (``standing.NEAREST_QUERY``), not given up on.
    assert standing.NEAREST_QUERY._sql and all(standing.NEAREST_QUERY._sql.values())


def test_the_windows_of_the_points_hold_k_figures():
    """``_window`` over ``quantile_points`` and their positions: the figures
    inside it are at least k, for populations past ``RANK_POINTS`` with
    ties, values anywhere."""
    import random

    from benchdb.results import similar, standing

    rng = random.Random(7)
    for _ in range(200):
        count = rng.randint(similar.RANK_POINTS + 1, 3000)
        spread = rng.choice([5, 100, 10**6])
        figures = sorted(float(rng.randint(0, spread)) for _ in range(count))
        points = similar.quantile_points(figures)
        value = rng.choice([*figures, rng.uniform(-10, spread + 10)])
        k = rng.randint(1, 10)
        low, high = standing._window(
            value,
            points,
            k,
            lambda j, c=count, p=points: similar.point_position(j, c, len(p)),
        )
        assert sum(low <= f <= high for f in figures) >= k


def test_a_rank_from_points_is_within_half_a_percent_of_the_exact_one():
    """``points_rank`` against ``stats.percentile_rank`` over every figure
    but the run's: within half a percent and the run's own share, at the
    extremes, among ties, for members and runs outside the population; and
    exact (the same number) while the points are every figure."""
    import random

    from benchdb.results import similar, stats

    rng = random.Random(3)
    for _ in range(300):
        count = rng.choice([1, 2, 3, rng.randint(4, 201), rng.randint(202, 4000)])
        spread = rng.choice([3, 1000, 10**6])
        figures = sorted(float(rng.randint(0, spread)) for _ in range(count))
        member = rng.random() < 0.7
        value = (
            rng.choice([figures[0], figures[-1], rng.choice(figures)])
            if member
            else float(rng.randint(-5, spread + 5))
        )
        others = list(figures)
        if member:
            others.remove(value)
        exact = stats.percentile_rank(value, others)
        rank, among, resolution = similar.points_rank(
            value, member, count, similar.quantile_points(figures)
        )
        assert among == len(others)
        if count <= similar.RANK_POINTS:
            assert resolution == 0 and rank == exact
        else:
            assert resolution == similar.POINTS_RESOLUTION
            assert rank * 2 == round(rank * 2)
            assert abs(rank - exact) <= 0.5 + 100 / count, (count, value, member)


@pytest.mark.parametrize("where", ["lowest", "highest"])
def test_the_page_ranks_a_run_at_the_ends(client, where):
    """The lowest run of 500 is better than 0% of the others, the highest
    than 100%, as the API says, "about" from the points; and the nearest
    are the ones next to it."""
    me = run_of(READ, title="me")
    runs = clones(me, [float(i) for i in range(100, 599)])
    figure = 1.0 if where == "lowest" else 10_000.0
    Result.objects.filter(run=me, test_id=READ).update(iops_mean=figure)
    cell, api = page_and_api(client, me)
    expected = 0 if where == "lowest" else 100
    assert api["percentile"] == expected
    assert f'data-percentile="{float(expected)}"' in cell
    assert f"better than about {expected}%" in cell
    assert "499 other runs" in cell
    assert f",{','.join(map(str, exact_nearest(me, runs)))}&" in compared(client, cell)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_the_page_ranks_a_run_among_few(client, size):
    """A population of one (the run alone), of two, and of fewer than k + 1
    (two others): the exact rank, every other run as the nearest."""
    me = run_of(READ, title="me")
    Result.objects.filter(run=me, test_id=READ).update(iops_mean=500.0)
    runs = clones(me, [1000.0 * i for i in range(1, size)])
    cell = dd(client.get(me.get_absolute_url()).content.decode(), READ)
    assert f'data-ranked-among="{size - 1}"' in cell
    if size == 1:
        assert "no other comparable run yet" in cell and "nearest" not in cell
        return
    assert 'data-resolution="0.0"' in cell and "about" not in cell
    assert "better than 0%" in cell and "(percentile 0" in cell
    assert f">{size - 1} other run{'s' if size > 2 else ''}</span>" in cell
    assert f"compare with the {size - 1} nearest" in cell
    assert compared(client, cell).startswith(
        f"?runs={me.pk},{','.join(str(r.pk) for r in runs)}&"
    )


def test_the_nearest_are_found_when_asked_and_only_for_who_may_see_the_run(client):
    """The page's link (``views.run_nearest``) finds the nearest runs when
    followed, not with every page: the page asks no query of the key's
    figures; the link answers 404 for a test the run lacks or one the page
    does not rank, and once the others are gone; 410 once the moderators
    hid the run; 404 for a private run of someone else."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    runs = [run_of(READ, title=f"r{i}") for i in range(3)]
    me = runs[0]
    url = f"/runs/{me.pk}/nearest/"
    with CaptureQueriesContext(connection) as queries:
        page = client.get(me.get_absolute_url()).content.decode()
    assert not [q for q in queries if "ORDER BY" in q["sql"] and "UNION" in q["sql"]]
    assert f'href="{url}?test={READ}"' in dd(page, READ)
    assert client.get(url, {"test": READ}).status_code == 302
    assert client.get(url, {"test": "fio-seq-write-1m-q8t1"}).status_code == 404
    assert client.get(url, {"test": "<b>\x00"}).status_code == 404
    assert client.get(url).status_code == 404
    Run.objects.filter(pk__in=[r.pk for r in runs[1:]]).delete()
    gone = client.get(url, {"test": READ})
    assert gone.status_code == 404
    Run.objects.filter(pk=me.pk).update(hidden=True, hidden_reason="spam")
    hidden = client.get(url, {"test": READ})
    assert hidden.status_code == 410 and "spam" in hidden.content.decode()
    Run.objects.filter(pk=me.pk).update(hidden=False, visibility="private")
    assert client.get(url, {"test": READ}).status_code == 404
