"""Across runs: what the community's runs show, for any filter.

Every statistic elsewhere is within one run's repeats.  This module answers
questions over many runs: "4k random read IOPS at QD1 on SATA SSDs under
Proxmox: what do runs get, and how much does the guest lose against its
host?", and "writeback vs none: which is faster, by how much, on how many
systems?".

- **A run counts once**: its per-run figure is the mean over its repeats of
  the test's main direction (the ``Result.*_mean`` column), so the work per
  run is done once at ingest and the population is one column of one query.
- **A system is a hardware row** (``Run.hardware``: the same CPU, disks and
  controller share one row).  Counts say how many runs and how many distinct
  systems an answer rests on; runs without a hardware description count as
  runs, never as systems.
- **Distributions**: median, quartiles, min/max and a bootstrap 95% interval
  of the median (``stats.median_interval``: NumPy, fixed seed, so the same
  runs always give the same interval).
- **Overheads**: guest/host for each guest run with a visible, not suspect
  host baseline that measured the same comparability key, computed in SQL
  (a correlated subquery for the host's figure), then summarised as above.
- **Comparing two filter sets** (``compare_sets``): systems measured under
  both settings are paired: per system the geometric mean of its runs under
  A and under B (``exp(avg(ln(x)))`` in SQL, grouped by hardware), the log
  ratio B/A per system, its median and a bootstrap interval.  Pairing takes
  the systems' own speed out of the comparison.  With fewer than 3 paired
  systems the answer falls back to the two sets' medians (unpaired, bootstrap
  of each side), and says so.  The verdict follows ``stats``: a real
  difference when the interval excludes no change, "equivalent" when it lies
  within ±``EQUIVALENCE_PERCENT``, otherwise "cannot tell".

Only listed (public, not hidden; ``Run.objects.listed()``), not suspect runs
enter a population, and a host baseline only when it is one of them;
results of different comparability keys are never pooled (the most common
key of the test id among the filtered runs is used unless one is given).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import connection
from django.db.models import (
    Aggregate,
    Avg,
    Count,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Cast, Ln

from benchdb.results import across, aggregates, answer_cache, metrics, stats
from benchdb.results.models import Result, Run
from benchdb.results.vocab import Source

# The per-run figures a population can be built from: metric -> Result column.
METRICS = metrics.METRIC_COLUMNS


def population_runs(include_declared: bool = False) -> QuerySet:
    """Runs that may enter an across-runs answer: listed, not suspect, and
    no host run made inside a VM (``Run.objects.bare_metal``).

    ``Run.objects.listed()`` is the one rule for lists, reports and
    aggregates (public, not hidden); a suspect run is shown with its reason,
    never mixed into others' statistics.  Imported runs, whose configuration
    is declared and not verified, enter only when asked for
    (``include_declared``: a ``source`` filter names them).
    """
    runs = Run.objects.listed().bare_metal().filter(suspect=False)
    if not include_declared:
        runs = runs.exclude(source=Source.IMPORTED)
    return runs


def _column(metric: str) -> str:
    return metrics.metric_column(metric)


def _results(
    runs: QuerySet, test_id: str, metric: str, comparability_key: str | None
) -> tuple[QuerySet, str | None]:
    """The results of ``test_id`` among ``runs`` with a positive figure, one key."""
    column = _column(metric)
    qs = Result.objects.filter(
        test_id=test_id,
        comparable=True,
        run__in=runs.values("pk"),
        **{f"{column}__gt": 0},
    )
    if comparability_key is None:
        comparability_key = aggregates.most_common_key(qs)
    return qs.filter(comparability_key=comparability_key), comparability_key


def _summary(values, systems: int, runs: int | None = None) -> dict:
    """A distribution's figures: median_interval plus the counts."""
    out = stats.median_interval(values)
    out["runs"] = out.pop("n") if runs is None else runs
    out["systems"] = systems
    return out


