"""Similar systems: where a run's figure stands among comparable runs.

The population is every visible, not suspect run with a result of the same
comparability key on hardware of the same disk type (optionally the same
values of some facets, ``SIMILAR_MATCH``), the run itself left out: a run is
ranked among the others.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from django.db.models import OuterRef, QuerySet, Subquery

from benchdb.results import answer_cache, answers, stats, vocab
from benchdb.results.aggregates import comparable_runs, distribution
from benchdb.results.metrics import MAIN_METRICS, metric_column
from benchdb.results.models import Result, Run
from benchdb.results.vocab import Visibility

# How many of a population's figures its stored points keep (``similar_points``):
# every half percent, 0, 0.5 ... 100, so a run page's rank from them is good
# to half a percent and its read is a few KB whatever the population's size.
RANK_POINTS = 201
# The resolution of a rank read from the points, in percent.
POINTS_RESOLUTION = 100 / (RANK_POINTS - 1)

# Facets a similar-systems population may additionally be narrowed to.
SIMILAR_MATCH = vocab.LAYOUT
# What says whether a run is one of a population (``comparable_runs``: listed,
# not suspect): a reader of a run to rank reads these with it.
MEMBER_FIELDS = ("visibility", "hidden", "suspect")


def _similar_results(
    comparability_key: str,
    column: str,
    disk_type: str | None,
    match: Sequence[Sequence[str]],
    runs: QuerySet,
) -> QuerySet:
    """Results of one comparability key with a figure, among ``runs``, on
    hardware of ``disk_type`` (None: runs without a hardware description),
    with the run facets of ``match`` ([facet, value] pairs)."""
    qs = Result.objects.filter(
        comparability_key=comparability_key,
        comparable=True,
        run__in=runs,
        **{f"{column}__isnull": False},
    )
    if disk_type is not None:
        qs = qs.filter(run__hardware__disk_type=disk_type)
    else:
        qs = qs.filter(run__hardware__isnull=True)
    for facet, value in match:
        qs = qs.filter(**{f"run__{facet}": value})
    return qs


def similar_result(test_id: str, metric: str) -> dict:
    """Annotations of a run query: its result of ``test_id``, comparability
    key, ``metric`` figure and whether it is comparable (``similar_systems``'
    ``found``), read with the run instead of in a query of their own."""
    mine = Result.objects.filter(run=OuterRef("pk"), test_id=test_id).order_by("pk")
    return {
        "similar_key": Subquery(mine.values("comparability_key")[:1]),
        "similar_value": Subquery(mine.values(metric_column(metric))[:1]),
        "similar_comparable": Subquery(mine.values("comparable")[:1]),
    }


def _is_member(run: Run, comparable: bool) -> bool:
    """Whether the run's result is one of its population's (``comparable_runs``
    and ``_similar_results``: listed, not suspect, a comparable result)."""
    listed = run.visibility == Visibility.PUBLIC and not run.hidden
    return bool(comparable) and listed and not run.suspect


def _population(
    comparability_key: str,
    metric: str,
    disk_type: str | None,
    match: Sequence[Sequence[str]],
) -> tuple[QuerySet, str, list[float]]:
    """The population a run is ranked in (visible, not suspect runs): its
    results, their figures' column and every figure in order."""
    column = metric_column(metric)
    qs = _similar_results(
        comparability_key, column, disk_type, match, comparable_runs()
    )
    return qs, column, list(qs.order_by(column).values_list(column, flat=True))


def similar_population(
    comparability_key: str,
    metric: str,
    disk_type: str | None,
    match: Sequence[Sequence[str]],
) -> dict:
    """The population ``similar_systems`` ranks a run in (visible, not
    suspect runs): every figure in order and their distribution.  It does
    not depend on the run, so it is stored once for every run that shares it
    (``answer_cache``)."""
    qs, column, figures = _population(comparability_key, metric, disk_type, match)
    return {"population": figures, "distribution": distribution(qs, column)}


