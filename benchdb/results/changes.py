"""Which stored answers a change can reach: the refresh recomputes those
alone (``answer_cache.restamp``, ``results.refresh``).

An answer over run filters and one test (the reports' answers over a setup
and a workload, the population answers, the aggregates) reads the results
of that test of the runs the filters match, and of their host baselines.  A
changed run can change it only if it, or a guest paired with it, matches
those filters and has a result of that test.  That is asked of the changed
runs alone, whatever their state now (a hidden or private run was in the
population before), so the cost of the question is that of the change, not
of the table.  That holds for the filters on what a run is (its platform,
disk, cache mode…), which only an edit or a retag changes; such a write
logs an unnamed change beside the run (``refresh.announce(moved=True)``:
what it was is not what it is), and so does any write outside the write
functions.  A deleted run cannot be asked about either.  Those, and the
filters on a run's state (``STATE_FILTERS``), reach every answer.

Each function here takes the changed run ids and then the answer's own
arguments (as stored), and is named by the catalogue (``reached`` of
``answers.declare``); an answer without one is recomputed whenever it is
older than the data.
"""

from __future__ import annotations

from django.db.models import Q

from benchdb.results import answer_cache
from benchdb.results.models import Result, Run

# Filters on a run's state, which the write functions change without moving
# the run (a flag, a hide, a visibility; a baseline shown or not, which is
# another run's state): whether a changed run, or another, matched them
# before cannot be told from what it is now.  An answer over them is reached
# by any change.
STATE_FILTERS = frozenset({"suspect", "visibility", "has_baseline"})


def _deleted(changed: list[int]) -> bool:
    """Is one of the runs gone (what it was cannot be asked)?"""
    return Run.objects.filter(pk__in=changed).count() < len(set(changed))


def _reaches(changed: list[int], filters, test_id: str | None) -> bool:
    """Could the runs ``changed`` change an answer over the runs ``filters``
    match (a QueryDict or a dict of facet values) and test ``test_id``
    (None: any of their tests)?"""
    from benchdb.results.population import filter_runs

    if _deleted(changed) or any(name in STATE_FILTERS for name in filters):
        return True
    touched = Run.objects.filter(Q(pk__in=changed) | Q(baseline_id__in=changed))
    try:
        matching = filter_runs(filters, base=touched)
    except ValueError:
        return True  # filters no longer valid: the refresh drops it
    if test_id is None:
        return matching.exists()
    return Result.objects.filter(
        run__in=matching.values("pk"), test_id=test_id
    ).exists()


def setup(changed: list[int], setup: dict, _workload: dict) -> bool:
    """The reports' answers over (setup, workload) that also say what the
    setup's runs cost the host's CPU (``hostcost.runs_host_cost``, over
    every test): any run of the setup reaches them."""
    return _reaches(changed, setup, None)


def field_setup(changed: list[int], _field: str, setup: dict, _workload) -> bool:
    """``overhead_by`` over (field, setup, workload): as ``setup``."""
    return _reaches(changed, setup, None)


def setup_workload(changed: list[int], setup: dict, workload: dict) -> bool:
    """The cache modes' ranking over (setup, workload): its test alone."""
    return _reaches(changed, setup, workload["test_id"])


def filters_test(changed: list[int], filters: list, test_id: str, *_rest) -> bool:
    """``distribution`` and ``aggregates`` over (filters, test id, …)."""
    return _reaches(changed, answer_cache.query_dict(filters), test_id)


def two_filters_test(
    changed: list[int], filters_a: list, filters_b: list, test_id: str, *_rest
) -> bool:
    """``compare_sets`` over (filters a, filters b, test id, …)."""
    return filters_test(changed, filters_a, test_id) or filters_test(
        changed, filters_b, test_id
    )


def filters_facet_test(
    changed: list[int], filters: list, _facet: str, _values: list, test_id: str, *_rest
) -> bool:
    """``rank_settings`` over (filters, facet, values, test id, …): the
    filters alone match more runs than the facet's values do."""
    return filters_test(changed, filters, test_id)


def comparability_key(
    changed: list[int], key: str, _metric: str, disk_type: str | None, *_rest
) -> bool:
    """``similar_population`` and ``similar_points`` over (comparability key,
    metric, disk type, facets matched): the figures of that key's results on
    that disk type alone, no baselines."""
    if _deleted(changed):
        return True
    found = Result.objects.filter(run_id__in=changed, comparability_key=key)
    if disk_type is not None:
        found = found.filter(run__hardware__disk_type=disk_type)
    return found.exists()
