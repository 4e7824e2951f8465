"""Guest/host overheads: each guest result against its host baseline's.

A guest result's overhead against its baseline's result of the same
comparability key depends on nothing but the two results' values, which
never change once stored, and on the formula (``stats.ratios``,
``stats.overhead_of``).  Ingest computes it when it links the pair and keeps
it in ``Result.overhead``; comparisons, the run page and the reports read it
from there, or compute it with the same functions where none is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from django.db import connection

from benchdb.results import stats
from benchdb.results.metrics import (
    MAIN_METRIC_INDEX,
    MAIN_METRICS,
    PERCENTILE_METRICS,
    higher_is_better,
    json_value,
    main_metric_values,
    measured_values,
    repeat_values,
)
from benchdb.results.models import Result


def pair_overheads(pairs: Sequence[tuple]) -> list[dict]:
    """``stats.overhead`` for (guest result id, host result id, direction,
    metric) tuples, in order: guest ÷ host with its interval, every pair's
    at once (``stats.ratios``).  One query (two with results stored without
    values): of main metrics only their values are read."""
    ids = list(dict.fromkeys(i for g, h, _d, _m in pairs for i in (g, h)))
    if all(metric in MAIN_METRICS for *_ids, metric in pairs):
        values = main_metric_values(ids)
        missing = [pk for pk in ids if values.get(pk) is None]
        if missing:
            values.update(measured_values(missing))
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


def main_value_overheads(
    pairs: Sequence[tuple], main_values: dict[int, object]
) -> list[dict]:
    """``pair_overheads`` of (guest result id, host result id, metric) pairs
    of main metrics, in the guest's main direction, from the results'
    ``main_values`` (id -> ``Result.main_values``, read already): no query
    for a pair both of whose ``main_values`` hold that direction's values;
    ``pair_overheads`` (one query) for the others."""
    out: list[dict | None] = [None] * len(pairs)
    direct, todo = [], []
    for index, (guest, host, metric) in enumerate(pairs):
        g_values, h_values = main_values.get(guest), main_values.get(host)
        whole = all(isinstance(v, list) and len(v) == 2 for v in (g_values, h_values))
        # Always a list (a trigger writes it, migration 0013).
        direction = g_values[0] if isinstance(g_values, list) and g_values else None
        place = list(MAIN_METRICS).index(metric)
        if (
            whole
            and h_values[0] == direction
            and g_values[1] is not None
            and h_values[1] is not None
        ):
            samples = (
                stats.Sample(h_values[1][place] or []),
                stats.Sample(g_values[1][place] or []),
            )
            direct.append((index, metric, samples))
        else:
            todo.append((index, (guest, host, direction, metric)))
    found = stats.ratios([samples for _i, _m, samples in direct])
    for (index, metric, _s), r in zip(direct, found, strict=True):
        out[index] = stats.overhead_of(r, higher_is_better(metric))
    if todo:
        answers = pair_overheads([pair for _i, pair in todo])
        for (index, _pair), answer in zip(todo, answers, strict=True):
            out[index] = answer
    return out


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
# The version of the formula a stored overhead was computed by, kept beside
# it (``Result.overhead_version``).  Bump it with any change to what
# ``_overheads`` stores (``stats.ratios``, ``stats.overhead_of``, the fields,
# the metrics): a stored overhead of another version is stale, read as absent
# (computed again on each request, with today's formula, so a comparison
# never mixes the two), until ``manage.py store_overheads`` recomputes it.
# 2: a too-wide interval's text says so instead of its bounds (``too_wide``).
OVERHEAD_VERSION = 2
OVERHEAD_FIELDS = (
    *("ratio", "low", "high", "p", "n_guest", "n_host", "percent", "slower"),
    "text",
)
_N_GUEST, _N_HOST = OVERHEAD_FIELDS.index("n_guest"), OVERHEAD_FIELDS.index("n_host")
OVERHEAD_METRICS = tuple(m for m in MAIN_METRICS if m not in PERCENTILE_METRICS)
# Their place in ``main_values``' lists.
_OVERHEAD_INDEX = tuple((i, m) for i, m in MAIN_METRIC_INDEX if m in OVERHEAD_METRICS)


def stored_overhead(
    raw, version: int | None, baseline_id: int, direction: str | None
) -> dict | None:
    """A result's stored overheads (``Result.overhead``, as JSON or parsed,
    and ``Result.overhead_version``) by metric, if they were computed by
    today's formula (``OVERHEAD_VERSION``) against ``baseline_id`` in
    ``direction`` (and hold ``OVERHEAD_FIELDS``); None otherwise."""
    if version != OVERHEAD_VERSION:
        return None
    found = json_value(raw)
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
                "UPDATE results_result r SET overhead = NULLIF(v.o, 'null'), "
                "overhead_version = CASE WHEN v.o = 'null' THEN NULL ELSE %s END "
                "FROM jsonb_each(%s::jsonb) AS v(id, o) WHERE r.id = v.id::bigint",
                [OVERHEAD_VERSION, json.dumps(overhead, allow_nan=False)],
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
        results[index].overhead_version = None if value is None else OVERHEAD_VERSION
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
        known = stored_overhead(
            guest.overhead, guest.overhead_version, host.run_id, direction
        )
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