def point_position(j: int, count: int, kept: int) -> int:
    """Where the ``j``-th of ``kept`` points stands in the ordered population
    of ``count`` figures: the order statistic at ``j / (kept - 1)`` of the
    way, rounded half up (whole numbers only, so no float decides it)."""
    if kept < 2:
        return 0
    return (2 * j * (count - 1) + (kept - 1)) // (2 * (kept - 1))


def quantile_points(figures: Sequence[float]) -> list[float]:
    """The stored points of an ordered population: every figure when there
    are ``RANK_POINTS`` or fewer (a rank read from them is exact), else the
    ``RANK_POINTS`` order statistics at every half percent, the lowest and
    the highest among them."""
    count = len(figures)
    if count <= RANK_POINTS:
        return list(figures)
    return [figures[point_position(j, count, RANK_POINTS)] for j in range(RANK_POINTS)]


def similar_points(
    comparability_key: str,
    metric: str,
    disk_type: str | None,
    match: Sequence[Sequence[str]],
) -> dict:
    """``similar_population`` as a run page reads it: how many figures
    (``count``) and its ``quantile_points``.  About 4 KB at any size, where
    the population's every figure is hundreds of KB at millions of results
    (the API's ``/similar/`` still serves those)."""
    _qs, _column, figures = _population(comparability_key, metric, disk_type, match)
    return {"count": len(figures), "points": quantile_points(figures)}


def _others(value: float | None, member: bool, figures: list) -> list:
    """A population's figures without the run's own (``value``, when the
    run is one of the population's and the stored figures hold it: a stored
    population older than the run does not)."""
    if value is not None and member and value in figures:
        figures = list(figures)
        figures.remove(value)
    return figures


def points_rank(
    value: float | None, member: bool, count: int, points: list
) -> tuple[float | None, int, float]:
    """(percentile, ranked among, resolution) of a run's ``value`` from a
    population's stored points (``similar_points``; ``member``: whether the
    run is one of the population's).

    When the points are every figure (``count`` of them, ``RANK_POINTS`` or
    fewer) it is ``similar_systems``' rank, exact (resolution 0).  Else the
    points bound how many figures lie below and at the value to one step of
    points, half a percent: the percentile is the middle of what they allow,
    rounded to that resolution, and the run itself is counted out of the
    count (``ranked_among``), not out of the points."""
    if len(points) == count:
        others = _others(value, member, points)
        rank = stats.percentile_rank(value, others) if value is not None else None
        return rank, len(others), 0.0
    among = count - 1 if member else count
    if value is None:
        return None, among, POINTS_RESOLUTION
    below = bisect.bisect_left(points, value)
    at_or_below = bisect.bisect_right(points, value)
    # Between the points: below + 1 / 2 steps; at them: the middle of the
    # tied ones, as ``percentile_rank`` counts ties half.
    steps = (below + at_or_below) / 2 - 0.5
    rank = min(max(steps * POINTS_RESOLUTION, 0.0), 100.0)
    return (
        round(rank / POINTS_RESOLUTION) * POINTS_RESOLUTION,
        among,
        (POINTS_RESOLUTION),
    )


def similar_systems(
    run: Run,
    test_id: str,
    metric: str = "iops",
    match: Sequence[str] = (),
    found: tuple | None = None,
) -> dict:
    """Where a run's result stands among the other comparable runs on the
    same disk type.

    The comparable runs are every listed, not suspect run with a result of
    the same comparability key, on hardware of the same disk type, optionally
    also with the same values of the facets in ``match`` (see
    ``SIMILAR_MATCH``): ``similar_population``'s stored answer, and
    ``freshness`` says as of when.  ``distribution`` describes them all.
    The run is ranked among the others: ``population`` is their figures
    (the run's own left out when it is one of them), ``ranked_among`` their
    count, ``percentile`` the share of them at or below the run's value
    (ties count half); ``better_than_percent`` turns it round for latencies,
    where lower is better.  ``found``: the run's (comparability key, figure,
    comparable) of ``test_id`` and ``metric`` when the caller read them with
    the run (``similar_result``; a key of None: no such result), else they
    are read here; the run's ``MEMBER_FIELDS`` are read from it.
    """
    asked = _asked(run, test_id, metric, match, found)
    found, freshness = answers.similar_population.with_freshness(*asked["args"])
    value = asked["value"]
    population = _others(value, asked["member"], found["population"])
    rank = stats.percentile_rank(value, population) if value is not None else None
    return {
        **asked["answer"],
        **_turned(rank, metric),
        "distribution": found["distribution"],
        "population": population,
        "ranked_among": len(population),
        "freshness": answer_cache.freshness_of(freshness),
    }