class PercentileDisc(Aggregate):
    """PostgreSQL's ``percentile_disc(f) WITHIN GROUP (ORDER BY expr)``."""

    function = "PERCENTILE_DISC"
    name = "PercentileDisc"
    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fraction: float, **extra):
        # A float rendered by us, never user text: safe in the SQL.
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


def _spread(qs: QuerySet, expr: str) -> dict:
    """``_summary`` of ``expr`` over ``qs``, in SQL when there are many values.

    ``expr`` is evaluated once per row, in a derived table behind an
    optimisation fence (``OFFSET 0``): the overhead's ``ratio`` is a
    correlated subquery (the host's figure), and aggregating it directly
    made PostgreSQL run that subquery once per aggregate and row (count,
    three quartiles, min, max, two ranks: 9 times per guest result).

    Up to ``stats.BOOTSTRAP_MAX_VALUES`` values the column is fetched (sorted
    by PostgreSQL) for the bootstrap; beyond, quartiles come from
    ``percentile_cont`` and the median's order-statistic interval from
    ``percentile_disc`` at its ranks, so nothing per run leaves the database.
    """
    inner, params = (
        qs.order_by().values_list(expr, "run__hardware").query.sql_with_params()
    )
    rows = f"(SELECT * FROM ({inner}) AS q OFFSET 0) AS t(v, hw)"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(v), count(DISTINCT hw) FROM {rows}", params)
        n, systems = cursor.fetchone()
        if n <= stats.BOOTSTRAP_MAX_VALUES:
            cursor.execute(
                f"SELECT v FROM {rows} WHERE v IS NOT NULL ORDER BY v", params
            )
            values = np.fromiter((v for (v,) in cursor.fetchall()), dtype=float)
            return _summary(values, systems)
        j = stats.median_order_rank(n)
        # Fractions rendered by us from integers, never user text.
        columns = [
            "percentile_cont(0.25) WITHIN GROUP (ORDER BY v)",
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY v)",
            "percentile_cont(0.75) WITHIN GROUP (ORDER BY v)",
            "min(v)",
            "max(v)",
        ]
        if j is not None:
            # percentile_disc(f) is the value at rank ceil(f * n): half a
            # rank below j (and above n - j + 1) lands on it exactly.
            columns += [
                f"percentile_disc({float((j - 0.5) / n)!r}) WITHIN GROUP (ORDER BY v)",
                f"percentile_disc({float((n - j + 0.5) / n)!r}) "
                "WITHIN GROUP (ORDER BY v)",
            ]
        cursor.execute(f"SELECT {', '.join(columns)} FROM {rows}", params)
        got = cursor.fetchone()
    out = dict(zip(("q1", "median", "q3", "min", "max"), got[:5], strict=True))
    out["ci95_low"], out["ci95_high"] = got[5:7] if j is not None else (None, None)
    out.update(runs=n, systems=systems, interval_method="order statistics")
    return out


def distribution(
    runs: QuerySet,
    test_id: str,
    metric: str = "iops",
    comparability_key: str | None = None,
) -> dict:
    """Per-run figures of a test among ``runs`` and guest/host overheads.

    ``runs`` is already filtered (e.g. ``RunFilterSet(...).qs`` over
    ``population_runs()``).  Returns ``{"test_id", "metric", "unit",
    "higher_is_better", "comparability_key", "results", "overhead"}`` where
    ``results`` and ``overhead`` each have median, q1, q3, min, max, the
    median's interval ``ci95_low``/``ci95_high`` (bootstrap; order statistics
    in SQL beyond ``stats.BOOTSTRAP_MAX_VALUES`` runs), ``runs`` and
    ``systems``.  Overheads are guest ÷ host (1.0 = native).
    """
    column = _column(metric)
    qs, key = _results(runs, test_id, metric, comparability_key)
    return {
        "test_id": test_id,
        "metric": metric,
        "unit": metrics.MAIN_METRICS[metric]["unit"],
        "higher_is_better": metrics.higher_is_better(metric),
        "comparability_key": key,
        "results": _spread(qs, column),
        "overhead": overhead_distribution(qs, metric),
    }


