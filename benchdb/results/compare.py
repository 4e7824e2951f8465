"""Comparisons between runs: each run's figures against a reference.

The API (``/api/v1/compare/``) and the pages
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

from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Sequence
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.db import connection

from benchdb.lib.collector import paused_gc
from benchdb.results import memo, stats
from benchdb.results.metrics import (
    MAIN_METRIC_INDEX,
    MAIN_METRICS,
    PERCENTILE_METRICS,
    equivalence_percent,
    in_direction,
    json_value,
    main_metric,
    main_metric_values,
    measured_values,
    workload_test_id,
)
from benchdb.results.models import Result, Run
from benchdb.results.overheads import OVERHEAD_FIELDS, stored_overhead
from benchdb_agent import workload

T = TypeVar("T")

# What a comparison reads of each run: its label (``_run_label``, with what
# ``Run.__str__`` names an untitled run by) and its baseline.  A caller that
# needs nothing else reads only these (``reads.comparison``), not the other
# columns, JSON ones included.
COMPARED_RUN_FIELDS = (
    *("id", "title", "role", "platform", "cache_mode", "storage_backend"),
    *("disk_bus", "image_format", "suite_version", "baseline", "created"),
)


class RunLabel(NamedTuple):
    """What a comparison reads of a compared run: its label (``Run.__str__``
    as ``title``, with the creation time an untitled run is named by) and
    its baseline."""

    id: int
    title: str
    role: str
    platform: str
    cache_mode: str
    storage_backend: str
    disk_bus: str
    suite_version: str
    created: object
    baseline: int | None

    @classmethod
    def of(cls, run: Run) -> RunLabel:
        return cls(
            *(run.pk, str(run), run.role, run.platform, run.cache_mode),
            *(run.storage_backend, run.disk_bus, run.suite_version, run.created),
            run.baseline_id,
        )

    def label(self) -> dict:
        """The run as a comparison's answer names it (``runs``)."""
        return {
            "id": self.id,
            "title": self.title,
            "role": self.role,
            "platform": self.platform,
            "cache_mode": self.cache_mode,
            "storage_backend": self.storage_backend,
            "disk_bus": self.disk_bus,
            "suite_version": self.suite_version,
        }


def _run_label(run: Run) -> dict:
    return RunLabel.of(run).label()


# Chooses which of a test's measured figures to compute:
# ``figures(test_id, group, measured)``.
Figures = Callable[[str, str, list[str]], Container[str]]


class Inputs(NamedTuple):
    """Everything a comparison is computed from (``read_inputs``): the runs
    in order, the reference's id, the equivalence margin (percent), the
    figure chooser, and the ids of the comparable results of the runs and
    their listed baselines, whose values never change once stored (a
    baseline made private, a run's result set changed: other ids).  Hashable:
    the comparison's memo key (``comparison``)."""

    runs: tuple[RunLabel, ...]
    reference: int
    margin: float
    figures: Figures | None
    result_ids: tuple[int, ...]

    @property
    def run_ids(self) -> list[int]:
        return [run.id for run in self.runs]


class ComparedResult(NamedTuple):
    """One result as a comparison's computation reads it (``_results``), an
    input of the pure computation and not a representation of the result
    (that is ``rows.result_row``, the API's, pages' and exports'): its main
    direction and
    the main metrics' per-repeat values in it (``main_values``, JSON as
    psycopg gives it, None when none are stored), and its stored overheads
    (JSON) with the version of the formula that computed them
    (``overheads.stored_overhead`` reads only today's)."""

    id: int
    run: int
    test_id: str
    title: str
    group: str
    tool: str
    key: str
    direction: str | None
    values: object
    overhead: object
    overhead_version: int | None


def read_inputs(
    runs: Sequence[Run], reference: Run | None = None, figures: Figures | None = None
) -> Inputs:
    """A comparison's ``Inputs``: ValueError without runs or with a reference
    not among them.  One query (the result ids)."""
    runs = list(runs)
    if not runs:
        raise ValueError("a comparison needs at least one run")
    if reference is None:
        reference = runs[0]
    if reference.pk not in {r.pk for r in runs}:
        raise ValueError("the reference run must be one of the compared runs")
    return Inputs(
        tuple(RunLabel.of(r) for r in runs),
        reference.pk,
        equivalence_percent(),
        figures,
        _result_ids(runs),
    )


