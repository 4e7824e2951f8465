"""Similar systems: where a run's figure stands among comparable runs.

The population is every visible, not suspect run with a result of the same
comparability key on hardware of the same disk type (optionally the same
values of some facets, ``SIMILAR_MATCH``), the run itself left out: a run is
ranked among the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import OuterRef, QuerySet, Subquery

from benchdb.results import answer_cache, answers, stats, vocab
from benchdb.results.aggregates import comparable_runs, distribution
from benchdb.results.metrics import MAIN_METRICS, metric_column
from benchdb.results.models import Result, Run
from benchdb.results.vocab import Visibility

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
    column = metric_column(metric)
    qs = _similar_results(
        comparability_key, column, disk_type, match, comparable_runs()
    )
    return {
        "population": list(qs.order_by(column).values_list(column, flat=True)),
        "distribution": distribution(qs, column),
    }


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
    args = (comparability_key, metric, disk_type if run.hardware_id else None)
    found, freshness = answers.similar_population.with_freshness(*args, pairs)
    population = list(found["population"])
    if value is not None and _is_member(run, comparable) and value in population:
        # A stored population older than the run does not hold it yet.
        population.remove(value)
    rank = stats.percentile_rank(value, population) if value is not None else None
    higher = MAIN_METRICS[metric]["higher_is_better"]
    return {
        "run": run.pk,
        "test_id": test_id,
        "comparability_key": comparability_key,
        "metric": metric,
        "unit": MAIN_METRICS[metric]["unit"],
        "higher_is_better": higher,
        "disk_type": disk_type,
        "match": {facet: getattr(run, facet) for facet in match},
        "value": value,
        "percentile": rank,
        "better_than_percent": (
            None if rank is None else (rank if higher else 100.0 - rank)
        ),
        "distribution": found["distribution"],
        "population": population,
        "ranked_among": len(population),
        "freshness": answer_cache.freshness_of(freshness),
    }
