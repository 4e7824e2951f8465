"""Rows: a run, a result, a hardware row and a similar-system answer as the
one dict every reader is given.

Each resource is turned into its dict here and nowhere else (healthchecks'
``Check.to_dict()``): the API returns these dicts as they are, and its
serializers (``benchdb.api.serializers``) keep their declared fields for
input and for the OpenAPI schema only; tests/api/test_fast_rows.py holds
these dicts to that schema, key for key.  Adding a column means adding it
here and to the serializer's field list, which that test then checks.

A row's own fields are declared once (``HARDWARE_FIELDS``, ``RUN_FIELDS``,
``RESULT_FIELDS``: the ORM path each is read from and how its value is
written), and the builders read them from a mapping of those paths: a
list's ``values()`` query (``reads.list_rows``, no model instances) or a
loaded instance (``values_of``).  The exports write their columns with the
same fields (``benchdb.results.exports``), so a run's or a result's value
is written the same way in the API, the pages and an export.  Values are
written as DRF's fields write them (ISO 8601 datetimes in UTC with ``Z``,
floats as floats), directly: DRF's fields are far slower per row.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.results.models import METRIC_FIELDS
from benchdb.results.stats import too_wide
from benchdb.results.vocab import RUN_ENVIRONMENT

_UTC = datetime.UTC


def iso_datetime(value) -> str | None:
    """A datetime as DRF's ``DateTimeField`` writes it: ISO 8601 in UTC (the
    only time zone here: ``TIME_ZONE``, nothing activates another), ``Z``
    for its offset; a naive one taken as UTC.  Written directly: every one
    read from PostgreSQL is in UTC already, and DRF's time-zone lookups
    were most of its cost."""
    if value is None:
        return None
    if value.tzinfo is not _UTC:
        if value.tzinfo is None:
            value = value.replace(tzinfo=_UTC)
        value = value.astimezone(_UTC)
    return value.isoformat()[:-6] + "Z"


def _float(value) -> float | None:
    return float(value) if value is not None else None


def _str_dict(value) -> dict | None:
    if value is None:
        return None
    return {str(k): str(v) if v is not None else None for k, v in value.items()}


def _strs(value) -> list | None:
    if value is None:
        return None
    return [str(v) if v is not None else None for v in value]


def _is_set(value) -> bool:
    return value is not None


# A row's own field: the ORM path it is read from, and how its value is
# written (None: as read).
Field = tuple[str, Callable[[Any], Any] | None]


def values_of(obj, paths: Iterable[str]) -> dict:
    """A loaded instance's values at ORM ``paths`` (``hardware__disk_type``,
    ``stats__main_direction`` into a JSON column), as ``QuerySet.values``
    reads them: None past a None relation or a missing JSON key."""
    out = {}
    for path in paths:
        value = obj
        for part in path.split("__"):
            if value is None:
                break
            value = value.get(part) if isinstance(value, dict) else getattr(value, part)
        out[path] = value
    return out


def fields(values: Mapping, spec: Mapping[str, Field], prefix: str = "") -> dict:
    """The fields of ``spec`` written from ``values`` (ORM path -> value,
    each path after ``prefix``)."""
    out = {}
    for name, (path, write) in spec.items():
        value = values[prefix + path]
        out[name] = value if write is None else write(value)
    return out


# Hardware --------------------------------------------------------------------


class HardwareRow(TypedDict):
    id: int
    cpu_model: str | None
    cpu_sockets: int | None
    cpu_cores: int | None
    cpu_threads: int | None
    memory_bytes: int | None
    disk_model: str | None
    disk_type: str
    disk_count: int | None
    disk_size_bytes: int | None
    raid_controller: str
    raid_level: str
    controller_cache_bytes: int | None
    controller_battery: bool | None
    run_count: int | None


HARDWARE_FIELDS = {
    "id": ("id", None),
    "cpu_model": ("cpu_model__name", None),
    **{name: (name, None) for name in ("cpu_sockets", "cpu_cores", "cpu_threads")},
    "memory_bytes": ("memory_bytes", None),
    "disk_model": ("disk_model__name", None),
    **{name: (name, None) for name in ("disk_type", "disk_count", "disk_size_bytes")},
    "raid_controller": ("raid_controller", None),
    "raid_level": ("raid_level", None),
    "controller_cache_bytes": ("controller_cache_bytes", None),
    "controller_battery": ("controller_battery", None),
}
HARDWARE_PATHS = tuple(path for path, _write in HARDWARE_FIELDS.values())


def hardware_values(hw) -> dict:
    """A loaded hardware row's ``HARDWARE_PATHS``, and its ``run_count``
    where the list annotated it."""
    return {
        **values_of(hw, HARDWARE_PATHS),
        "run_count": getattr(hw, "run_count", None),
    }


def hardware_row(values: Mapping, prefix: str = "") -> HardwareRow:
    """A hardware row from its ``HARDWARE_PATHS`` after ``prefix`` (and its
    ``run_count``, when given)."""
    out = fields(values, HARDWARE_FIELDS, prefix)
    run_count = values.get(prefix + "run_count")
    out["run_count"] = int(run_count) if run_count is not None else None
    return out


# Runs ------------------------------------------------------------------------


class RunRow(TypedDict):
    """A run as lists show it (the API's run list, a detail's head); its
    environment's keys are ``vocab.RUN_ENVIRONMENT``, listed here for the
    type checker."""

    id: int
    uuid: str
    url: str
    web_url: str
    title: str
    role: str
    platform: str
    virtualization: str
    hypervisor_version: str
    os_name: str
    kernel: str
    cache_mode: str
    aio_mode: str
    iothread: bool | None
    image_format: str
    storage_backend: str
    disk_bus: str
    guest_filesystem: str
    host_filesystem: str
    hardware: HardwareRow | None
    suite_id: str
    suite_version: str
    profile: str
    agent_version: str
    ran_at: str | None
    source: str
    visibility: str
    pair_id: str
    sweep_id: str
    virtual_host: bool
    baseline: int | None
    suspect: bool
    suspect_reasons: list[str] | None
    hidden: bool
    hidden_reason: str
    owned: bool
    created: str
    updated: str


class RunDetailRow(RunRow):
    """A run with its texts, environment and results (the API's detail)."""

    notes: str
    citation: str
    citation_url: str
    environment: dict | None
    tags: dict | None
    tag_sources: dict | None
    warnings: list | None
    tests: list[ResultRow]


# A run's own fields as lists show them, in the schema's order.
RUN_FIELDS = {
    "id": ("id", None),
    "uuid": ("uuid", str),
    "title": ("title", None),
    **{name: (name, None) for name in RUN_ENVIRONMENT},
    **{name: (name, None) for name in ("suite_id", "suite_version", "profile")},
    "agent_version": ("agent_version", None),
    "ran_at": ("ran_at", iso_datetime),
    **{name: (name, None) for name in ("source", "visibility", "pair_id", "sweep_id")},
    "virtual_host": ("virtual_host", None),
    "suspect": ("suspect", None),
    "suspect_reasons": ("suspect_reasons", _strs),
    "hidden": ("hidden", None),
    "hidden_reason": ("hidden_reason", None),
    "owned": ("owner_id", _is_set),
    "created": ("created", iso_datetime),
    "updated": ("updated", iso_datetime),
}
# What ``run_row`` reads: the run's fields, then its hardware's.
RUN_PATHS = (
    *(path for path, _write in RUN_FIELDS.values()),
    "hardware_id",
    *(f"hardware__{path}" for path in HARDWARE_PATHS),
)

# What a run row links to, by run id: (API URL, page URL), absolute for the
# request answered (``api.serializers.run_links``).
Links = tuple[Callable[[int], str], Callable[[int], str]]


def run_row(values: Mapping, links: Links, baseline: int | None) -> RunRow:
    """A run as lists show it, from its ``RUN_PATHS`` (a ``values()`` row, or
    ``values_of`` a loaded run).  ``baseline``: the host baseline's id if the
    reader may open it, else None (``reads.shown_baseline_id``)."""
    api_url, web_url = links
    pk = values["id"]
    out = fields(values, RUN_FIELDS)
    out["url"] = api_url(pk)
    out["web_url"] = web_url(pk)
    out["hardware"] = (
        hardware_row(values, "hardware__")
        if values["hardware_id"] is not None
        else None
    )
    out["baseline"] = baseline
    return out


def run_detail_row(
    run,
    links: Links,
    baseline: int | None,
    baseline_results: dict | None = None,
    overheads: dict | None = None,
) -> RunDetailRow:
    """A run with its results (``reads.attach_tests`` and
    ``reads.attach_repeats`` applied); ``baseline_results`` and
    ``overheads`` as ``reads.run_overheads`` gives them, for each result's
    guest/host figures."""
    out = run_row(values_of(run, RUN_PATHS), links, baseline)
    env, warnings = run.environment, run.warnings
    out.update(
        {
            "notes": run.notes,
            "citation": run.citation,
            "citation_url": run.citation_url,
            "environment": {str(k): v for k, v in env.items()}
            if env is not None
            else None,
            "tags": _str_dict(run.tags),
            "tag_sources": _str_dict(run.tag_sources),
            "warnings": [
                {str(k): v for k, v in w.items()} if w is not None else None
                for w in warnings
            ]
            if warnings is not None
            else None,
            "tests": [
                result_row(r, baseline_results, overheads) for r in run.results.all()
            ],
        }
    )
    return out


# Results ---------------------------------------------------------------------


class ResultRow(TypedDict):
    test_id: str
    title: str
    group: str
    tool: str
    comparability_key: str
    comparable: bool
    approximate: bool
    options: Any
    command: str
    tool_version: str
    preconditioned: bool
    extra_repeats: int
    repeat_count: int
    main_direction: str | None
    iops_mean: float | None
    bw_bytes_mean: float | None
    lat_mean_ns_mean: float | None
    stats: dict
    repeats: list[dict]
    overhead: dict | None


# A result's own fields, in the schema's order.
RESULT_FIELDS = {
    **{name: (name, None) for name in ("test_id", "title", "group", "tool")},
    "comparability_key": ("comparability_key", None),
    **{name: (name, None) for name in ("comparable", "approximate", "options")},
    **{name: (name, None) for name in ("command", "tool_version")},
    **{name: (name, None) for name in ("preconditioned", "extra_repeats")},
    "repeat_count": ("repeat_count", None),
    "main_direction": ("stats__main_direction", None),
    **{column: (column, _float) for column in METRIC_COLUMNS.values()},
}
RESULT_PATHS = tuple(path for path, _write in RESULT_FIELDS.values())


def result_row(
    res, baseline_results: dict | None = None, overheads: dict | None = None
) -> ResultRow:
    """A result with its statistics and repeats (``res.records`` and
    ``res.raw_formats`` from ``reads.attach_repeats``), and its guest/host
    figures against the baseline's result of the same comparability key."""
    out = fields(values_of(res, RESULT_PATHS), RESULT_FIELDS)
    out["stats"] = result_stats((res.stats or {}).get("directions", {}))
    out["repeats"] = result_repeats(res)
    out["overhead"] = result_overhead(res, baseline_results or {}, overheads or {})
    return out


def result_stats(directions: dict) -> dict:
    """A result's statistics (direction -> metric -> summary) with each
    summary's ``ci95_too_wide``: its interval too wide to estimate anything
    (``stats.too_wide``, the rule every page and the agent's table use)."""
    return {
        direction: {
            metric: {
                **summary,
                "ci95_too_wide": too_wide(
                    summary.get("ci95_low"), summary.get("ci95_high")
                ),
            }
            if isinstance(summary, dict)
            else summary
            for metric, summary in (per_metric or {}).items()
        }
        for direction, per_metric in directions.items()
    }


def result_repeats(res) -> list[dict]:
    """Each repeat's records (job, direction, figures) and raw format."""
    formats = res.raw_formats
    by_repeat: dict[int, list] = {}
    for m in res.records:
        record = {"job": m["job"], "direction": m["direction"]}
        record.update((f, m[f]) for f in METRIC_FIELDS)
        by_repeat.setdefault(m["repeat"], []).append(record)
    return [
        {"repeat": r, "records": recs, "raw_format": formats.get(r)}
        for r, recs in sorted(by_repeat.items())
    ]


def result_overhead(res, baseline_results: dict, overheads: dict) -> dict | None:
    """Guest / host of the stored means, and the intervals of ``overheads``;
    None without a baseline result of the same comparability key."""
    baseline = baseline_results.get(res.comparability_key)
    if baseline is None:
        return None
    out = {"baseline_run": baseline.run_id}
    for metric, column in METRIC_COLUMNS.items():
        guest, host = getattr(res, column), getattr(baseline, column)
        out[metric] = guest / host if guest is not None and host else None
    out["intervals"] = overheads.get(res.pk, {})
    return out


# Similar systems -------------------------------------------------------------


class DistributionRow(TypedDict):
    count: int | None
    min: float | None
    q1: float | None
    median: float | None
    q3: float | None
    max: float | None


class SimilarRow(TypedDict):
    run: int
    test_id: str
    comparability_key: str
    metric: str
    unit: str
    higher_is_better: bool
    disk_type: str
    match: dict | None
    value: float | None
    percentile: float | None
    better_than_percent: float | None
    distribution: DistributionRow
    population: list[float]
    ranked_among: int
    freshness: dict | None


def similar_row(answer: dict) -> SimilarRow:
    """A run's rank among similar systems (``reads.similar``'s answer) as
    served: a None value stays None, a missing optional one is None."""

    def get(mapping: dict, key: str, convert, allow_null: bool = False):
        value = mapping.get(key) if allow_null else mapping[key]
        return None if value is None else convert(value)

    fresh = answer.get("freshness")
    return {
        "run": get(answer, "run", int),
        "test_id": get(answer, "test_id", str),
        "comparability_key": get(answer, "comparability_key", str),
        "metric": get(answer, "metric", str),
        "unit": get(answer, "unit", str),
        "higher_is_better": get(answer, "higher_is_better", _boolean),
        "disk_type": get(answer, "disk_type", str),
        "match": _str_dict(answer["match"]),
        "value": get(answer, "value", float, True),
        "percentile": get(answer, "percentile", float, True),
        "better_than_percent": get(answer, "better_than_percent", float, True),
        "distribution": get(answer, "distribution", _distribution),
        "population": get(answer, "population", _floats),
        "ranked_among": get(answer, "ranked_among", int),
        "freshness": None
        if fresh is None
        else {
            "as_of": get(fresh, "as_of", iso_datetime),
            "runs": get(fresh, "runs", int),
            "data_version": get(fresh, "data_version", int),
            "current": get(fresh, "current", _boolean),
        },
    }


def _boolean(value) -> bool:
    return bool(value)


def _floats(values) -> list:
    return [float(v) if v is not None else None for v in values]


def _distribution(dist: dict) -> DistributionRow:
    out = {"count": None if dist["count"] is None else int(dist["count"])}
    for key in ("min", "q1", "median", "q3", "max"):
        out[key] = _float(dist.get(key))
    return out
