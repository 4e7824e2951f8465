"""Comparisons between runs, similar-system ranks and facet aggregates.

The API (``/api/v1/compare/``, ``/similar/``, ``/aggregates/``) and the pages
take these figures from here, so a number shown in a chart is the number the
API returns.  Only results sharing a comparability key are ever compared:
the same test id measured with another suite version or other tool options is
a different measurement.

Every interval, p-value and verdict comes from ``results.stats`` (SciPy):
each run against the chosen reference as a ratio of geometric means with its
interval, Holm-corrected over the runs compared, and a verdict that says what
the repeats can and cannot tell.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Sequence

from django.conf import settings
from django.db import connection
from django.db.models import (
    Count,
    F,
    FloatField,
    Max,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.aggregates import Aggregate

from benchdb.results import answer_cache, answers, memo, stats, vocab
from benchdb.results.models import (
    METRIC_FIELDS,
    Measurement,
    Result,
    Run,
    read_json,
)
from benchdb_agent import workload


def higher_is_better(metric: str) -> bool | None:
    """Whether a larger value of one of the agent's metrics is better.

    From the record keys' unit suffixes (``parsers.METRIC_KEYS``): times
    (``*_ns``, ``*_s``) are better lower, rates (``iops``, ``bw_bytes``)
    higher; an amount of work (``io_bytes``) is neither.
    """
    if metric not in METRIC_FIELDS:
        raise KeyError(metric)
    if metric.endswith(("_ns", "_s")):
        return False
    if metric in ("iops", "bw_bytes"):
        return True
    return None


# Latency percentiles: kept per repeat, never averaged or tested.
PERCENTILE_METRICS = {m for m in METRIC_FIELDS if stats.is_percentile(m)}

# The figures a comparison shows for each test, in display order, with their
# unit and whether a larger value is better (``higher_is_better``).
MAIN_METRICS = {
    metric: {"unit": unit, "higher_is_better": higher_is_better(metric)}
    for metric, unit in (
        ("iops", "IOPS"),
        ("bw_bytes", "bytes/s"),
        ("lat_mean_ns", "ns"),
        ("clat_p99_ns", "ns"),
    )
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
    **{name: f"run__{path}" for name, path in vocab.COLUMN_PATHS.items()},
    "suite_version": "run__suite_version",
}

# Facets a similar-systems population may additionally be narrowed to.
SIMILAR_MATCH = vocab.LAYOUT


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

    The values ingest stored with the statistics (``stats["values"]``), read
    in one query; results stored before they were kept there are rebuilt from
    their measurements (one more query).
    """
    ids = list(result_ids)
    out: dict[int, dict[str, dict]] = {}
    stored = Result.objects.filter(pk__in=ids).values_list("pk", "stats__values")
    for pk, values in stored:
        if isinstance(values, dict):
            out[pk] = values
    missing = [i for i in ids if i not in out]
    if missing:
        out.update(_measured_values(missing))
    return out


def _measured_values(result_ids: Sequence[int]) -> dict[int, dict[str, dict]]:
    """``repeat_values`` rebuilt from the measurements: one query."""
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


# What a comparison reads of each run: its label (``_run_label``, with what
# ``Run.__str__`` names an untitled run by) and its baseline.  A caller that
# needs nothing else reads only these (``reads.comparison``): the other 34
# columns, JSON ones included, cost 0.75 ms of a 10-run API compare.
COMPARED_RUN_FIELDS = (
    *("id", "title", "role", "platform", "cache_mode", "storage_backend"),
    *("disk_bus", "image_format", "suite_version", "baseline", "created"),
)


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


def equivalence_percent() -> float:
    """The "no difference larger than Y%" margin (``BENCHDB_EQUIVALENCE_PERCENT``)."""
    return float(
        getattr(settings, "BENCHDB_EQUIVALENCE_PERCENT", stats.EQUIVALENCE_PERCENT)
    )


# The comparable results of some runs, each with ``main_values``: its main
# direction and the per-repeat values in it of the main metrics, in
# ``MAIN_METRICS`` order (null where a metric has none), or null where
# ingest stored no values (older results: rebuilt from measurements).  A
# trigger writes the column from ``stats`` (migration 0013), so the rest of
# the statistics JSON is neither read nor decompressed: the 480 results of
# ten runs and their hosts at a million results took 3.6 ms of PostgreSQL
# when these paths were read out of ``stats``, 0.5 now.
_RESULTS_SELECT = (
    'SELECT r.id, r.run_id, r.test_id, r.title, r."group", r.tool, '
    "r.comparability_key, r.main_values ->> 0, r.main_values -> 1, r.overhead "
    "FROM results_result r "
)
_RESULTS_ORDER = " ORDER BY r.test_id, r.run_id"


# The main metrics' stored values of some results, every direction (NULL
# where none are stored): for a result whose main direction is not its
# comparison's (``_series``), which is rare.
_DIRECTIONS_SQL = (
    "SELECT r.id, CASE WHEN jsonb_typeof(x.s -> 'values') = 'object' THEN "
    "COALESCE((SELECT jsonb_object_agg(d.key, jsonb_strip_nulls(jsonb_build_object("
    + ", ".join(f"'{m}', d.value -> '{m}'" for m in MAIN_METRICS)
    + "))) FROM jsonb_each(x.s -> 'values') AS d), '{}'::jsonb) END "
    "FROM results_result r "
    "CROSS JOIN LATERAL (SELECT r.stats || '{}'::jsonb AS s OFFSET 0) x "
    "WHERE r.id = ANY(%s)"
)