def figure_spread(
    runs: QuerySet,
    test_id: str,
    metric: str = "iops",
    comparability_key: str | None = None,
) -> dict:
    """``distribution(...)["results"]`` alone, without the overheads."""
    qs, _key = _results(runs, test_id, metric, comparability_key)
    return _spread(qs, _column(metric))


def _with_host_figure(results: QuerySet, metric: str) -> QuerySet:
    """Guest results annotated with their host baseline's figure (SQL)."""
    column = _column(metric)
    host = Result.objects.filter(
        run=OuterRef("run__baseline"),
        comparability_key=OuterRef("comparability_key"),
        **{f"{column}__gt": 0},
    ).values(column)[:1]
    baselines = population_runs()
    return (
        results.filter(run__role="guest", run__baseline__in=baselines.values("pk"))
        .annotate(host_figure=Subquery(host, output_field=FloatField()))
        .filter(host_figure__isnull=False)
        .annotate(ratio=Cast(F(column), FloatField()) / F("host_figure"))
    )


def overhead_distribution(results: QuerySet, metric: str) -> dict:
    """Guest ÷ host over the guest results among ``results`` that have a host."""
    out = _spread(_with_host_figure(results, metric), "ratio")
    out["percent"] = None if out["median"] is None else (out["median"] - 1) * 100
    return out


def _per_system_logs(results: QuerySet, expr: str) -> dict[int, tuple]:
    """hardware id -> (mean of ln(expr) over its runs, number of runs)."""
    rows = (
        results.exclude(run__hardware=None)
        .values("run__hardware")
        .annotate(log_mean=Avg(Ln(expr)), n=Count("id"))
        .order_by("run__hardware")
    )
    return {row["run__hardware"]: (row["log_mean"], row["n"]) for row in rows}


def compare_sets(
    runs_a: QuerySet,
    runs_b: QuerySet,
    test_id: str,
    metric: str = "iops",
    comparability_key: str | None = None,
    margin_percent: float | None = None,
    confidence: float = stats.CONFIDENCE,
    of: str = "figure",
) -> dict:
    """B against A over the community's runs: effect, interval, systems, verdict.

    ``of="overhead"`` compares the guest ÷ host overheads of the two sets
    instead of the figures (does virtio-scsi lose more to its host than
    virtio-blk?): only guest runs with a listed host baseline count.

    ``runs_a`` and ``runs_b`` are the two filter sets' runs (already within
    ``population_runs()``).  The effect is B ÷ A as a ratio (and percent):
    the median over paired systems of their per-system ratio, with a
    bootstrap interval; or, with fewer than 3 paired systems, the ratio of
    the two sets' medians with a bootstrap interval of each side resampled
    independently (``paired`` False).  Swapping A and B mirrors the answer.
    """
    read = read_sets(runs_a, runs_b, test_id, metric, comparability_key, of)
    return compare_read(read, margin_percent, confidence)


@dataclass(frozen=True)
class SetsRead:
    """What ``compare_sets`` reads of two filter sets: each side's spread,
    its results (for the unpaired fallback) and per system its mean log
    figure and runs (``_per_system_logs``)."""

    test_id: str
    metric: str
    comparability_key: str | None
    of: str
    spread_a: dict
    spread_b: dict
    res_a: QuerySet
    res_b: QuerySet
    expr: str
    logs_a: dict[int, tuple]
    logs_b: dict[int, tuple]

    @property
    def paired_ids(self) -> list[int]:
        return sorted(set(self.logs_a) & set(self.logs_b))

    @property
    def diffs(self) -> list[float]:
        """ln(B/A) per paired system, in the order of its id."""
        return [self.logs_b[h][0] - self.logs_a[h][0] for h in self.paired_ids]


