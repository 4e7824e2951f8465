"""Where a run stands among comparable runs: the run page's "among similar
systems" card.

One definition of the rank, ``similar.similar_systems`` (the API's
``/api/v1/runs/N/similar/``): the run ranked among the *other* listed, not
suspect runs with a result of the same comparability key on the same disk
type.  This module only adds what a page needs beside it: which of those
runs are nearest to the run's figure, to compare it with them.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F
from django.db.models.functions import Abs

from benchdb.results.aggregates import comparable_runs
from benchdb.results.metrics import metric_column
from benchdb.results.models import Run
from benchdb.results.similar import _similar_results, similar_systems

# How many of the nearest comparable runs the page offers to compare with.
NEAREST = 3


def nearest_runs(run: Run, answer: dict, k: int = NEAREST) -> list[int]:
    """The ids of the ``k`` runs of ``answer``'s population (a
    ``similar_systems`` answer of ``run``) whose figure is nearest to the
    run's, nearest first (ties by id)."""
    if answer["value"] is None or not answer["ranked_among"]:
        return []
    column = metric_column(answer["metric"])
    disk_type = answer["disk_type"] if run.hardware_id else None
    qs = _similar_results(
        answer["comparability_key"],
        column,
        disk_type,
        list(answer["match"].items()),
        comparable_runs(),
    ).exclude(run_id=run.pk)
    return list(
        qs.annotate(gap=Abs(F(column) - answer["value"]))
        .order_by("gap", "run_id")
        .values_list("run_id", flat=True)[:k]
    )


def run_standing(run: Run, tests: Iterable[tuple[str, str, str]]) -> list[dict]:
    """Per main test of ``tests`` ((test id, metric, label)) that the run
    has: its ``similar_systems`` answer (``percentile``,
    ``better_than_percent``, ``ranked_among``...) with ``label`` and
    ``nearest`` (run ids to compare with).  Tests the run lacks are left
    out."""
    out = []
    for test_id, metric, label in tests:
        try:
            answer = similar_systems(run, test_id, metric)
        except LookupError:
            continue
        out.append({**answer, "label": label, "nearest": nearest_runs(run, answer)})
    return out