def _results_where(runs: list[Run]) -> tuple[str, list]:
    """The WHERE clause of a comparison's results (``_comparison_results``)
    and its parameters."""
    run_ids = [r.pk for r in runs]
    baseline_ids = sorted({r.baseline_id for r in runs if r.baseline_id} - {*run_ids})
    where = "WHERE r.comparable AND r.run_id = ANY(%s::bigint[]"
    params: list = [run_ids]
    if baseline_ids:
        # A baseline only lends its figures to an overhead when it is listed
        # (anyone may see it) or is one of the compared runs (the caller
        # checked).  The listed baselines as an array computed once (an
        # InitPlan), so the results are still read by an index scan on their
        # run: ``run IN (...) OR run IN (subquery)`` made PostgreSQL scan
        # every result (0.3 s at a million results).
        listed = Run.objects.listed().filter(pk__in=baseline_ids)
        sql, listed_params = listed.order_by().values("pk").query.sql_with_params()
        where += f" || ARRAY({sql})"
        params.extend(listed_params)
    return where + ")", params


def _comparison_results(where: str, params: list) -> list[tuple]:
    """Comparable results of the runs and of their visible host baselines
    (``_results_where``): (id, run id, test id, title, group, tool,
    comparability key, main direction, the main metrics' values in that
    direction in ``MAIN_METRICS`` order as JSON or None when none are
    stored, the stored overhead as JSON or None), by test id and run.  The
    JSON is read only where it is used (``_series``, ``_stored_overhead``):
    a baseline whose overheads are stored is not.  One query."""
    with connection.cursor() as cursor:
        cursor.execute(_RESULTS_SELECT + where + _RESULTS_ORDER, params)
        return cursor.fetchall()