def read_sets(
    runs_a: QuerySet,
    runs_b: QuerySet,
    test_id: str,
    metric: str = "iops",
    comparability_key: str | None = None,
    of: str = "figure",
) -> SetsRead:
    """``compare_sets``' reads (its queries, but the unpaired fallback's)."""
    if comparability_key is None:
        # One key for both sides: the most common among their runs together.
        both = Run.objects.filter(
            Q(pk__in=runs_a.values("pk")) | Q(pk__in=runs_b.values("pk"))
        )
        _qs, comparability_key = _results(both, test_id, metric, None)
    if of not in ("figure", "overhead"):
        raise ValueError(f"of must be figure or overhead, not {of!r}")
    res_a, _ = _results(runs_a, test_id, metric, comparability_key)
    res_b, _ = _results(runs_b, test_id, metric, comparability_key)
    expr = _column(metric)
    # Each side's spread as ``distribution`` gives it, only the one shown
    # (the overheads' correlated host look-up is not paid for figures).
    if of == "figure":
        spread_a, spread_b = _spread(res_a, expr), _spread(res_b, expr)
    else:
        spread_a = overhead_distribution(res_a, metric)
        spread_b = overhead_distribution(res_b, metric)
    if of == "overhead":
        res_a, res_b = (
            _with_host_figure(res_a, metric),
            _with_host_figure(res_b, metric),
        )
        expr = "ratio"
    return SetsRead(
        test_id=test_id,
        metric=metric,
        comparability_key=comparability_key,
        of=of,
        spread_a=spread_a,
        spread_b=spread_b,
        res_a=res_a,
        res_b=res_b,
        expr=expr,
        logs_a=_per_system_logs(res_a, expr),
        logs_b=_per_system_logs(res_b, expr),
    )


def compare_read(
    read: SetsRead,
    margin_percent: float | None = None,
    confidence: float = stats.CONFIDENCE,
) -> dict:
    """``compare_sets``' answer from what it read."""
    metric = read.metric
    margin = metrics.equivalence_percent() if margin_percent is None else margin_percent
    hib = metrics.higher_is_better(metric)
    spread_a, spread_b = read.spread_a, read.spread_b
    logs_a, logs_b = read.logs_a, read.logs_b
    paired_ids = read.paired_ids
    out = {
        "test_id": read.test_id,
        "metric": metric,
        "unit": metrics.MAIN_METRICS[metric]["unit"],
        "higher_is_better": hib,
        "comparability_key": read.comparability_key,
        "of": read.of,
        "a": spread_a,
        "b": spread_b,
        "paired": len(paired_ids) >= stats.MIN_REPEATS,
        "paired_systems": len(paired_ids),
        "ratio": None,
        "low": None,
        "high": None,
        "equivalence_percent": margin,
    }
    diffs = read.diffs
    if out["paired"]:
        m = stats.median_interval(np.asarray(diffs, dtype=float), confidence)
        out["ratio"] = float(np.exp(m["median"]))
        out["low"], out["high"] = (
            float(np.exp(m["ci95_low"])),
            float(np.exp(m["ci95_high"])),
        )
        out["per_system"] = {
            "q1": float(np.exp(m["q1"])),
            "q3": float(np.exp(m["q3"])),
            "min": float(np.exp(m["min"])),
            "max": float(np.exp(m["max"])),
        }
    else:
        out.update(_unpaired(read.res_a, read.res_b, read.expr, confidence))
    out["confidence"] = confidence
    out.update(_population_verdict(out, hib, margin))
    out["across"] = across.two_settings(diffs, hib, margin)
    out["across"]["runs"] = sum(logs_a[h][1] + logs_b[h][1] for h in paired_ids)
    out["left_out"] = _left_out(
        {"a": logs_a, "b": logs_b},
        {"a": spread_a["runs"], "b": spread_b["runs"]},
        set(paired_ids),
    )
    return out


