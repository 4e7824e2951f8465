"""Comparisons between runs, similar-system ranks and facet aggregates.

The API (``/api/v1/compare/``, ``/similar/``, ``/aggregates/``) and the pages
take these figures from here, so a number shown in a chart is the number the
API returns.  Only results sharing a comparability key are ever compared:
the same test id measured with another suite version or other tool options is
a different measurement.

Significance comes from Welch's t-test over the per-repeat figures
(``results.stats.welch``): a 10% difference between two runs of three repeats
each may well be noise, and the comparison says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db.models import Count, F, FloatField, Max, Min, QuerySet
from django.db.models.aggregates import Aggregate

from benchdb.results import stats
from benchdb.results.models import METRIC_FIELDS, Measurement, Result, Run
from benchdb_agent import suite as agent_suite

# The figures a comparison shows for each test, in display order, with their
# unit and whether a larger value is better.
MAIN_METRICS = {
    "iops": {"unit": "IOPS", "higher_is_better": True},
    "bw_bytes": {"unit": "bytes/s", "higher_is_better": True},
    "lat_mean_ns": {"unit": "ns", "higher_is_better": False},
    "clat_p99_ns": {"unit": "ns", "higher_is_better": False},
}

# Metrics that have a column on Result (the mean over repeats of the main
# direction), so ranks and aggregates are computed in SQL.
METRIC_COLUMNS = {
    "iops": "iops_mean",
    "bw_bytes": "bw_bytes_mean",
    "lat_mean_ns": "lat_mean_ns_mean",
}

# Facets an aggregate may be grouped by: name -> ORM path from Result.
GROUP_BY = {
    "role": "run__role",
    "platform": "run__platform",
    "virtualization": "run__virtualization",
    "cache_mode": "run__cache_mode",
    "aio_mode": "run__aio_mode",
    "iothread": "run__iothread",
    "image_format": "run__image_format",
    "storage_backend": "run__storage_backend",
    "disk_bus": "run__disk_bus",
    "source": "run__source",
    "guest_filesystem": "run__guest_filesystem",
    "host_filesystem": "run__host_filesystem",
    "disk_type": "run__hardware__disk_type",
    "raid_level": "run__hardware__raid_level",
    "disk_model": "run__hardware__disk_model__name",
    "cpu_model": "run__hardware__cpu_model__name",
    "suite_version": "run__suite_version",
}

# Facets a similar-systems population may additionally be narrowed to.
SIMILAR_MATCH = ("cache_mode", "storage_backend", "platform", "disk_bus", "aio_mode")


def comparable_runs():
    """Runs whose figures may enter a distribution: visible and not suspect.

    A suspect run (a cache answered, or staff flagged it) is shown with its
    reason, never silently mixed into others' statistics.
    """
    return Run.objects.visible().filter(suspect=False)


def aggregate_repeat(records: Iterable[dict]) -> dict[str, dict]:
    """One repeat's records combined per direction (several jobs add up).

    Throughput adds up across jobs exactly; latency figures are kept only
    where a direction has a single record, since averaging jobs' latencies
    would be an estimate, not a measurement.  Ingest computes each test's
    statistics from this, and comparisons take their Welch samples from it,
    so both always agree.
    """
    by_dir: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        by_dir[rec["direction"]].append(rec)
    out = {}
    for direction, recs in by_dir.items():
        if len(recs) == 1:
            out[direction] = {f: recs[0].get(f) for f in METRIC_FIELDS}
            continue
        agg = {}
        for f in METRIC_FIELDS:
            vals = [r.get(f) for r in recs]
            if f in ("iops", "bw_bytes", "io_bytes") and None not in vals:
                agg[f] = sum(vals)
            elif f == "runtime_s" and None not in vals:
                agg[f] = max(vals)
            else:
                agg[f] = None
        out[direction] = agg
    return out


def repeat_values(result_ids: Sequence[int]) -> dict[int, dict[str, dict]]:
    """Per result: direction -> metric -> per-repeat values (repeat order).

    One query for any number of results.
    """
    rows = (
        Measurement.objects.filter(result_id__in=list(result_ids))
        .order_by("result_id", "repeat", "direction", "job")
        .values("result_id", "repeat", "direction", "job", *METRIC_FIELDS)
    )
    grouped: dict[int, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        grouped[row["result_id"]][row["repeat"]].append(row)
    out: dict[int, dict[str, dict]] = {}
    for result_id, repeats in grouped.items():
        per_dir: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for repeat in sorted(repeats):
            for direction, metrics in aggregate_repeat(repeats[repeat]).items():
                for f, v in metrics.items():
                    if v is not None:
                        per_dir[direction][f].append(v)
        out[result_id] = {d: dict(m) for d, m in per_dir.items()}
    return out


def _run_label(run: Run) -> dict:
    return {
        "id": run.pk,
        "title": str(run),
        "role": run.role,
        "platform": run.platform,
        "cache_mode": run.cache_mode,
        "storage_backend": run.storage_backend,
        "disk_bus": run.disk_bus,
        "suite_version": run.suite_version,
    }


def build_comparison(runs: list[Run], reference: Run | None = None) -> dict:
    """Every test the runs share, with each run's figures against a reference.

    For each comparability key present in every run: per main metric, each
    run's n, mean, stdev and 95% interval over repeats, the difference to the
    reference run's mean in percent, and Welch's verdict ("significant",
    "within noise", "not enough repeats").  The reference is the first run
    unless given (it must be one of ``runs``).  Tests that only some runs
    have are listed under ``not_shared`` so the reader knows what is missing.

    Queries: two (results, then measurements), whatever the number of runs.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("a comparison needs at least one run")
    if reference is None:
        reference = runs[0]
    if reference.pk not in {r.pk for r in runs}:
        raise ValueError("the reference run must be one of the compared runs")
    results = list(
        Result.objects.filter(run__in=[r.pk for r in runs], comparable=True).order_by(
            "test_id", "run_id"
        )
    )
    by_key: dict[str, dict[int, Result]] = defaultdict(dict)
    for res in results:
        by_key[res.comparability_key][res.run_id] = res
    run_ids = [r.pk for r in runs]
    shared = {k: v for k, v in by_key.items() if all(rid in v for rid in run_ids)}
    values = repeat_values([res.pk for v in shared.values() for res in v.values()])

    tests = []
    for key, per_run in sorted(shared.items(), key=lambda kv: _sort_key(kv)):
        ref_result = per_run[reference.pk]
        direction = (ref_result.stats or {}).get("main_direction")
        metrics = []
        for metric, info in MAIN_METRICS.items():
            samples = {
                rid: values.get(per_run[rid].pk, {}).get(direction, {}).get(metric, [])
                for rid in run_ids
            }
            if not any(samples.values()):
                continue
            ref_values = samples[reference.pk]
            ref_mean = stats.mean(ref_values) if ref_values else None
            entries = []
            for rid in run_ids:
                summary = stats.summarize(samples[rid])
                entry = {
                    "run": rid,
                    "n": summary["n"],
                    "mean": summary["mean"],
                    "stdev": summary["stdev"],
                    "ci95_low": summary["ci95_low"],
                    "ci95_high": summary["ci95_high"],
                    "values": samples[rid],
                    "delta_percent": None,
                    "p_value": None,
                    "verdict": None,
                    "better": None,
                }
                if rid != reference.pk:
                    entry["delta_percent"] = stats.percent_delta(
                        ref_mean, summary["mean"]
                    )
                    if not ref_values or not samples[rid]:
                        verdict = {"p": None, "verdict": "not enough repeats"}
                    else:
                        verdict = stats.welch(ref_values, samples[rid])
                    entry["p_value"] = verdict["p"]
                    entry["verdict"] = verdict["verdict"]
                    if entry["delta_percent"] is not None:
                        up = entry["delta_percent"] > 0
                        entry["better"] = (
                            up if info["higher_is_better"] else not up
                        ) and entry["delta_percent"] != 0
                entries.append(entry)
            metrics.append(
                {
                    "metric": metric,
                    "unit": info["unit"],
                    "higher_is_better": info["higher_is_better"],
                    "runs": entries,
                }
            )
        tests.append(
            {
                "test_id": ref_result.test_id,
                "title": ref_result.title or ref_result.test_id,
                "group": ref_result.group,
                "tool": ref_result.tool,
                "comparability_key": key,
                "direction": direction,
                "main_metric": main_metric(ref_result.test_id),
                "metrics": metrics,
            }
        )
    not_shared = sorted(
        {per_run[next(iter(per_run))].test_id for k, per_run in by_key.items()}
        - {t["test_id"] for t in tests}
    )
    return {
        "runs": [_run_label(r) for r in runs],
        "reference": reference.pk,
        "tests": tests,
        "not_shared": not_shared,
    }