def build_comparison(
    runs: list[Run],
    reference: Run | None = None,
    figures: Figures | None = None,
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
    The inputs are read (``read_inputs``), then the answer is
    ``comparison(inputs)``: kept in this process (``_MEMO``) under its inputs
    and given again, the same object: readers must not change it.

    Queries: one (the ids of the results it would read), whatever the number
    of runs, when the answer is kept; to compute it, one more (the results
    with their values and their listed host baselines'), and one for results
    stored without values and one for results whose main direction is not
    their reference's (``_series``).
    """
    return comparison(read_inputs(runs, reference, figures))


# Comparisons computed in this process, by their ``Inputs`` (``memo``).
# Bounded by the number of run figures kept (``BENCHDB_COMPARISON_MEMO``,
# 0 keeps none): a 10-run comparison of the standard profile has 831 (1.7 MiB,
# and 0.7 MB more once the API has written its JSON: ``derived``).
_MEMO = memo.Memo(0)


def derived(answer: dict, name: str, make: Callable[[], T]) -> T:
    """``make()``, what a reader derives from the comparison ``answer`` alone
    (the API's JSON of it), kept with the answer while the memo keeps it and
    given again (``memo.Memo.derived``); made every time otherwise."""
    return _MEMO.derived(answer, name, make)


def _budget() -> int:
    return int(getattr(settings, "BENCHDB_COMPARISON_MEMO", 0))


def _figure_count(data: dict) -> int:
    """A comparison's size as its memo counts it: its run figures."""
    return 1 + sum(len(m["runs"]) for t in data["tests"] for m in t["metrics"])


@memo.memoized(_MEMO, _figure_count, _budget)
# Tens of thousands of new dicts and lists, none in a cycle: no collector
# pass over them, nor over the whole heap, while they are made (the API's
# and the pages' comparisons alike; benchdb/lib/collector.py).
@paused_gc()
def comparison(inputs: Inputs) -> dict:
    """``build_comparison``'s answer for its inputs: the results read by id
    (their values never change), then ``computed``."""
    return computed(inputs, _results(inputs.result_ids))


def computed(inputs: Inputs, rows: Sequence[ComparedResult]) -> dict:
    """The comparison of ``inputs`` from its results' rows: what is to be
    computed, in display order (``_plan_test``), then every figure at once
    (``_fill_summaries``, ``_fill_verdicts``, ``_fill_overheads``).  Reads
    only values that never change once stored (``_series``, ``_by_workload``)."""
    run_ids = inputs.run_ids
    by_key: dict[str, dict[int, ComparedResult]] = defaultdict(dict)
    for row in rows:
        by_key[row.key][row.run] = row
    weaker = _by_workload(by_key, run_ids)
    shared = {k: v for k, v in by_key.items() if all(rid in v for rid in run_ids)}
    series = _series(
        (per_run[rid], per_run[inputs.reference].direction)
        for per_run in shared.values()
        for rid in run_ids
    )
    work = _Work(inputs, series)
    tests = [
        _plan_test(work, key, per_run, weaker.get(key, []))
        for key, per_run in sorted(shared.items(), key=_sort_key)
    ]
    _fill_summaries(work.summarised)
    _fill_verdicts(work.families, run_ids, inputs.reference, inputs.margin)
    _fill_overheads(work)
    not_shared = sorted(
        {
            next(iter(per_run.values())).test_id
            for per_run in by_key.values()
            if any(rid in per_run for rid in run_ids)
        }
        - {t["test_id"] for t in tests}
    )
    return {
        "runs": [run.label() for run in inputs.runs],
        "reference": inputs.reference,
        "equivalence_percent": inputs.margin,
        "interval_explanation": stats.INTERVAL_EXPLANATION,
        "verdict_explanation": stats.VERDICT_EXPLANATION.format(margin=inputs.margin),
        "tests": tests,
        "not_shared": not_shared,
        "weaker": _weaker_summary(tests),
    }


class _Pending(NamedTuple):
    """A guest's figure whose overhead is computed from its host's values."""

    entry: dict
    higher_is_better: bool | None
    sample: stats.Sample
    host: ComparedResult
    direction: str | None
    index: int
    metric: str


class _Work:
    """What ``computed`` gathers while planning, to compute all at once: one
    Sample per result and figure (a host may serve several guests), each
    guest result's stored overheads (read once), the entries to summarise,
    the families to set against the reference, the overhead pairs known
    and those whose host values are still to be read."""

    def __init__(self, inputs: Inputs, series: dict[int, list]):
        self.inputs = inputs
        self.series = series
        self.baseline_of = {r.id: r.baseline for r in inputs.runs if r.baseline}
        self.samples: dict[tuple, stats.Sample] = {}
        self.stored: dict[int, dict | None] = {}
        self.summarised: list[tuple[dict, stats.Sample]] = []
        self.families: list[tuple] = []
        self.pairs: list[tuple] = []
        self.pending: list[_Pending] = []


def _plan_test(work: _Work, key: str, per_run: dict, weaker: list) -> dict:
    """One shared test of the answer, its entries blank, their figures
    queued on ``work``."""
    inputs = work.inputs
    ref_row = per_run[inputs.reference]
    rows = [per_run[rid] for rid in inputs.run_ids]
    hosts = [per_run.get(work.baseline_of.get(rid)) for rid in inputs.run_ids]
    raws = [work.series[row.id] for row in rows]
    measured = [m for i, m in MAIN_METRIC_INDEX if any(raw[i] for raw in raws)]
    wanted = (
        measured
        if inputs.figures is None
        else inputs.figures(ref_row.test_id, ref_row.group, measured)
    )
    metrics = [
        _plan_metric(work, i, metric, rows, raws, hosts, ref_row.direction)
        for i, metric in MAIN_METRIC_INDEX
        if metric in measured and metric in wanted
    ]
    return {
        "test_id": ref_row.test_id,
        "title": ref_row.title or ref_row.test_id,
        "group": ref_row.group,
        "tool": ref_row.tool,
        "comparability_key": key,
        "direction": ref_row.direction,
        "main_metric": main_metric(ref_row.test_id),
        "metrics": metrics,
        "weaker": weaker,
    }


def _plan_metric(work: _Work, i, metric, rows, raws, hosts, direction) -> dict:
    """One figure of a test: an entry per run, queued for its summary, its
    verdict against the reference and its overhead."""
    info = MAIN_METRICS[metric]
    hib = info["higher_is_better"]
    percentile = metric in PERCENTILE_METRICS
    entries, own = [], []
    for row, raw, host in zip(rows, raws, hosts, strict=True):
        values = raw[i]
        sample = work.samples[row.id, metric] = stats.Sample(values, not percentile)
        own.append(sample)
        entry = _blank_entry(row.run, values)
        entries.append(entry)
        if percentile:
            _fill_range(entry, sample)
            continue
        work.summarised.append((entry, sample))
        if host is not None:
            _plan_overhead(work, entry, hib, sample, row, host, direction, i, metric)
    if not percentile:
        run_ids = work.inputs.run_ids
        reference = work.inputs.reference
        ref_sample = own[run_ids.index(reference)]
        rest = [s for rid, s in zip(run_ids, own, strict=True) if rid != reference]
        work.families.append((entries, hib, ref_sample, rest))
    return {
        "metric": metric,
        "unit": info["unit"],
        "higher_is_better": hib,
        "kind": "percentile" if percentile else "figure",
        "runs": entries,
    }


def _plan_overhead(work: _Work, entry, hib, sample, row, host, direction, i, metric):
    """A guest figure's overhead: stored (``Result.overhead``), none measured
    on either side, or to compute from its host's values."""
    known = work.stored.get(row.id, _UNREAD)
    if known is _UNREAD:
        known = work.stored[row.id] = stored_overhead(
            row.overhead, row.overhead_version, host.run, direction
        )
    if known is None:
        work.pending.append(_Pending(entry, hib, sample, host, direction, i, metric))
    elif metric in known:
        entry["overhead"] = dict(zip(OVERHEAD_FIELDS, known[metric], strict=True))
    else:  # neither side measured it
        work.pairs.append((entry, hib, _NO_VALUES, sample))


def _fill_summaries(summarised: list[tuple[dict, stats.Sample]]) -> None:
    """Each figure's mean, geometric mean with its interval, range: at once."""
    rows = stats.summary_rows([own for _e, own in summarised])
    for (entry, own), (m, sd, gmean, low, high, note) in zip(
        summarised, rows, strict=True
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


_BETTER_OF = {stats.FASTER: True, stats.SLOWER: False}


def _fill_verdicts(families: list[tuple], run_ids, reference, margin) -> None:
    """Every run but the reference against it, per figure: ratio, p (Holm)
    and verdict, at once (``stats.family_parts``)."""
    others = [rid for rid in run_ids if rid != reference]
    answers = stats.family_parts(
        [(ref, rest, hib) for _entries, hib, ref, rest in families], margin
    )
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
            entry["better"] = _BETTER_OF.get(v["verdict"]) if hib is not None else None


def _fill_overheads(work: _Work) -> None:
    """Guest / host with its interval for every figure without a stored
    one, at once (``stats.ratios``); host values read once per host."""
    pairs, samples = work.pairs, work.samples
    if work.pending:
        hosts = _series(
            {p.host.id: (p.host, p.direction) for p in work.pending}.values()
        )
        for pending in work.pending:
            host_id = pending.host.id
            host_sample = samples.get((host_id, pending.metric))
            if host_sample is None:
                host_sample = samples[host_id, pending.metric] = stats.Sample(
                    hosts[host_id][pending.index]
                )
            pairs.append(
                (pending.entry, pending.higher_is_better, host_sample, pending.sample)
            )
    overheads = stats.ratios([(host, own) for _e, _h, host, own in pairs])
    for (entry, hib, _host, _own), r in zip(pairs, overheads, strict=True):
        entry["overhead"] = stats.overhead_of(r, hib)


# The comparable results of some runs, each with ``main_values``: its main
# direction and the per-repeat values in it of the main metrics, in
# ``MAIN_METRICS`` order (null where a metric has none), or null where
# ingest stored no values (older results: rebuilt from measurements).  A
# trigger writes the column from ``stats`` (migration 0013), so the rest of
# the statistics JSON is neither read nor decompressed.
_RESULTS_SELECT = (
    'SELECT r.id, r.run_id, r.test_id, r.title, r."group", r.tool, '
    "r.comparability_key, r.main_values ->> 0, r.main_values -> 1, r.overhead, "
    "r.overhead_version "
    "FROM results_result r WHERE r.id = ANY(%s)"
)
_RESULTS_ORDER = " ORDER BY r.test_id, r.run_id"


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
        # every result.
        listed = Run.objects.listed().filter(pk__in=baseline_ids)
        sql, listed_params = listed.order_by().values("pk").query.sql_with_params()
        where += f" || ARRAY({sql})"
        params.extend(listed_params)
    return where + ")", params


def _result_ids(runs: list[Run]) -> tuple[int, ...]:
    """The ids of the comparable results of the runs and of their listed
    host baselines (``_results_where``), in id order.  One query (no JSON
    read)."""
    where, params = _results_where(runs)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.id FROM results_result r " + where + " ORDER BY r.id", params
        )
        return tuple(row[0] for row in cursor.fetchall())


def _results(result_ids: Sequence[int]) -> list[ComparedResult]:
    """The results of a comparison (``ComparedResult``) by test id and run.  The
    JSON is read only where it is used (``_series``, ``stored_overhead``):
    a baseline whose overheads are stored is not.  One query."""
    with connection.cursor() as cursor:
        cursor.execute(_RESULTS_SELECT + _RESULTS_ORDER, [list(result_ids)])
        return [ComparedResult(*row) for row in cursor.fetchall()]


def _series(rows: Iterable[tuple[ComparedResult, str | None]]) -> dict[int, list]:
    """Per result row of ``_results``, given with the direction
    its figures are read in (the main direction of its key's reference
    result, which every run's figure of that test is read in): its main
    metrics' per-repeat values (``MAIN_METRICS`` order, [] where none).
    Most results come with them; a result whose own main direction differs
    takes them from its stored values (one query), one stored without
    values from its measurements (one query)."""
    out: dict[int, list] = {}
    other, unstored = [], []
    for row, direction in rows:
        values = json_value(row.values)
        if values is None:
            unstored.append((row.id, direction))
        elif row.direction == direction:
            out[row.id] = [v if v is not None else [] for v in values]
        else:
            other.append((row.id, direction))
    if other:
        stored = main_metric_values([pk for pk, _d in other])
        for pk, direction in other:
            out[pk] = in_direction(stored.get(pk), direction)
    if unstored:
        measured = measured_values([pk for pk, _d in unstored])
        for pk, direction in unstored:
            out[pk] = in_direction(measured.get(pk), direction)
    return out


# The key of a test compared by its workload alone (``_by_workload``).
WORKLOAD_KEY = "workload|{}"
IMPORTED_KEY = "imported/"
# A published source's results (``reference``: ``published-<seed>|<test id>``)
# keep the source's own test ids: their workload is read from their options.
PUBLISHED_KEY = "published-"


def _published_workloads(by_key: dict[str, dict[int, ComparedResult]]) -> dict:
    """Per key of a published result, the test id of its workload
    (``metrics.workload_test_id``).  One query, none without a published result."""
    rows = {
        row.id: (key, row)
        for key, per_run in by_key.items()
        if key.startswith(PUBLISHED_KEY)
        for row in per_run.values()
    }
    if not rows:
        return {}
    options = dict(Result.objects.filter(pk__in=rows).values_list("pk", "options"))
    return {
        key: workload_test_id(row.tool, row.direction, options.get(pk))
        for pk, (key, row) in rows.items()
    }


def _by_workload(by_key: dict[str, dict[int, ComparedResult]], run_ids: list) -> dict:
    """Imported results (``imports``: key ``imported/1|<test id>|...``) join
    the results of the same test id under one key, ``workload|<test id>``,
    where no key is shared by every run but each run has the test once: an
    imported CrystalDiskMark RND4K Q32T1 read then compares with an agent's
    ``fio-rand-read-4k-q32t1``.  Returns, per merged key, why the comparison
    is weaker than between two agent runs (``workload.differences``, and the
    import's declared configuration).  Changes ``by_key`` in place."""
    per_test: dict[str, list[str]] = defaultdict(list)
    published = _published_workloads(by_key)
    for key, per_run in by_key.items():
        test_id = published.get(key) or next(iter(per_run.values())).test_id
        per_test[test_id].append(key)
    merged: dict[str, list] = {}
    for test_id, keys in per_test.items():
        if len(keys) < 2 or not any(
            k.startswith((IMPORTED_KEY, PUBLISHED_KEY)) for k in keys
        ):
            continue
        if any(all(rid in by_key[k] for rid in run_ids) for k in keys):
            continue
        runs: dict[int, ComparedResult] = {}
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
        merged[WORKLOAD_KEY.format(test_id)] = [row.id for row in runs.values()]
    if not merged:
        return {}
    facts = {
        pk: {"options": options or {}, "source": source, "tool_version": version}
        for pk, options, source, version in Result.objects.filter(
            pk__in=[pk for pks in merged.values() for pk in pks]
        ).values_list("pk", "options", "run__source", "tool_version")
    }
    out = {}
    for key, pks in merged.items():
        agent = [pk for pk in pks if facts[pk]["source"] == "measured"]
        imported = [pk for pk in pks if facts[pk]["source"] == "imported"]
        published = [pk for pk in pks if facts[pk]["source"] == "published"]
        reasons = []
        if imported:
            declared = {facts[pk]["tool_version"] or "an import" for pk in imported}
            said = ", ".join(sorted(declared))
            reasons.append(f"compared by workload: {said} declared, not verified")
        if published:
            reasons.append(
                "compared by workload: published figures, as their source states them"
            )
        base = facts[(agent or published or imported)[0]]["options"]
        for pk in imported + published:
            for reason in workload.differences(facts[pk]["options"], base):
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


_UNREAD = object()
_NO_VALUES = stats.Sample(())


def _sort_key(item: tuple[str, dict[int, ComparedResult]]) -> tuple:
    """Group, test id, key: of the key's first result."""
    key, per_run = item
    first = next(iter(per_run.values()))
    return (first.group, first.test_id, key)