def _left_out(logs: dict, runs: dict, kept: set) -> dict:
    """What an across-systems answer left out, and why, per setting:
    systems that did not measure every setting compared, and runs without a
    hardware description (a run counts as a system only with one)."""
    out = {}
    for name, per_system in logs.items():
        missing = sorted(set(per_system) - kept)
        on_systems = sum(n for _log, n in per_system.values())
        out[name] = {
            "systems_not_measuring_all": len(missing),
            "their_runs": sum(per_system[h][1] for h in missing),
            "runs_without_system": (runs[name] or 0) - on_systems,
        }
    return out


def rank_settings(
    facet: str,
    values: list[str],
    filters: dict,
    test_id: str,
    metric: str = "iops",
    comparability_key: str | None = None,
    margin_percent: float | None = None,
) -> dict:
    """k values of a facet ranked over the systems that measured all of them.

    E.g. ``rank_settings("cache_mode", ["none", "writeback", ...],
    {"role": "guest", "disk_type": "sata-ssd"}, test_id)``: per system and
    value the mean log figure of its runs; the values no system measured
    are left out (named); the systems that measured every remaining value
    are ranked (``across.k_settings``: average ranks, Friedman, Nemenyi's
    critical difference), and every pair of values gets the probabilities
    of B better, practically equivalent (+-``margin_percent``) or worse
    from the Bayesian signed-rank test over those systems.
    """
    margin = metrics.equivalence_percent() if margin_percent is None else margin_percent
    hib = metrics.higher_is_better(metric)
    runs = {v: filter_runs(_with(filters, facet, v)) for v in values}
    if comparability_key is None:
        both = Run.objects.filter(pk__in=filter_runs(filters).values("pk"))
        _qs, comparability_key = _results(both, test_id, metric, None)
    column = _column(metric)
    logs, counts = {}, {}
    for value, value_runs in runs.items():
        res, _ = _results(value_runs, test_id, metric, comparability_key)
        logs[value] = _per_system_logs(res, column)
        counts[value] = res.count()
    present = [v for v in values if logs[v]]
    kept = set.intersection(*(set(logs[v]) for v in present)) if present else set()
    complete = sorted(kept)
    matrix = np.asarray(
        [[logs[v][h][0] for v in present] for h in complete], dtype=float
    ).reshape(len(complete), len(present))
    out = across.k_settings(matrix, present, hib)
    out["probabilities"] = across.pairwise_probabilities(matrix, present, hib, margin)
    out.update(
        test_id=test_id,
        metric=metric,
        unit=metrics.MAIN_METRICS[metric]["unit"],
        higher_is_better=hib,
        comparability_key=comparability_key,
        facet=facet,
        equivalence_percent=margin,
        runs=sum(logs[v][h][1] for v in present for h in complete),
        without_data=[v for v in values if not logs[v]],
        left_out=_left_out({v: logs[v] for v in present}, counts, kept),
    )
    return out


def _unpaired(res_a: QuerySet, res_b: QuerySet, expr: str, confidence: float) -> dict:
    """Ratio of the two sets' medians, each side bootstrapped on its own."""
    a = np.sort(np.log(np.fromiter(res_a.values_list(expr, flat=True), float)))
    b = np.sort(np.log(np.fromiter(res_b.values_list(expr, flat=True), float)))
    if a.size == 0 or b.size == 0:
        return {}
    ratio = float(np.exp(np.median(b) - np.median(a)))
    if a.size < stats.MIN_REPEATS or b.size < stats.MIN_REPEATS:
        return {"ratio": ratio}
    # Each side's draws are fixed by its own values: swapping A and B swaps
    # the draws too, so the interval mirrors exactly.
    diffs = stats.bootstrap_medians(
        b, seed=stats.content_seed(b)
    ) - stats.bootstrap_medians(a, seed=stats.content_seed(a))
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(diffs, [tail, 1.0 - tail])
    return {"ratio": ratio, "low": float(np.exp(low)), "high": float(np.exp(high))}


