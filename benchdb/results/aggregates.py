"""Facet aggregates: a test's figure summarised per facet value, in SQL.

count, min, quartiles, median and max of a per-run figure (a ``Result``
column, ``metrics.METRIC_COLUMNS``), over visible, not suspect runs or any
filtered set of runs, overall and per value of one facet (``GROUP_BY``).
``Percentile`` is PostgreSQL's ordered-set percentile, continuous or
discrete, for every module that aggregates in SQL.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import Count, F, FloatField, Max, Min, QuerySet
from django.db.models.aggregates import Aggregate

from benchdb.results import answer_cache, vocab
from benchdb.results.filters import FilterError, RunFilterSet
from benchdb.results.metrics import MAIN_METRICS, metric_column
from benchdb.results.models import Result, Run

# Facets an aggregate may be grouped by: name -> ORM path from Result.
GROUP_BY = {
    **{name: f"run__{path}" for name, path in vocab.COLUMN_PATHS.items()},
    "suite_version": "run__suite_version",
}


def comparable_runs():
    """Runs whose figures may enter a distribution: visible and not suspect.

    A suspect run (a cache answered, or staff flagged it) is shown with its
    reason, never silently mixed into others' statistics.
    """
    return Run.objects.visible().filter(suspect=False)


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(f) WITHIN GROUP (ORDER BY expr)``, or
    ``percentile_disc`` (a value of the column itself) when ``discrete``."""

    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fraction: float, discrete: bool = False, **extra):
        fraction = float(fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be within 0..1")
        self.function = "PERCENTILE_DISC" if discrete else "PERCENTILE_CONT"
        self.name = "PercentileDisc" if discrete else "PercentileCont"
        # A float literal rendered by us, never user text: safe in the SQL.
        super().__init__(expression, fraction=repr(fraction), **extra)


def _quartiles(column: str) -> dict:
    """count, min, quartiles, max of one column, as aggregates."""
    return {
        "count": Count(column),
        "min": Min(column),
        "q1": Percentile(column, 0.25),
        "median": Percentile(column, 0.5),
        "q3": Percentile(column, 0.75),
        "max": Max(column),
    }


def most_common_key(qs: QuerySet) -> str | None:
    """The comparability key most of ``qs``'s results share (ties by name),
    or None without results: the one set of results an answer is about when
    none is asked for."""
    top = (
        qs.values("comparability_key")
        .annotate(n=Count("id"))
        .order_by("-n", "comparability_key")
        .first()
    )
    return top["comparability_key"] if top else None


def distribution(qs: QuerySet, column: str) -> dict:
    """count, min, quartiles, max of one column over a queryset (PostgreSQL)."""
    return qs.aggregate(**_quartiles(column))


def aggregates(
    test_id: str,
    metric: str = "iops",
    group_by: str | None = None,
    runs: QuerySet | None = None,
    comparability_key: str | None = None,
) -> dict:
    """count, min, quartiles, median, max of a test's metric, per facet value.

    Computed in PostgreSQL (``percentile_cont``) over visible, not suspect
    runs (or the given, already filtered ``runs``).  Results of different comparability
    keys are never pooled: without ``comparability_key`` the most common key
    of the test id among those runs is used, and the answer names it.
    """
    column = metric_column(metric)
    if group_by is not None and group_by not in GROUP_BY:
        allowed = ", ".join(GROUP_BY)
        raise ValueError(f"cannot group by {group_by!r}; one of {allowed}")
    base_runs = runs if runs is not None else comparable_runs()
    qs = Result.objects.filter(
        test_id=test_id,
        comparable=True,
        run__in=base_runs,
        **{f"{column}__isnull": False},
    )
    if comparability_key is None:
        comparability_key = most_common_key(qs)
    qs = qs.filter(comparability_key=comparability_key)
    overall = distribution(qs, column)
    groups = []
    if group_by is not None:
        path = GROUP_BY[group_by]
        rows = (
            qs.annotate(group_value=F(path))
            .values("group_value")
            .annotate(**_quartiles(column))
            .order_by("group_value")
        )
        for row in rows:
            value = row.pop("group_value")
            groups.append({"value": value, **row})
    return {
        "test_id": test_id,
        "metric": metric,
        "unit": MAIN_METRICS[metric]["unit"],
        "comparability_key": comparability_key,
        "group_by": group_by,
        "overall": overall,
        "groups": groups,
    }


def filtered(
    params: Mapping,
    test_id: str,
    metric: str = "iops",
    group_by: str | None = None,
    comparability_key: str | None = None,
) -> dict:
    """``aggregates`` over listed runs narrowed by run filters (``params``,
    ``RunFilterSet``; FilterError when they do not validate).

    Suspect runs are left out unless ``params`` has the ``suspect`` filter.
    """
    base = Run.objects.listed()
    if "suspect" not in params:
        base = base.filter(suspect=False)
    filterset = RunFilterSet(params, queryset=base)
    if not filterset.is_valid():
        raise FilterError(filterset)
    return aggregates(
        test_id,
        metric,
        group_by,
        runs=filterset.qs,
        comparability_key=comparability_key,
    )


def stored_aggregates(
    filters: list,
    test_id: str,
    metric: str,
    group_by: str | None,
    comparability_key: str | None,
) -> dict:
    """``filtered`` over run filters given as [[name, [values]], …]
    (``answer_cache.query_items``): stored and served by the data version."""
    return filtered(
        answer_cache.query_dict(filters),
        test_id,
        metric,
        group_by,
        comparability_key=comparability_key,
    )