def _result_ids(where: str, params: list) -> tuple[int, ...]:
    """The ids of the results ``_comparison_results`` would read, in id
    order: what a kept comparison is keyed by.  One query (no JSON read)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.id FROM results_result r " + where + " ORDER BY r.id", params
        )
        return tuple(row[0] for row in cursor.fetchall())


def _json(value):
    """A jsonb column as psycopg hands it over (text, or already parsed), read
    as json.loads reads it (``read_json``)."""
    if isinstance(value, bytes):
        value = value.decode()
    return read_json(value) if isinstance(value, str) else value


def _series(rows: Iterable[tuple[tuple, str | None]]) -> dict[int, list]:
    """Per result row of ``_comparison_results``, given with the direction
    its figures are read in (the main direction of its key's reference
    result, which every run's figure of that test is read in): its main
    metrics' per-repeat values (``MAIN_METRICS`` order, [] where none).
    Most results come with them; a result whose own main direction differs
    takes them from its stored values (one query), one stored without
    values from its measurements (one query)."""
    out: dict[int, list] = {}
    other, unstored = [], []
    for row, direction in rows:
        values = _json(row[8])
        if values is None:
            unstored.append((row[0], direction))
        elif row[7] == direction:
            out[row[0]] = [v if v is not None else [] for v in values]
        else:
            other.append((row[0], direction))
    if other:
        stored = _main_metric_values([pk for pk, _d in other])
        for pk, direction in other:
            out[pk] = _in_direction(stored.get(pk), direction)
    if unstored:
        measured = _measured_values([pk for pk, _d in unstored])
        for pk, direction in unstored:
            out[pk] = _in_direction(measured.get(pk), direction)
    return out


def _main_metric_values(result_ids: Sequence[int]) -> dict[int, dict | None]:
    """``repeat_values`` of some results cut to the main metrics, read in
    PostgreSQL (``_DIRECTIONS_SQL``): None for a result stored without
    values.  One query."""
    with connection.cursor() as cursor:
        cursor.execute(_DIRECTIONS_SQL, [list(result_ids)])
        return {pk: _json(v) for pk, v in cursor.fetchall()}


def _in_direction(values: dict | None, direction) -> list:
    """``repeat_values``' answer for one result, in one direction, as the
    main metrics' lists in ``MAIN_METRICS`` order."""
    per_metric = (values or {}).get(direction) or {}
    return [per_metric.get(metric) or [] for metric in MAIN_METRICS]


def build_comparison(
    runs: list[Run],
    reference: Run | None = None,
    figures: Callable[[str, str, list[str]], Container[str]] | None = None,
) -> dict:
    """Every test the runs share, with each run's figures against a reference.

    For each comparability key present in every run, per main metric:
    each run's n, mean, geometric mean with its 95% interval (log scale, n >=
    3 only, ``results.stats``), min and max; for every run but the reference
    the ratio of geometric means to the reference with its interval, Welch's
    p on the logs, Holm-adjusted over the runs compared for that figure,
    and one of the verdicts "faster", "slower", "equivalent", "cannot tell"
    with a sentence saying it (``verdict_text``).  A guest run with a
    visible host baseline also gets its overhead (guest/host with an
    interval).  Latency percentiles are never averaged: their entries carry
    each repeat's value and the range, no mean and no verdict.

    The reference is the first run unless given (it must be one of ``runs``).
    Tests only some runs have are listed under ``not_shared``.

    ``figures(test_id, group, measured)``, when given, says which of a
    test's measured figures to compute (a page that shows fewer); the others
    are left out, and those computed are what the whole comparison has.

    Every figure is what ``stats.summarize``, ``stats.compare_to_reference``
    and ``stats.overhead`` give, computed at once for the whole comparison
    (``stats.summaries``, ``stats.compare_families``, ``stats.ratios``).
    An answer computed once is kept in this process (``_MEMO``) and given
    again, the same object, while every input it was computed from is
    unchanged: readers must not change it.

    Queries: one (the ids of the results it would read, its key), whatever
    the number of runs, when the answer is kept; to compute it, one more
    (the results with their values and their listed host baselines'), and
    one for results stored without values and one for results whose main
    direction is not their reference's (``_series``).
    """
    runs = list(runs)
    if not runs:
        raise ValueError("a comparison needs at least one run")
    if reference is None:
        reference = runs[0]
    if reference.pk not in {r.pk for r in runs}:
        raise ValueError("the reference run must be one of the compared runs")
    margin = equivalence_percent()
    where, params = _results_where(runs)
    kept = _kept()
    if not kept.budget:
        return _computed(runs, reference.pk, figures, margin, where, params)
    key = (
        tuple((r.pk, r.created, r.baseline_id, *_run_label(r).values()) for r in runs),
        reference.pk,
        figures,
        margin,
        _result_ids(where, params),
    )
    data = kept.get(key)
    if data is None:
        data = _computed(runs, reference.pk, figures, margin, where, params)
        kept.put(key, data, _figure_count(data))
    return data


# Comparisons computed in this process, by everything they are computed from
# (``memo``): each run's id, creation time, baseline and label (``Run.__str__``
# included), the reference, the ``figures`` chooser, the equivalence margin,
# and the ids of the results read, whose values never change once stored (a
# baseline made private or hidden, a run's result set changed: other ids).
# Bounded by the number of run figures kept (``BENCHDB_COMPARISON_MEMO``,
# 0 keeps none): a 10-run comparison of the standard profile has 831 (1.7 MiB).
_MEMO = memo.Memo(0)


def _kept() -> memo.Memo:
    _MEMO.budget = int(getattr(settings, "BENCHDB_COMPARISON_MEMO", 0))
    return _MEMO


def _figure_count(data: dict) -> int:
    """A comparison's size as its memo counts it: its run figures."""
    return 1 + sum(len(m["runs"]) for t in data["tests"] for m in t["metrics"])


def _computed(
    runs: list[Run],
    ref_id: int,
    figures: Callable[[str, str, list[str]], Container[str]] | None,
    margin: float,
    where: str,
    params: list,
) -> dict:
    """``build_comparison``'s answer, computed."""
    run_ids = [r.pk for r in runs]
    others = [rid for rid in run_ids if rid != ref_id]
    baseline_of = {r.pk: r.baseline_id for r in runs if r.baseline_id}
    by_key: dict[str, dict[int, tuple]] = defaultdict(dict)
    for row in _comparison_results(where, params):
        by_key[row[6]][row[1]] = row
    weaker = _by_workload(by_key, run_ids)
    shared = {k: v for k, v in by_key.items() if all(rid in v for rid in run_ids)}
    series = _series(
        (per_run[rid], per_run[ref_id][7])
        for per_run in shared.values()
        for rid in run_ids
    )
    # One Sample per result and figure; a host may serve several guests.
    samples: dict[tuple, stats.Sample] = {}
    Sample = stats.Sample
    # A guest result's stored overheads, read once (None: not stored for its
    # baseline and this direction); the pairs to compute for the others.
    stored: dict[int, dict | None] = {}
    unknown = []
    # First what to compute, in display order; then every figure at once.
    tests, summarised, families, pairs = [], [], [], []
    for key, per_run in sorted(shared.items(), key=_sort_key):
        ref_row = per_run[ref_id]
        direction = ref_row[7]
        rows = [per_run[rid] for rid in run_ids]
        hosts = [per_run.get(baseline_of.get(rid)) for rid in run_ids]
        raws = [series[row[0]] for row in rows]
        measured = [m for i, m in _METRICS if any(raw[i] for raw in raws)]
        wanted = (
            measured if figures is None else figures(ref_row[2], ref_row[4], measured)
        )
        metrics = []
        for i, metric in _METRICS:
            if metric not in measured or metric not in wanted:
                continue
            info = MAIN_METRICS[metric]
            hib = info["higher_is_better"]
            percentile = metric in PERCENTILE_METRICS
            entries, own = [], []
            for rid, row, raw, host in zip(run_ids, rows, raws, hosts, strict=True):
                values = raw[i]
                sample = samples[row[0], metric] = Sample(values, not percentile)
                own.append(sample)
                entry = _BLANK_ENTRY.copy()
                entry["run"] = rid
                entry["n"] = len(values)
                entry["values"] = values
                entries.append(entry)
                if percentile:
                    _fill_range(entry, sample)
                    continue
                summarised.append((entry, sample))
                if host is None:
                    continue
                known = stored.get(row[0], _UNREAD)
                if known is _UNREAD:
                    known = stored[row[0]] = _stored_overhead(
                        row[9], host[1], direction
                    )
                if known is None:
                    unknown.append((entry, hib, sample, host, direction, i, metric))
                elif metric in known:
                    entry["overhead"] = dict(
                        zip(OVERHEAD_FIELDS, known[metric], strict=True)
                    )
                else:  # neither side measured it
                    pairs.append((entry, hib, _NO_VALUES, sample))
            if not percentile:
                ref_sample = own[run_ids.index(ref_id)]
                rest = [s for rid, s in zip(run_ids, own, strict=True) if rid != ref_id]
                families.append((entries, hib, ref_sample, rest))
            metrics.append(
                {
                    "metric": metric,
                    "unit": info["unit"],
                    "higher_is_better": hib,
                    "kind": "percentile" if percentile else "figure",
                    "runs": entries,
                }
            )
        tests.append(
            {
                "test_id": ref_row[2],
                "title": ref_row[3] or ref_row[2],
                "group": ref_row[4],
                "tool": ref_row[5],
                "comparability_key": key,
                "direction": direction,
                "main_metric": main_metric(ref_row[2]),
                "metrics": metrics,
                "weaker": weaker.get(key, []),
            }
        )
    summary = stats.summary_rows([own for _e, own in summarised])
    for (entry, own), (m, sd, gmean, low, high, note) in zip(
        summarised, summary, strict=True
    ):
        entry["mean"] = m
        entry["gmean"] = gmean
        entry["stdev"] = sd
        entry["ci95_low"] = low
        entry["ci95_high"] = high
        entry["ci95_too_wide"] = stats.too_wide(low, high)
        entry["min"] = own.min
        entry["max"] = own.max
        entry["note"] = note
    answers = stats.family_parts(
        [(ref, rest, hib) for _entries, hib, ref, rest in families], margin
    )
    better_of = {stats.FASTER: True, stats.SLOWER: False}
    for (entries, hib, _ref, _rest), family in zip(families, answers, strict=True):
        by_run = dict(zip(others, family, strict=True))
        for entry in entries:
            parts = by_run.get(entry["run"])
            if parts is None:
                continue
            # ``stats.compare_families``' answer is {**r, p_adjusted, p_text,
            # family_size, **v}: its fields read from the parts.
            r, p_adjusted, p_text, _size, v = parts
            entry["delta_percent"] = v["percent"]
            entry["ratio"] = r["ratio"]
            entry["ratio_low"] = r["low"]
            entry["ratio_high"] = r["high"]
            entry["ratio_too_wide"] = stats.too_wide(r["low"], r["high"])
            entry["p_value"] = r["p"]
            entry["p_adjusted"] = p_adjusted
            entry["p_text"] = p_text
            entry["verdict"] = v["verdict"]
            entry["verdict_text"] = v["text"]
            entry["repeats_needed"] = v["repeats_needed"]
            entry["better"] = better_of.get(v["verdict"]) if hib is not None else None
    if unknown:
        hosts = _series({u[3][0]: (u[3], u[4]) for u in unknown}.values())
        for entry, hib, sample, host, _direction, i, metric in unknown:
            host_sample = samples.get((host[0], metric))
            if host_sample is None:
                host_sample = samples[host[0], metric] = Sample(hosts[host[0]][i])
            pairs.append((entry, hib, host_sample, sample))
    overheads = stats.ratios([(host, own) for _e, _h, host, own in pairs])
    for (entry, hib, _host, _own), r in zip(pairs, overheads, strict=True):
        entry["overhead"] = stats.overhead_of(r, hib)
    not_shared = sorted(
        {
            per_run[next(iter(per_run))][2]
            for per_run in by_key.values()
            if any(rid in per_run for rid in run_ids)
        }
        - {t["test_id"] for t in tests}
    )
    return {
        "runs": [_run_label(r) for r in runs],
        "reference": ref_id,
        "equivalence_percent": margin,
        "interval_explanation": stats.INTERVAL_EXPLANATION,
        "verdict_explanation": stats.VERDICT_EXPLANATION.format(margin=margin),
        "tests": tests,
        "not_shared": not_shared,
        "weaker": _weaker_summary(tests),
    }


# The key of a test compared by its workload alone (``_by_workload``).
WORKLOAD_KEY = "workload|{}"
IMPORTED_KEY = "imported/"


def _by_workload(by_key: dict[str, dict[int, tuple]], run_ids: list) -> dict:
    """Imported results (``imports``: key ``imported/1|<test id>|...``) join
    the results of the same test id under one key, ``workload|<test id>``,
    where no key is shared by every run but each run has the test once: an
    imported CrystalDiskMark RND4K Q32T1 read then compares with an agent's
    ``fio-rand-read-4k-q32t1``.  Returns, per merged key, why the comparison
    is weaker than between two agent runs (``workload.differences``, and the
    import's declared configuration).  Changes ``by_key`` in place."""
    per_test: dict[str, list[str]] = defaultdict(list)
    for key, per_run in by_key.items():
        per_test[per_run[next(iter(per_run))][2]].append(key)
    merged: dict[str, list] = {}
    for test_id, keys in per_test.items():
        if len(keys) < 2 or not any(k.startswith(IMPORTED_KEY) for k in keys):
            continue
        if any(all(rid in by_key[k] for rid in run_ids) for k in keys):
            continue
        runs: dict[int, tuple] = {}
        for k in keys:
            for rid, row in by_key[k].items():
                if rid in runs:
                    runs = {}
                    break
                runs[rid] = row
            else:
                continue
            break
        if not all(rid in runs for rid in run_ids):
            continue
        for k in keys:
            del by_key[k]
        by_key[WORKLOAD_KEY.format(test_id)] = runs
        merged[WORKLOAD_KEY.format(test_id)] = [row[0] for row in runs.values()]
    if not merged:
        return {}
    facts = {
        pk: (options or {}, source, tool_version)
        for pk, options, source, tool_version in Result.objects.filter(
            pk__in=[pk for pks in merged.values() for pk in pks]
        ).values_list("pk", "options", "run__source", "tool_version")
    }
    out = {}
    for key, pks in merged.items():
        measured = [pk for pk in pks if facts[pk][1] != "imported"]
        imported = [pk for pk in pks if facts[pk][1] == "imported"]
        reasons = [
            "compared by workload: "
            + ", ".join(sorted({facts[pk][2] or "an import" for pk in imported}))
            + " declared, not verified"
        ]
        base = facts[measured[0]][0] if measured else facts[imported[0]][0]
        for pk in imported:
            for reason in workload.differences(facts[pk][0], base):
                if reason not in reasons:
                    reasons.append(reason)
        out[key] = reasons
    return out


def _weaker_summary(tests: list[dict]) -> list[dict]:
    """The tests compared by workload, grouped by their reasons (``reasons``,
    ``tests``: titles), so a page says each set of reasons once."""
    groups: dict[tuple, list] = {}
    for test in tests:
        if test["weaker"]:
            groups.setdefault(tuple(test["weaker"]), []).append(test["title"])
    return [{"reasons": list(r), "tests": t} for r, t in groups.items()]


# The main metrics with their place in ``_comparison_results``' values.
_METRICS = tuple(enumerate(MAIN_METRICS))
PERCENTILE_NOTE = "percentiles of repeats are not averaged: range shown"
_SUMMARY_KEYS = (
    "mean",
    "gmean",
    "stdev",
    "ci95_low",
    "ci95_high",
    "min",
    "max",
    "note",
)
# One run's figure in a comparison, before its statistics are filled in
# (``run``, ``n`` and ``values`` first): copied for each.
_BLANK_ENTRY = {
    "run": None,
    "n": 0,
    "mean": None,
    "gmean": None,
    "stdev": None,
    "ci95_low": None,
    "ci95_high": None,
    "ci95_too_wide": False,
    "min": None,
    "max": None,
    "note": None,
    "values": None,
    "delta_percent": None,
    "ratio": None,
    "ratio_low": None,
    "ratio_high": None,
    "ratio_too_wide": False,
    "p_value": None,
    "p_adjusted": None,
    "p_text": None,
    "verdict": None,
    "verdict_text": None,
    "repeats_needed": None,
    "better": None,
    "overhead": None,
}


def _blank_entry(run_id: int, values: list) -> dict:
    """One run's figure in a comparison, before its statistics are filled in."""
    entry = _BLANK_ENTRY.copy()
    entry["run"] = run_id
    entry["n"] = len(values)
    entry["values"] = values
    return entry


def _fill_summary(entry: dict, summary: dict) -> None:
    for k in _SUMMARY_KEYS:
        entry[k] = summary[k]


def _fill_range(entry: dict, sample: stats.Sample) -> None:
    """Percentiles of repeats are never averaged: each value and the range."""
    entry["min"], entry["max"] = sample.min, sample.max
    entry["note"] = PERCENTILE_NOTE


def _entry(run_id: int, values: list, percentile: bool) -> dict:
    """One run's figure in a comparison, before it is set against the
    reference (as ``build_comparison`` fills it in)."""
    entry = _blank_entry(run_id, values)
    sample = stats.Sample(values)
    if percentile:
        _fill_range(entry, sample)
    else:
        _fill_summary(entry, stats.summaries([sample])[0])
    return entry


def extremes(data: dict) -> list[dict]:
    """Per test and figure: the best and worst run, among real differences only.

    ``fastest`` is the run most significantly better than the reference
    (verdict "faster"), ``slowest`` the one most significantly worse; None
    when no run differs from the reference beyond noise.  ``significant``
    lists the runs with a real difference.
    """
    out = []
    for test in data["tests"]:
        for m in test["metrics"]:
            if m.get("kind") == "percentile" or m["higher_is_better"] is None:
                continue
            faster = [e for e in m["runs"] if e["verdict"] == stats.FASTER]
            slower = [e for e in m["runs"] if e["verdict"] == stats.SLOWER]
            up = m["higher_is_better"]

            def how_much(e, up=up):
                return e["ratio"] if up else 1.0 / e["ratio"]

            out.append(
                {
                    "test": test["title"],
                    "test_id": test["test_id"],
                    "metric": m["metric"],
                    "fastest": max(faster, key=how_much)["run"] if faster else None,
                    "slowest": min(slower, key=how_much)["run"] if slower else None,
                    "significant": [e["run"] for e in faster + slower],
                }
            )
    return out


def pair_overheads(pairs: Sequence[tuple]) -> list[dict]:
    """``stats.overhead`` for (guest result id, host result id, direction,
    metric) tuples, in order: guest ÷ host with its interval, every pair's
    at once (``stats.ratios``).  One query (two with results stored without
    values): of main metrics only their values are read."""
    ids = list(dict.fromkeys(i for g, h, _d, _m in pairs for i in (g, h)))
    if all(metric in MAIN_METRICS for *_ids, metric in pairs):
        values = _main_metric_values(ids)
        missing = [pk for pk in ids if values.get(pk) is None]
        if missing:
            values.update(_measured_values(missing))
    else:
        values = repeat_values(ids)

    def sample(pk, direction, metric) -> stats.Sample:
        return stats.Sample(
            ((values.get(pk) or {}).get(direction) or {}).get(metric) or []
        )

    ratios = stats.ratios([(sample(h, d, m), sample(g, d, m)) for g, h, d, m in pairs])
    return [
        stats.overhead_of(r, higher_is_better(m))
        for r, (_g, _h, _d, m) in zip(ratios, pairs, strict=True)
    ]


# Stored overheads -------------------------------------------------------------
# A guest result's overhead against its baseline's result of the same
# comparability key depends on nothing but the two results' values, which
# never change once stored.  Ingest computes it when it links the pair (a
# guest after its host: ``attach_overheads``, before its results are
# inserted; otherwise ``store_overheads``, ``ingest.link_pair``) and keeps it in
# ``Result.overhead``: {"baseline": the baseline run's id, "direction": the
# guest's main direction, "metrics": {metric: ``stats.overhead_of``'s answer
# as a list in ``OVERHEAD_FIELDS`` order}}, for each main metric but the
# percentiles that either side measured.  It answers only while the run's
# baseline is that run and for that direction; otherwise (a baseline changed
# by hand, results stored before migration 0014 and not yet backfilled by
# ``manage.py store_overheads``) the overhead is computed as before, from the
# same values with the same functions, so both give the same answer
# (tests/api/test_stored_overheads.py).  Ten guest runs of the bench at a
# million results, each with its baseline: ``build_comparison`` took 20.5
# ms computing their 700 overheads and takes 16.5 reading them.
OVERHEAD_FIELDS = (
    *("ratio", "low", "high", "p", "n_guest", "n_host", "percent", "slower"),
    "text",
)
_N_GUEST, _N_HOST = OVERHEAD_FIELDS.index("n_guest"), OVERHEAD_FIELDS.index("n_host")
OVERHEAD_METRICS = tuple(m for m in MAIN_METRICS if m not in PERCENTILE_METRICS)
# Their place in ``main_values``' lists.
_OVERHEAD_INDEX = tuple((i, m) for i, m in _METRICS if m in OVERHEAD_METRICS)
_UNREAD = object()
_NO_VALUES = stats.Sample(())


def _stored_overhead(raw, baseline_id: int, direction: str | None) -> dict | None:
    """A result's stored overheads (``Result.overhead``, as JSON or parsed)
    by metric, if they were computed against ``baseline_id`` in
    ``direction`` (and hold ``OVERHEAD_FIELDS``); None otherwise."""
    found = _json(raw)
    if (
        not found
        or found.get("baseline") != baseline_id
        or found.get("direction") != direction
        or direction is None
    ):
        return None
    metrics = found.get("metrics") or {}
    if all(len(v) == len(OVERHEAD_FIELDS) for v in metrics.values()):
        return metrics
    return None


def _finite(values: list) -> bool:
    return all(not (type(v) is float and v - v) for v in values)


def _overheads(
    paired: Sequence[tuple], other: dict | None = None
) -> dict[object, dict | None]:
    """What ``Result.overhead`` holds for each guest result of ``paired``:
    (its key, baseline run id, main direction, its main metrics' values in
    that direction, its host result's: ``main_values``' lists, or None for a
    side whose values are to be read by ``pair_overheads``); ``other`` maps
    the keys of those, their guest result ids, to their host result ids.
    None for one with a non-finite figure."""
    other = other or {}
    direct, todo = [], []
    for key, _b, direction, guest_lists, host_lists in paired:
        if guest_lists is None or host_lists is None:
            todo.extend((key, other[key], direction, m) for m in OVERHEAD_METRICS)
            continue
        for i, metric in _OVERHEAD_INDEX:
            guest_sample = stats.Sample(guest_lists[i])
            direct.append((key, metric, stats.Sample(host_lists[i]), guest_sample))
    found = {
        (key, metric): stats.overhead_of(r, MAIN_METRICS[metric]["higher_is_better"])
        for (key, metric, _h, _g), r in zip(
            direct, stats.ratios([(h, g) for _k, _m, h, g in direct]), strict=True
        )
    }
    if todo:
        for (key, _h, _d, metric), answer in zip(
            todo, pair_overheads(todo), strict=True
        ):
            found[key, metric] = answer
    out: dict[object, dict | None] = {}
    for key, baseline, direction, _g, _h in paired:
        metrics = {}
        for metric in OVERHEAD_METRICS:
            answer = found[key, metric]
            if answer["n_guest"] or answer["n_host"]:
                metrics[metric] = [answer[k] for k in OVERHEAD_FIELDS]
        finite = all(_finite(v) for v in metrics.values())
        out[key] = (
            {"baseline": baseline, "direction": direction, "metrics": metrics}
            if finite
            else None
        )
    return out


def store_overheads(run_ids: Iterable[int]) -> int:
    """Compute and store (``Result.overhead``) the overhead of each result of
    these runs against its run's baseline's result of the same
    comparability key, in the guest's main direction; the others' (no
    baseline, no such result, a non-finite figure) are cleared.  What
    ``pair_overheads`` gives, which is what a comparison and the run page
    compute when none is stored: from both results' ``main_values`` when the
    host's main direction is the guest's (as nearly always), else through
    ``pair_overheads`` itself.  Returns how many results got one.  Three
    queries (more for a host read in another direction)."""
    guests = list(
        Result.objects.filter(run_id__in=list(run_ids), run__role="guest")
        .order_by("pk")
        .values_list("pk", "comparability_key", "run__baseline_id", "main_values")
    )
    baselines = {b for _pk, _key, b, _mv in guests if b is not None}
    host_of = {
        (run_id, key): (pk, main_values)
        for pk, run_id, key, main_values in Result.objects.filter(
            run_id__in=baselines
        ).values_list("pk", "run_id", "comparability_key", "main_values")
    }
    paired, other = [], {}
    for pk, key, baseline, main_values in guests:
        host, host_values = host_of.get((baseline, key), (None, None))
        direction = main_values[0] if main_values else None
        if host is None or not isinstance(direction, str):
            continue
        guest_lists = main_values[1]
        host_lists = host_values[1] if host_values else None
        if guest_lists is None or host_lists is None or host_values[0] != direction:
            guest_lists = host_lists = None
            other[pk] = host
        paired.append((pk, baseline, direction, guest_lists, host_lists))
    overhead = dict.fromkeys((pk for pk, *_rest in guests), None)
    overhead.update(_overheads(paired, other))
    if overhead:
        # One JSON document of them all ({result id: overhead or null}): an
        # array of texts is escaped by psycopg with a regular expression,
        # which took a third of this function.
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE results_result r SET overhead = NULLIF(v.o, 'null') "
                "FROM jsonb_each(%s::jsonb) AS v(id, o) WHERE r.id = v.id::bigint",
                [json.dumps(overhead, allow_nan=False)],
            )
    return sum(1 for v in overhead.values() if v is not None)