def _population_verdict(out: dict, hib: bool | None, margin: float) -> dict:
    """The three verdicts for an across-runs effect (interval-based)."""
    v = {
        "percent": None,
        "percent_low": None,
        "percent_high": None,
        "verdict": stats.CANNOT_TELL,
        "text": "",
    }
    if out["ratio"] is not None:
        v["percent"] = (out["ratio"] - 1.0) * 100.0
    basis = (
        f"median over {out['paired_systems']} paired systems"
        if out["paired"]
        else f"unpaired: {out['a']['runs']} vs {out['b']['runs']} runs, "
        f"{out['paired_systems']} systems measured both"
    )
    if out["low"] is None:
        v["text"] = (
            "cannot tell: too few runs (at least "
            f"{stats.MIN_REPEATS} per side, or {stats.MIN_REPEATS} systems "
            f"measured under both; {basis})"
        )
        return v
    v["percent_low"] = (out["low"] - 1.0) * 100.0
    v["percent_high"] = (out["high"] - 1.0) * 100.0
    ci = (
        f"{out['confidence'] * 100:g}% CI {stats.format_percent(v['percent_low'])}…"
        f"{stats.format_percent(v['percent_high'])}"
    )
    v["verdict"] = stats.interval_verdict(
        out["ratio"], out["low"], out["high"], hib, margin
    )
    if v["verdict"] in (stats.FASTER, stats.SLOWER):
        word = v["verdict"]
        if hib is None:  # no better direction: say which way it went
            word = "higher" if out["ratio"] > 1.0 else "lower"
        v["text"] = f"{word} by {abs(v['percent']):.1f}% ({ci}, {basis})"
    elif v["verdict"] == stats.EQUIVALENT:
        v["text"] = f"no difference larger than {margin:g}% (equivalent; {ci}, {basis})"
    else:
        v["text"] = f"cannot tell: too few systems or too much spread ({ci}, {basis})"
    return v


def answer(
    filters: dict,
    a: dict,
    b: dict,
    test_id: str,
    metric: str = "iops",
) -> dict:
    """The reports' direct answer to "A vs B over the community's runs".

    ``filters`` apply to both sides, ``a`` and ``b`` are the two settings,
    each a dict of ``RunFilterSet`` parameters (``{"cache_mode": "none"}``,
    ``{"disk_type": ["sata-ssd", "nvme-ssd"]}``).  Returns ``{"effect_percent",
    "low_percent", "high_percent", "systems", "paired", "runs_a", "runs_b",
    "verdict", "text"}`` plus the full answer under ``"detail"``.  Raises
    ValueError naming a bad filter.
    """
    return answer_from(read_answer(filters, a, b, test_id, metric))


def read_answer(
    filters: dict, a: dict, b: dict, test_id: str, metric: str = "iops"
) -> SetsRead:
    """``answer``'s reads (``read_sets``), for ``answer_from``."""
    runs_a = filter_runs({**filters, **a})
    runs_b = filter_runs({**filters, **b})
    return read_sets(runs_a, runs_b, test_id, metric)


def answer_from(read: SetsRead) -> dict:
    """``answer`` from what it read."""
    return _short(compare_read(read))


