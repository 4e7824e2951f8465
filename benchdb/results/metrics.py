"""The metrics runs are measured in, and the per-repeat values behind them.

What each of the agent's metrics means for a reader (its unit, whether more
is better, the figure a test is about), the Result column a per-run figure
lives in, and how the per-repeat values of results are read: from the
statistics ingest stored, or rebuilt from the measurements.  Everything that
compares, ranks or aggregates results (``compare``, ``overheads``,
``similar``, ``aggregates``, ``population``) starts here; this module
imports none of them.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db import connection

from benchdb.results import stats
from benchdb.results.models import METRIC_FIELDS, Measurement, Result, read_json
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

# Metrics that have a column on Result (the run's figure of the main
# direction, ``stats.centre``), so ranks and aggregates are computed in SQL.
METRIC_COLUMNS = {
    "iops": "iops_mean",
    "bw_bytes": "bw_bytes_mean",
    "lat_mean_ns": "lat_mean_ns_mean",
}
# The main metrics with their place in ``main_values``' lists.
MAIN_METRIC_INDEX = tuple(enumerate(MAIN_METRICS))


def metric_column(metric: str) -> str:
    """The Result column of a metric; ValueError names the allowed ones."""
    try:
        return METRIC_COLUMNS[metric]
    except KeyError:
        allowed = ", ".join(METRIC_COLUMNS)
        raise ValueError(f"unknown metric {metric!r}; one of {allowed}") from None


@functools.lru_cache(maxsize=1024)
def main_metric(test_id: str) -> str | None:
    """The figure a test is about (``iops`` for random I/O, ``bw_bytes`` for
    sequential, ``lat_mean_ns`` for ioping and fsync), whatever its origin
    (``workload.main_metric``), so a chart can lead with it; None when the
    test id does not say."""
    metric = workload.main_metric(test_id)
    return metric if metric in MAIN_METRICS else None


def workload_test_id(tool: str, direction, options: dict | None) -> str:
    """The test a published result is by its workload (``workload.identify``
    from the options the source states): a seed's ``dd bs=1M
    conv=fdatasync`` is the agent's ``dd-write-1m-fdatasync``, its fio
    randread 4k at iodepth 32 the agent's ``fio-rand-read-4k-q32t1``.  A
    published source keeps its own test ids; agent and imported results are
    their test id already (``imports`` names them by their workload).
    Comparisons and the lists' headline figures both read it."""
    return workload.identify(tool, [direction], options or {})


def equivalence_percent() -> float:
    """The "no difference larger than Y%" margin (``BENCHDB_EQUIVALENCE_PERCENT``)."""
    return float(
        getattr(settings, "BENCHDB_EQUIVALENCE_PERCENT", stats.EQUIVALENCE_PERCENT)
    )


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
        out.update(measured_values(missing))
    return out


def measured_values(result_ids: Sequence[int]) -> dict[int, dict[str, dict]]:
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


def json_value(value):
    """A jsonb column as psycopg hands it over (text, or already parsed), read
    as json.loads reads it (``read_json``)."""
    if isinstance(value, bytes):
        value = value.decode()
    return read_json(value) if isinstance(value, str) else value


def main_metric_values(result_ids: Sequence[int]) -> dict[int, dict | None]:
    """``repeat_values`` of some results cut to the main metrics, read in
    PostgreSQL (``_DIRECTIONS_SQL``): None for a result stored without
    values.  One query."""
    with connection.cursor() as cursor:
        cursor.execute(_DIRECTIONS_SQL, [list(result_ids)])
        return {pk: json_value(v) for pk, v in cursor.fetchall()}


def in_direction(values: dict | None, direction) -> list:
    """``repeat_values``' answer for one result, in one direction, as the
    main metrics' lists in ``MAIN_METRICS`` order."""
    per_metric = (values or {}).get(direction) or {}
    return [per_metric.get(metric) or [] for metric in MAIN_METRICS]