def attach_overheads(results: Sequence[Result], baseline_id: int) -> bool:
    """Set the ``overhead`` of a guest's new results, before they are
    inserted, against its baseline's results (``store_overheads``' answer,
    with one query and no update): their values are in their statistics,
    the host's in its ``main_values``.  False, and nothing set, when a host
    result must be read another way (stored without values, or its main
    direction is not the guest's): then ``store_overheads`` after the
    insert."""
    hosts = dict(
        Result.objects.filter(run_id=baseline_id).values_list(
            "comparability_key", "main_values"
        )
    )
    paired = []
    for index, res in enumerate(results):
        if res.comparability_key not in hosts:
            continue
        doc = res.stats if isinstance(res.stats, dict) else {}
        direction = doc.get("main_direction")
        if not isinstance(direction, str):
            continue
        host_values = hosts[res.comparability_key]
        values = doc.get("values")
        if (
            not isinstance(values, dict)
            or not host_values
            or host_values[0] != direction
            or host_values[1] is None
        ):
            return False
        # What the trigger cuts from the statistics (migration 0013).
        in_direction = values.get(direction)
        guest_lists = [
            in_direction.get(m) if isinstance(in_direction, dict) else None
            for m in MAIN_METRICS
        ]
        paired.append((index, baseline_id, direction, guest_lists, host_values[1]))
    for index, value in _overheads(paired).items():
        results[index].overhead = value
    return True