def main_metric(test_id: str) -> str | None:
    """The figure the suite catalogue says a test is about (``iops`` for 4k
    random I/O, ``bw_bytes`` for sequential, ``lat_mean_ns`` for ioping), so
    a chart can lead with it; None for tests outside the catalogue."""
    try:
        metric = agent_suite.get_test(test_id).get("metric")
    except KeyError:
        return None
    return metric if metric in MAIN_METRICS else None


def _sort_key(item: tuple[str, dict[int, Result]]) -> tuple:
    per_run = item[1]
    first = per_run[next(iter(per_run))]
    return (first.group, first.test_id, item[0])


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(f) WITHIN GROUP (ORDER BY expr)``."""

    function = "PERCENTILE_CONT"
    name = "PercentileCont"
    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fraction: float, **extra):
        fraction = float(fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be within 0..1")
        # A float literal rendered by us, never user text: safe in the SQL.
        super().__init__(expression, fraction=repr(fraction), **extra)


def _distribution(qs: QuerySet, column: str) -> dict:
    """count, min, quartiles, max of one column over a queryset (PostgreSQL)."""
    return qs.aggregate(
        count=Count(column),
        min=Min(column),
        q1=PercentileCont(column, 0.25),
        median=PercentileCont(column, 0.5),
        q3=PercentileCont(column, 0.75),
        max=Max(column),
    )


def metric_column(metric: str) -> str:
    """The Result column of a metric; ValueError names the allowed ones."""
    try:
        return METRIC_COLUMNS[metric]
    except KeyError:
        allowed = ", ".join(METRIC_COLUMNS)
        raise ValueError(f"unknown metric {metric!r}; one of {allowed}") from None


def similar_systems(
    run: Run,
    test_id: str,
    metric: str = "iops",
    match: Sequence[str] = (),
    runs: QuerySet | None = None,
) -> dict:
    """Where a run's result stands among comparable runs on the same disk type.

    The population is every visible, not suspect run (or ``runs``) with a
    result of the
    same comparability key, on hardware of the same disk type, optionally
    also with the same values of the facets in ``match`` (see
    ``SIMILAR_MATCH``).  ``percentile`` is the share of the population at or
    below the run's value (ties count half); ``better_than_percent`` turns it
    round for latencies, where lower is better.  The run itself is part of
    the population when it is visible.
    """
    column = metric_column(metric)
    for facet in match:
        if facet not in SIMILAR_MATCH:
            allowed = ", ".join(SIMILAR_MATCH)
            raise ValueError(f"cannot match on {facet!r}; one of {allowed}")
    result = Result.objects.filter(run=run, test_id=test_id).first()
    if result is None:
        raise LookupError(f"run {run.pk} has no test {test_id!r}")
    value = getattr(result, column)
    disk_type = run.hardware.disk_type if run.hardware_id else "unknown"
    population_runs = runs if runs is not None else comparable_runs()
    qs = Result.objects.filter(
        comparability_key=result.comparability_key,
        comparable=True,
        run__in=population_runs,
        **{f"{column}__isnull": False},
    )
    if run.hardware_id:
        qs = qs.filter(run__hardware__disk_type=disk_type)
    else:
        qs = qs.filter(run__hardware__isnull=True)
    for facet in match:
        qs = qs.filter(**{f"run__{facet}": getattr(run, facet)})
    population = list(qs.order_by(column).values_list(column, flat=True))
    rank = stats.percentile_rank(value, population) if value is not None else None
    higher = MAIN_METRICS[metric]["higher_is_better"]
    return {
        "run": run.pk,
        "test_id": test_id,
        "comparability_key": result.comparability_key,
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
        "distribution": _distribution(qs, column),
        "population": population,
    }


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
        top = (
            qs.values("comparability_key")
            .annotate(n=Count("id"))
            .order_by("-n", "comparability_key")
            .first()
        )
        comparability_key = top["comparability_key"] if top else None
    qs = qs.filter(comparability_key=comparability_key)
    overall = _distribution(qs, column)
    groups = []
    if group_by is not None:
        path = GROUP_BY[group_by]
        rows = (
            qs.annotate(group_value=F(path))
            .values("group_value")
            .annotate(
                count=Count(column),
                min=Min(column),
                q1=PercentileCont(column, 0.25),
                median=PercentileCont(column, 0.5),
                q3=PercentileCont(column, 0.75),
                max=Max(column),
            )
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
