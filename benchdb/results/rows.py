"""Rows: a run, a result, a hardware row and a similar-system answer as the
one dict every reader is given.

Each resource is turned into its dict here and nowhere else (healthchecks'
``Check.to_dict()``): the API returns these dicts as they are, and its
serializers (``benchdb.api.serializers``) keep their declared fields for
input and for the OpenAPI schema only; tests/api/test_fast_rows.py holds
these dicts to that schema, key for key.  Adding a column means adding it
here and to the serializer's field list, which that test then checks.

The builders read attributes, so a model instance and a ``reads.ListRow``
(the columns a list reads, without model instances) give the same row.
Values are written as DRF's fields write them (ISO 8601 datetimes in UTC
with ``Z``, floats as floats), directly: DRF's fields cost about 0.5 ms a
run in a list and 30 ms for a full run detail.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, TypedDict

from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.results.models import METRIC_FIELDS
from benchdb.results.vocab import RUN_ENVIRONMENT

_UTC = datetime.UTC


def iso_datetime(value) -> str | None:
    """A datetime as DRF's ``DateTimeField`` writes it: ISO 8601 in UTC (the
    only time zone here: ``TIME_ZONE``, nothing activates another), ``Z``
    for its offset; a naive one taken as UTC.  Written directly: every one
    read from PostgreSQL is in UTC already (DRF's zone lookups were 13 of
    14 us; 150 of them in a page of the run list)."""
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


def hardware_row(hw) -> HardwareRow:
    """A hardware row; ``run_count`` where the list annotated it."""
    cpu, disk = hw.cpu_model, hw.disk_model
    run_count = getattr(hw, "run_count", None)
    return {
        "id": hw.pk,
        "cpu_model": cpu.name if cpu is not None else None,
        "cpu_sockets": hw.cpu_sockets,
        "cpu_cores": hw.cpu_cores,
        "cpu_threads": hw.cpu_threads,
        "memory_bytes": hw.memory_bytes,
        "disk_model": disk.name if disk is not None else None,
        "disk_type": hw.disk_type,
        "disk_count": hw.disk_count,
        "disk_size_bytes": hw.disk_size_bytes,
        "raid_controller": hw.raid_controller,
        "raid_level": hw.raid_level,
        "controller_cache_bytes": hw.controller_cache_bytes,
        "controller_battery": hw.controller_battery,
        "run_count": int(run_count) if run_count is not None else None,
    }


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


# What a run row links to, by run id: (API URL, page URL), absolute for the
# request answered (``api.serializers.run_links``).
Links = tuple[Callable[[int], str], Callable[[int], str]]


def run_row(run, links: Links, baseline: int | None) -> RunRow:
    """A run as lists show it.  ``baseline``: the host baseline's id if the
    reader may open it, else None (``reads.shown_baseline_id``)."""
    api_url, web_url = links
    hardware = run.hardware
    reasons = run.suspect_reasons
    return {
        "id": run.pk,
        "uuid": str(run.uuid),
        "url": api_url(run.pk),
        "web_url": web_url(run.pk),
        "title": run.title,
        **{name: getattr(run, name) for name in RUN_ENVIRONMENT},
        "hardware": hardware_row(hardware) if hardware is not None else None,
        "suite_id": run.suite_id,
        "suite_version": run.suite_version,
        "profile": run.profile,
        "agent_version": run.agent_version,
        "ran_at": iso_datetime(run.ran_at),
        "source": run.source,
        "visibility": run.visibility,
        "pair_id": run.pair_id,
        "sweep_id": run.sweep_id,
        "baseline": baseline,
        "suspect": run.suspect,
        "suspect_reasons": [str(r) if r is not None else None for r in reasons]
        if reasons is not None
        else None,
        "hidden": run.hidden,
        "hidden_reason": run.hidden_reason,
        "owned": run.owner_id is not None,
        "created": iso_datetime(run.created),
        "updated": iso_datetime(run.updated),
    }


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
    out = run_row(run, links, baseline)
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


def result_row(
    res, baseline_results: dict | None = None, overheads: dict | None = None
) -> ResultRow:
    """A result with its statistics and repeats (``res.records`` and
    ``res.raw_formats`` from ``reads.attach_repeats``), and its guest/host
    figures against the baseline's result of the same comparability key."""
    stats = res.stats or {}
    return {
        "test_id": res.test_id,
        "title": res.title,
        "group": res.group,
        "tool": res.tool,
        "comparability_key": res.comparability_key,
        "comparable": res.comparable,
        "approximate": res.approximate,
        "options": res.options,
        "command": res.command,
        "tool_version": res.tool_version,
        "preconditioned": res.preconditioned,
        "extra_repeats": res.extra_repeats,
        "repeat_count": res.repeat_count,
        "main_direction": stats.get("main_direction"),
        "iops_mean": _float(res.iops_mean),
        "bw_bytes_mean": _float(res.bw_bytes_mean),
        "lat_mean_ns_mean": _float(res.lat_mean_ns_mean),
        "stats": stats.get("directions", {}),
        "repeats": result_repeats(res),
        "overhead": result_overhead(res, baseline_results or {}, overheads or {}),
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