def similar_standing(
    run: Run,
    test_id: str,
    metric: str = "iops",
    found: tuple | None = None,
) -> dict:
    """``similar_systems`` as a run page says it, from the population's
    stored points (``similar_points``), not its every figure: the same
    answer but for ``population`` and ``distribution``, a ``resolution``
    (0: exact, the points are every figure; else the percent step the
    ``percentile`` is rounded to, ``points_rank``), and the points and
    ``count`` themselves (``standing.nearest_runs`` reads its window from
    them)."""
    asked = _asked(run, test_id, metric, (), found)
    stored, freshness = answers.similar_points.with_freshness(*asked["args"])
    rank, among, resolution = points_rank(
        asked["value"], asked["member"], stored["count"], stored["points"]
    )
    return {
        **asked["answer"],
        **_turned(rank, metric),
        "ranked_among": among,
        "resolution": resolution,
        "count": stored["count"],
        "points": stored["points"],
        "freshness": answer_cache.freshness_of(freshness),
    }


def _turned(rank: float | None, metric: str) -> dict:
    """The rank and the rank turned round where lower is better."""
    higher = MAIN_METRICS[metric]["higher_is_better"]
    return {
        "percentile": rank,
        "better_than_percent": (
            None if rank is None else (rank if higher else 100.0 - rank)
        ),
    }


def _asked(
    run: Run, test_id: str, metric: str, match: Sequence[str], found: tuple | None
) -> dict:
    """What a rank of ``run``'s ``test_id`` by ``metric`` asks (see
    ``similar_systems``): ``args`` of its population's stored answers,
    the run's ``value``, whether it is a ``member`` of the population, and
    the ``answer``'s fields that say what was ranked."""
    column = metric_column(metric)
    for facet in match:
        if facet not in SIMILAR_MATCH:
            allowed = ", ".join(SIMILAR_MATCH)
            raise ValueError(f"cannot match on {facet!r}; one of {allowed}")
    # The key and the figure only (not the statistics JSON); one row at
    # most (run, test id), in id order rather than Result's (which joined
    # the run table).
    if found is None:
        found = (
            Result.objects.filter(run=run, test_id=test_id)
            .order_by("pk")
            .values_list("comparability_key", column, "comparable")
            .first()
        )
    elif found[0] is None:
        found = None
    if found is None:
        raise LookupError(f"run {run.pk} has no test {test_id!r}")
    comparability_key, value, comparable = found
    disk_type = run.hardware.disk_type if run.hardware_id else "unknown"
    pairs = [[facet, getattr(run, facet)] for facet in match]
    return {
        "args": (
            comparability_key,
            metric,
            disk_type if run.hardware_id else None,
            pairs,
        ),
        "value": value,
        "member": _is_member(run, comparable),
        "answer": {
            "run": run.pk,
            "test_id": test_id,
            "comparability_key": comparability_key,
            "metric": metric,
            "unit": MAIN_METRICS[metric]["unit"],
            "higher_is_better": MAIN_METRICS[metric]["higher_is_better"],
            "disk_type": disk_type,
            "match": {facet: getattr(run, facet) for facet in match},
            "value": value,
        },
    }