def result_overheads(results: Sequence[Result], baselines: dict) -> dict:
    """Guest/host overhead with its interval, for every paired test.

    ``results`` are a guest run's results, ``baselines`` its host baseline's
    results by comparability key.  Returns result id -> metric -> the
    ``stats.overhead`` answer, for each main metric both sides measured in
    the main direction (percentiles excluded).  The repeat values are the
    ones ingest stored in the results' statistics, already loaded (a query
    only for results stored before they were kept: ``repeat_values``); the
    t functions are called once for every pair (``stats.ratios``).
    """
    pairs = [
        (res, baselines[res.comparability_key])
        for res in results
        if res.comparability_key in baselines
    ]
    values = loaded_repeat_values(r for pair in pairs for r in pair)
    missing = [r.pk for pair in pairs for r in pair if r.pk not in values]
    if missing:
        values.update(repeat_values(missing))
    out: dict[int, dict] = {}
    todo = []  # (guest result id, metric, guest sample, host sample)
    for guest, host in pairs:
        direction = (guest.stats or {}).get("main_direction")
        known = _stored_overhead(guest.overhead, host.run_id, direction)
        if known is not None:
            # Those both sides measured, as below.
            out[guest.pk] = {
                m: dict(zip(OVERHEAD_FIELDS, known[m], strict=True))
                for m in OVERHEAD_METRICS
                if m in known and known[m][_N_GUEST] and known[m][_N_HOST]
            }
            continue
        out[guest.pk] = {}
        for metric in MAIN_METRICS:
            if metric in PERCENTILE_METRICS:
                continue
            g = values.get(guest.pk, {}).get(direction, {}).get(metric, [])
            h = values.get(host.pk, {}).get(direction, {}).get(metric, [])
            if g and h:
                todo.append((guest.pk, metric, stats.Sample(g), stats.Sample(h)))
    # stats.overhead(g, h) is overhead_of(ratio(host, guest)), pair by pair.
    found = stats.ratios([(h, g) for _pk, _m, g, h in todo])
    for (pk, metric, _g, _h), r in zip(todo, found, strict=True):
        out[pk][metric] = stats.overhead_of(r, MAIN_METRICS[metric]["higher_is_better"])
    return out


