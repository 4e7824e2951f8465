"""Where a run stands among comparable runs: the run page's "among similar
systems" card.

One definition of the rank, ``similar.similar_systems`` (the API's
``/api/v1/runs/N/similar/``): the run ranked among the *other* listed, not
suspect runs with a result of the same comparability key on the same disk
type.  The page reads it from the population's stored points
(``similar.similar_standing``: exact up to ``similar.RANK_POINTS`` runs,
to half a percent beyond), so its cost does not grow with the population.
This module only adds what a page needs beside it: which of those runs are
nearest to the run's figure, to compare it with them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

from django.db.models import QuerySet

from benchdb.results.aggregates import comparable_runs
from benchdb.results.compiled import Compiled
from benchdb.results.metrics import metric_column
from benchdb.results.models import Run
from benchdb.results.similar import (
    _similar_results,
    point_position,
    similar_standing,
)

# How many of the nearest comparable runs the page offers to compare with.
NEAREST = 3


def _nearest(shape: tuple, **values) -> QuerySet:
    """The query of ``nearest_runs`` (``NEAREST_QUERY``): the run ids and
    figures of a population's ``k`` results nearest above ``value`` (or at
    it) and its ``k`` nearest below, within [``low``, ``high``] if the shape
    says so, the ``run`` itself left out: the ``k`` nearest are among them.
    Each side walks the key's index outward from ``value`` and stops at its
    ``k``-th run (a few index entries), where one sort of every figure in the
    window by its gap read them all (hundreds at 1M results).  ``shape``:
    (metric column, with a disk type, facets matched, k, windowed);
    ``values``: ``key``, ``disk_type``, ``run``, ``value``, ``low``, ``high``
    and ``match_<i>`` (the facets' values)."""
    column, with_disk_type, facets, k, windowed = shape
    match = [(facet, values[f"match_{i}"]) for i, facet in enumerate(facets)]
    qs = _similar_results(
        values["key"],
        column,
        values["disk_type"] if with_disk_type else None,
        match,
        comparable_runs(),
    ).exclude(run_id=values["run"])
    if windowed:
        qs = qs.filter(**{f"{column}__range": (values["low"], values["high"])})
    above = (
        qs.filter(**{f"{column}__gte": values["value"]})
        .order_by(column, "run_id")
        .values_list("run_id", column)[:k]
    )
    below = (
        qs.filter(**{f"{column}__lt": values["value"]})
        .order_by(f"-{column}", "run_id")
        .values_list("run_id", column)[:k]
    )
    return above.union(below, all=True)


def _nearest_of(rows: list[tuple], value: float, k: int) -> list[int]:
    """The ``k`` run ids of ``rows`` (run id, figure) nearest to ``value``,
    nearest first, ties by id: the gap as PostgreSQL computes it (one IEEE
    subtraction of two doubles, the same in Python)."""
    return [pk for pk, _ in sorted(rows, key=lambda r: (abs(r[1] - value), r[0]))][:k]


# Compiled once per shape: building and compiling the query set cost Django
# more CPU than PostgreSQL takes to read the window (4 of them a page).
NEAREST_QUERY = Compiled(_nearest)


def nearest_runs(run: Run, answer: dict, k: int = NEAREST) -> list[int]:
    """The ids of the ``k`` runs of ``answer``'s population (a
    ``similar.similar_standing`` answer of ``run``) whose figure is nearest
    to the run's, nearest first (ties by id)."""
    if answer["value"] is None or not answer["ranked_among"]:
        return []
    facets = tuple(answer["match"])
    values = {
        "key": answer["comparability_key"],
        "run": run.pk,
        "value": float(answer["value"]),
        **({"disk_type": answer["disk_type"]} if run.hardware_id else {}),
        **{f"match_{i}": answer["match"][f] for i, f in enumerate(facets)},
    }
    shape = (metric_column(answer["metric"]), bool(run.hardware_id), facets, k)
    points, count = answer["points"], answer["count"]
    # The run itself may be one of the figures the points stand for: then
    # the window holds k others only if it holds k + 1 figures.
    window = _window(
        values["value"],
        points,
        k + 1,
        lambda j: point_position(j, count, len(points)),
    )
    if window is not None:
        # Only the figures as near as the window's farther point
        # (``results_result_key_iops_idx``, ``..._bw_idx``): a range of one
        # key's figures, not every result of that key sorted by its gap.
        low, high = window
        found = NEAREST_QUERY.rows((*shape, True), **values, low=low, high=high)
        if len(found) >= k:
            return _nearest_of(found, values["value"], k)
        # Fewer: runs of the stored population were removed since.
    found = NEAREST_QUERY.rows((*shape, False), **values)
    return _nearest_of(found, values["value"], k)


def _window(
    value: float, points: list, k: int, position=None
) -> tuple[float, float] | None:
    """The figures around ``value`` that hold its ``k`` nearest of a stored
    population: at least ``k`` of the runs now, unless some were removed
    since; runs added since that are nearer lie within it too.  None when
    the population has fewer than ``k``.

    ``points``: the population's figures in order, or some of them
    (``similar.quantile_points``) with ``position(j)``, where the ``j``-th
    point stands among them (its order statistic): figures between two
    points are as many as their positions say, so the window reaches out
    point by point until the points inside it stand for ``k`` figures."""
    position = position or (lambda j: j)
    if not points or position(len(points) - 1) + 1 < k:
        return None
    # In order: the k nearest are the steps outward from where ``value``
    # falls, not a sort of every figure's gap (tens of thousands per key
    # at 3M results).
    low = bisect.bisect_left(points, value) - 1
    high = low + 1
    while True:
        below = value - points[low] if low >= 0 else math.inf
        above = points[high] - value if high < len(points) else math.inf
        if below <= above:
            gap, low = below, low - 1
        else:
            gap, high = above, high + 1
        if position(high - 1) - position(low + 1) + 1 >= k:
            break
    # The gap as PostgreSQL computes it may round the other way.
    gap += (abs(value) + gap) * 1e-9
    return value - gap, value + gap


def run_standing(run: Run, tests: Iterable[tuple[str, str, str]]) -> list[dict]:
    """Per main test of ``tests`` ((test id, metric, label)) that the run
    has: its ``similar_standing`` answer (``percentile``,
    ``better_than_percent``, ``ranked_among``, ``resolution``...) with
    ``label`` and ``nearest``, how many runs its nearest are
    (``nearest_count``).  Which runs they are is found when they are asked
    for (``nearest_of_test``, the page's link), not for every page shown: four
    index walks a page were half of PostgreSQL's time on a run page that
    is not kept.  Tests the run lacks are left out."""
    # The run's results as its page read them (``reads.attach_tests``):
    # each test's key and figure without a query of their own.
    results = None
    if "results" in getattr(run, "_prefetched_objects_cache", {}):
        results = {}
        for res in sorted(run.results.all(), key=lambda r: r.pk):
            results.setdefault(res.test_id, res)
    out = []
    for test_id, metric, label in tests:
        found = None
        if results is not None:
            res = results.get(test_id)
            found = (
                (
                    res.comparability_key,
                    getattr(res, metric_column(metric)),
                    res.comparable,
                )
                if res is not None
                else (None, None, None)
            )
        try:
            answer = similar_standing(run, test_id, metric, found=found)
        except LookupError:
            continue
        out.append({**answer, "label": label, "nearest": nearest_count(answer)})
    return out


def nearest_count(answer: dict, k: int = NEAREST) -> int:
    """How many runs ``nearest_runs`` gives for ``answer``: ``k``, or every
    other run of a smaller population (as stored: a run removed since is
    still counted until the next refresh, and ``nearest_runs`` is then one
    short)."""
    if answer["value"] is None:
        return 0
    return min(k, answer["ranked_among"] or 0)


def nearest_of_test(run: Run, test_id: str, tests: Iterable[tuple[str, str, str]]):
    """The ids of the runs nearest to ``run`` in ``test_id``, one of
    ``tests`` ((test id, metric, label), as ``run_standing`` takes them):
    what the page's "compare with the nearest" link asks for.  LookupError
    if the run has no figure of that test to rank, or the test is not one
    of ``tests``."""
    for known, metric, _label in tests:
        if known == test_id:
            return nearest_runs(run, similar_standing(run, test_id, metric))
    raise LookupError(test_id)