def answers_by(
    facet: str,
    reference: str,
    values: list[str],
    filters: dict,
    test_id: str,
    metric: str = "iops",
) -> list[dict]:
    """Each value of a facet against a reference value, over the community.

    E.g. ``answers_by("cache_mode", "none", ["writethrough", "writeback",
    "directsync", "unsafe"], {"disk_type": "sata-ssd"}, test_id)`` for a
    cache-mode report.  The intervals of the k answers shown together are
    Bonferroni-widened (confidence 1 - 0.05/k), so the family of verdicts
    keeps a 5% error rate; each answer is ``answer()``'s plus ``"value"``.
    """
    others = [v for v in values if v != reference]
    confidence = 1.0 - stats.ALPHA / max(1, len(others))
    out = []
    for value in others:
        runs_a = filter_runs({**filters, facet: reference})
        runs_b = filter_runs({**filters, facet: value})
        full = compare_sets(runs_a, runs_b, test_id, metric, confidence=confidence)
        out.append({"value": value, **_short(full)})
    return out


def _short(full: dict) -> dict:
    return {
        "effect_percent": full["percent"],
        "low_percent": full["percent_low"],
        "high_percent": full["percent_high"],
        "systems": full["paired_systems"],
        "paired": full["paired"],
        "runs_a": full["a"]["runs"],
        "runs_b": full["b"]["runs"],
        "verdict": full["verdict"],
        "text": full["text"],
        "detail": full,
    }


def _with(filters, name: str, value: str):
    """Run filters (a dict or a QueryDict) with ``name`` set to ``value``."""
    from django.http import QueryDict

    if isinstance(filters, QueryDict):
        out = filters.copy()
        out.setlist(name, [value])
        return out
    return {**filters, name: value}


def filter_runs(params, base: QuerySet | None = None) -> QuerySet:
    """``RunFilterSet`` over the population's runs; ValueError on bad input."""
    from django.http import QueryDict

    from benchdb.results.filters import RunFilterSet, problems

    if not isinstance(params, QueryDict):
        query = QueryDict(mutable=True)
        for k, v in params.items():
            if isinstance(v, list | tuple):
                query.setlist(k, [str(x) for x in v])
            else:
                query[k] = str(v)
        params = query
    if base is None:
        # Declared (imported) runs only when the filter asks for a source.
        base = population_runs(include_declared=bool(params.getlist("source")))
    filterset = RunFilterSet(params, queryset=base)
    if not filterset.is_valid():
        raise ValueError(problems(filterset.errors))
    return filterset.qs.order_by()


# Stored answers over run filters (declared in results.answers) ---------------
# Their filters are ``filter_items``: [[name, [values…]], …].


def filter_items(params, exclude: tuple = ()) -> list:
    """The run filters among query parameters (``RunFilterSet``'s names, but
    ``ordering`` and ``exclude``) as [[name, [values…]], …], names sorted:
    the arguments of a stored answer over run filters."""
    from benchdb.results.filters import RunFilterSet

    names = set(RunFilterSet.base_filters) - {"ordering", *exclude}
    # The date ranges' parameters are <name>_after / <name>_before.
    return [
        [name, list(params.getlist(name))]
        for name in sorted(params)
        if name in names
        or (name.endswith(("_after", "_before")) and name.rsplit("_", 1)[0] in names)
    ]


def distribution_over(
    filters: list, test_id: str, metric: str, comparability_key: str | None
) -> dict:
    """``distribution`` over the runs of run filters."""
    runs = filter_runs(answer_cache.query_dict(filters))
    return distribution(runs, test_id, metric, comparability_key)


def compare_sets_over(
    filters_a: list,
    filters_b: list,
    test_id: str,
    metric: str,
    comparability_key: str | None,
    of: str,
) -> dict:
    """``compare_sets`` over the runs of two sets of run filters."""
    return compare_sets(
        filter_runs(answer_cache.query_dict(filters_a)),
        filter_runs(answer_cache.query_dict(filters_b)),
        test_id,
        metric,
        comparability_key,
        of=of,
    )


def rank_settings_over(
    filters: list,
    facet: str,
    values: list,
    test_id: str,
    metric: str,
    comparability_key: str | None,
) -> dict:
    """``rank_settings`` over run filters."""
    return rank_settings(
        facet,
        values,
        answer_cache.query_dict(filters),
        test_id,
        metric,
        comparability_key,
    )