def loaded_repeat_values(results: Iterable[Result]) -> dict[int, dict[str, dict]]:
    """``repeat_values`` of results whose statistics are loaded already and
    hold them (``stats["values"]``, what ``repeat_values`` reads in SQL)."""
    out = {}
    for res in results:
        if "stats" in res.__dict__:  # not deferred: no query
            loaded = res.stats
            found = loaded.get("values") if isinstance(loaded, dict) else None
            if isinstance(found, dict):
                out[res.pk] = found
    return out


@functools.lru_cache(maxsize=1024)
def main_metric(test_id: str) -> str | None:
    """The figure a test is about (``iops`` for random I/O, ``bw_bytes`` for
    sequential, ``lat_mean_ns`` for ioping and fsync), whatever its origin
    (``workload.main_metric``), so a chart can lead with it; None when the
    test id does not say."""
    metric = workload.main_metric(test_id)
    return metric if metric in MAIN_METRICS else None


def _sort_key(item: tuple[str, dict[int, tuple]]) -> tuple:
    """Group, test id, key: of the key's first result (``_comparison_results``)."""
    per_run = item[1]
    first = per_run[next(iter(per_run))]
    return (first[4], first[2], item[0])


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
    key and ``metric`` figure (``similar_systems``' ``found``), read with
    the run instead of in a query of their own."""
    mine = Result.objects.filter(run=OuterRef("pk"), test_id=test_id).order_by("pk")
    return {
        "similar_key": Subquery(mine.values("comparability_key")[:1]),
        "similar_value": Subquery(mine.values(metric_column(metric))[:1]),
    }


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
    return _population_of(comparability_key, metric, disk_type, match, None)


def _population_of(comparability_key, metric, disk_type, match, runs) -> dict:
    column = metric_column(metric)
    qs = _similar_results(
        comparability_key,
        column,
        disk_type,
        match,
        comparable_runs() if runs is None else runs,
    )
    return {
        "population": list(qs.order_by(column).values_list(column, flat=True)),
        "distribution": _distribution(qs, column),
    }


def similar_systems(
    run: Run,
    test_id: str,
    metric: str = "iops",
    match: Sequence[str] = (),
    runs: QuerySet | None = None,
    found: tuple | None = None,
) -> dict:
    """Where a run's result stands among comparable runs on the same disk type.

    The population is every visible, not suspect run (or ``runs``) with a
    result of the
    same comparability key, on hardware of the same disk type, optionally
    also with the same values of the facets in ``match`` (see
    ``SIMILAR_MATCH``).  ``percentile`` is the share of the population at or
    below the run's value (ties count half); ``better_than_percent`` turns it
    round for latencies, where lower is better.  The run itself is part of
    the population when it is visible.  Without ``runs`` the population is
    ``similar_population``'s stored answer, and ``freshness`` says as of when.
    ``found``: the run's (comparability key, figure) of ``test_id`` and
    ``metric`` when the caller read them with the run (``similar_result``;
    a key of None: no such result), else they are read here.
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
            .values_list("comparability_key", column)
            .first()
        )
    elif found[0] is None:
        found = None
    if found is None:
        raise LookupError(f"run {run.pk} has no test {test_id!r}")
    comparability_key, value = found
    disk_type = run.hardware.disk_type if run.hardware_id else "unknown"
    pairs = [[facet, getattr(run, facet)] for facet in match]
    args = (comparability_key, metric, disk_type if run.hardware_id else None)
    if runs is None:
        found, freshness = answers.similar_population.with_freshness(*args, pairs)
    else:
        found, freshness = _population_of(*args, pairs, runs), None
    population = found["population"]
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
        "freshness": answer_cache.freshness_of(freshness),
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


def stored_aggregates(
    filters: list,
    test_id: str,
    metric: str,
    group_by: str | None,
    comparability_key: str | None,
) -> dict:
    """``reads.aggregates`` over run filters given as [[name, [values]], …]
    (``answer_cache.query_items``): stored and served by the data version."""
    from benchdb.results import reads

    return reads.aggregates(
        answer_cache.query_dict(filters),
        test_id,
        metric,
        group_by,
        comparability_key=comparability_key,
    )
