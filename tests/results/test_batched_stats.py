"""The batched comparison gives exactly what the scalar statistics give.

``compare.build_comparison`` computes every figure of a comparison at once
(``stats.summaries``, ``stats.compare_families``, ``stats.ratios``,
``stats.repeats_needed_many``).  Here each of those is set against the
one-at-a-time functions (``summarize``, ``compare_to_reference``,
``overhead``, ``repeats_needed``) on generated samples, and the whole
comparison against ``scalar_comparison`` below (the comparison as it was
built before, one scalar call per figure and pair) on real bundles and on
stored values rewritten with the awkward cases: fewer than three repeats,
no spread, a zero, integers, missing metrics, no stored values at all.
Equality is exact (``==`` on every float), not approximate.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import random
import uuid
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from scipy import special

from benchdb.results import compare, stats
from benchdb.results.ingest import store_bundle
from benchdb.results.metrics import (
    MAIN_METRICS,
    equivalence_percent,
    main_metric,
    repeat_values,
)
from benchdb.results.models import Result, Run

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


# The scalar statistics as they were before batching (stats.py at f89158f),
# kept verbatim as the oracle: stats.py now answers one sample or pair
# through its batched functions, and these say what it must answer.


def scalar_floats(values) -> list[float]:
    """``stats._floats`` as it was (fb91328), before its fast path."""
    return [float(v) for v in values if v is not None] if values else []


def scalar_mean_sd(xs: list[float]) -> tuple:
    """``stats._mean_sd`` as it was (fb91328): a generator, not a list."""
    n = len(xs)
    m = math.fsum(xs) / n
    if n < 2:
        return m, None
    return m, math.sqrt(math.fsum((v - m) ** 2 for v in xs) / (n - 1))


def scalar_summarize(values) -> dict:
    xs = scalar_floats(values)
    n = len(xs)
    m, sd = scalar_mean_sd(xs) if n else (None, None)
    out = {
        "n": n,
        "mean": m,
        "stdev": sd,
        "gmean": None,
        "ci95_low": None,
        "ci95_high": None,
        "cv": (sd / m) if (sd is not None and m) else None,
        "min": min(xs) if n else None,
        "max": max(xs) if n else None,
        "interval": "log-t",
        "note": None,
    }
    if n and min(xs) > 0:
        lm, lsd = scalar_mean_sd([math.log(v) for v in xs])
        # Within the repeats' range, as it is exactly (since issue 30).
        out["gmean"] = min(max(math.exp(lm), out["min"]), out["max"])
        if n >= stats.MIN_REPEATS:
            half = stats.t_quantile(stats.CONFIDENCE, n - 1) * lsd / math.sqrt(n)
            out["ci95_low"], out["ci95_high"] = math.exp(lm - half), math.exp(lm + half)
    if n < stats.MIN_REPEATS:
        out["note"] = stats.NOT_ENOUGH
    elif out["ci95_low"] is None:
        out["note"] = "no interval: a repeat measured zero"
    return out


def scalar_ratio(reference, other) -> dict:
    xs, ys = scalar_floats(reference), scalar_floats(other)
    nx, ny = len(xs), len(ys)
    out = dict.fromkeys(["ratio", "low", "high", "p", "df", "se_log"])
    out.update(n_reference=nx, n_other=ny, sd_log_reference=None, sd_log_other=None)
    if not nx or not ny or min(xs) <= 0 or min(ys) <= 0:
        return out
    mx, sx = scalar_mean_sd([math.log(v) for v in xs])
    my, sy = scalar_mean_sd([math.log(v) for v in ys])
    diff = my - mx
    out["ratio"] = math.exp(diff)
    if nx < stats.MIN_REPEATS or ny < stats.MIN_REPEATS:
        return out
    out["sd_log_reference"], out["sd_log_other"] = sx, sy
    va, vb = sx**2 / nx, sy**2 / ny
    se = math.sqrt(va + vb)
    out["se_log"] = se
    if se == 0.0:
        out["low"] = out["high"] = out["ratio"]
        out["p"] = 1.0 if diff == 0 else 0.0
        return out
    df = (va + vb) ** 2 / (va**2 / (nx - 1) + vb**2 / (ny - 1))
    half = stats.t_quantile(stats.CONFIDENCE, df) * se
    out["low"], out["high"] = math.exp(diff - half), math.exp(diff + half)
    out["df"] = df
    out["p"] = stats.t_two_sided_p(diff / se, df)
    return out


def scalar_repeats_needed(a, b, margin_percent=5.0, confidence=0.95, limit=1000):
    if a is None or b is None:
        return None
    var = a**2 + b**2
    target = math.log1p(margin_percent / 100.0) / 2.0
    if var == 0.0:
        return stats.MIN_REPEATS
    ratio = var**2 / (a**4 + b**4)

    def decides(n: int) -> bool:
        q = stats.t_quantile(confidence, (n - 1) * ratio)
        return q * math.sqrt(var / n) < target

    z = float(special.ndtri(0.5 + confidence / 2.0))
    n = max(stats.MIN_REPEATS, math.ceil(z * z * var / (target * target)))
    if n > limit or not decides(limit):
        return limit + 1
    while not decides(n):
        n += 1
    return n


def scalar_compare_to_reference(reference, others, hib, margin=5.0) -> list[dict]:
    ratios = [scalar_ratio(reference, o) for o in others]
    adjusted = stats.holm([r["p"] for r in ratios])
    out = []
    for r, p_adj in zip(ratios, adjusted, strict=True):
        need = scalar_repeats_needed(r["sd_log_reference"], r["sd_log_other"], margin)
        v = stats.verdict(r, p_adj, hib, margin, needed=need)
        out.append(
            {
                **r,
                "p_adjusted": p_adj,
                "p_text": stats.format_p(p_adj) if p_adj is not None else None,
                "family_size": sum(1 for x in adjusted if x is not None),
                **v,
            }
        )
    return out


def scalar_overhead(guest, host, hib) -> dict:
    return stats.overhead_of(scalar_ratio(host, guest), hib)


def generated(rng: random.Random) -> list:
    """A sample as ingest might store it, awkward cases included."""
    n = rng.choice([0, 1, 2, 3, 3, 4, 5, 6, 10])
    base = rng.choice([1e-3, 1.0, 250.0, 1e5, 3e9])
    kind = rng.random()
    if kind < 0.1:  # no spread at all
        return [base] * n
    if kind < 0.15 and n:  # a repeat measured zero
        return [0.0] + [base] * (n - 1)
    if kind < 0.25:  # integer figures (IOPS, bytes)
        return [int(base * rng.uniform(0.5, 2)) + 1 for _ in range(n)]
    noise = rng.choice([1e-4, 0.02, 0.1, 0.6])
    return [base * math.exp(rng.gauss(0, noise)) for _ in range(n)]


def test_batched_statistics_equal_the_scalar_ones():
    rng = random.Random(20261123)
    for _ in range(400):
        margin = rng.choice([5.0, 0.1, 20.0])
        families = []
        for _f in range(rng.randint(1, 4)):
            ref = generated(rng)
            others = [generated(rng) for _ in range(rng.randint(0, 11))]
            families.append((ref, others, rng.choice([True, False, None])))
        batched = stats.compare_families(
            [
                (stats.Sample(ref), [stats.Sample(o) for o in others], hib)
                for ref, others, hib in families
            ],
            margin,
        )
        expected = [
            scalar_compare_to_reference(ref, others, hib, margin)
            for ref, others, hib in families
        ]
        assert batched == expected
        assert [
            stats.compare_to_reference(ref, others, hib, margin)
            for ref, others, hib in families
        ] == expected
        values = [generated(rng) for _ in range(12)]
        expected = [scalar_summarize(v) for v in values]
        assert stats.summaries([stats.Sample(v) for v in values]) == expected
        assert [stats.summarize(v) for v in values] == expected
        pairs = [(generated(rng), generated(rng)) for _ in range(6)]
        hib = rng.choice([True, False, None])
        batched = stats.ratios([(stats.Sample(h), stats.Sample(g)) for g, h in pairs])
        expected = [scalar_overhead(g, h, hib) for g, h in pairs]
        assert [stats.overhead_of(r, hib) for r in batched] == expected
        assert [stats.overhead(g, h, hib) for g, h in pairs] == expected
        assert [stats.ratio(h, g) for g, h in pairs] == [
            scalar_ratio(h, g) for g, h in pairs
        ]


def numpy_holm(pvalues) -> list:
    """``stats.holm`` as it was (fb91328), in NumPy."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out = [None] * len(pvalues)
    if not idx:
        return out
    p = np.asarray([pvalues[i] for i in idx], dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    for rank, j in enumerate(order):
        out[idx[j]] = float(adjusted[rank])
    return out


def test_holm_equals_the_numpy_one():
    """Ties, zeros, ones, None, tiny and NaN p-values: the same adjusted
    values, in the same places (NaN compared by its repr)."""
    rng = random.Random(17)
    pool = [0.0, 1.0, 0.01, 0.02, 0.5, 1e-300, 0.049999999999999996]
    for _ in range(20000):
        ps = [
            rng.choice([None, rng.random(), rng.random() ** 8, rng.choice(pool)])
            for _ in range(rng.randint(0, 12))
        ]
        if rng.random() < 0.02 and ps:
            ps[rng.randrange(len(ps))] = math.nan
        got, expected = stats.holm(ps), numpy_holm(ps)
        assert [repr(x) for x in got] == [repr(x) for x in expected], ps
        assert all(type(x) in (float, type(None)) for x in got)


def test_repeats_needed_many_equals_the_scalar_search():
    rng = random.Random(7)
    sds = [(None, 0.1), (0.1, None), (0.0, 0.0), (2.0, 3.0), (1e-6, 0.0)]
    sds += [(rng.uniform(0, 0.2), rng.uniform(0, 0.2)) for _ in range(300)]
    sds += [(rng.uniform(0, 0.01), rng.uniform(0, 0.03)) for _ in range(100)]
    for margin in (5.0, 1.0, 30.0):
        expected = [scalar_repeats_needed(a, b, margin) for a, b in sds]
        assert stats.repeats_needed_many(sds, margin) == expected
        assert [stats.repeats_needed(a, b, margin) for a, b in sds] == expected


# The comparison before batching, kept as the oracle ---------------------------


def scalar_comparison(runs: list[Run], reference: Run) -> dict:
    """``build_comparison`` one scalar call per figure and pair."""
    run_ids = [r.pk for r in runs]
    baseline_of = {r.pk: r.baseline_id for r in runs if r.baseline_id}
    listed = Run.objects.listed().filter(pk__in=list(baseline_of.values()) or [0])
    results = Result.objects.filter(
        comparable=True, run_id__in={*run_ids, *listed.values_list("pk", flat=True)}
    ).order_by("test_id", "run_id")
    by_key: dict[str, dict[int, Result]] = defaultdict(dict)
    for res in results:
        by_key[res.comparability_key][res.run_id] = res
    shared = {k: v for k, v in by_key.items() if all(rid in v for rid in run_ids)}
    values = repeat_values([r.pk for v in shared.values() for r in v.values()])
    margin = equivalence_percent()

    def samples_of(result, direction, metric) -> list:
        if result is None:
            return []
        return values.get(result.pk, {}).get(direction, {}).get(metric, [])

    def first(per_run):
        return per_run[next(iter(per_run))]

    tests = []
    for key, per_run in sorted(
        shared.items(),
        key=lambda kv: (first(kv[1]).group, first(kv[1]).test_id, kv[0]),
    ):
        ref_result = per_run[reference.pk]
        direction = (ref_result.stats or {}).get("main_direction")
        metrics = []
        for metric, info in MAIN_METRICS.items():
            samples = {
                rid: samples_of(per_run[rid], direction, metric) for rid in run_ids
            }
            if not any(samples.values()):
                continue
            hib = info["higher_is_better"]
            others = [rid for rid in run_ids if rid != reference.pk]
            percentile = stats.is_percentile(metric)
            verdicts = {}
            if not percentile:
                verdicts = dict(
                    zip(
                        others,
                        scalar_compare_to_reference(
                            samples[reference.pk],
                            [samples[r] for r in others],
                            hib,
                            margin,
                        ),
                        strict=True,
                    )
                )
            entries = []
            for rid in run_ids:
                entry = scalar_entry(rid, samples[rid], percentile)
                v = verdicts.get(rid)
                if v is not None:
                    entry.update(
                        delta_percent=v["percent"],
                        ratio=v["ratio"],
                        ratio_low=v["low"],
                        ratio_high=v["high"],
                        ratio_too_wide=stats.too_wide(v["low"], v["high"]),
                        p_value=v["p"],
                        p_adjusted=v["p_adjusted"],
                        p_text=v["p_text"],
                        verdict=v["verdict"],
                        verdict_text=v["text"],
                        repeats_needed=v["repeats_needed"],
                        better={"faster": True, "slower": False}.get(v["verdict"])
                        if hib is not None
                        else None,
                    )
                host = by_key[key].get(baseline_of.get(rid))
                if host is not None and not percentile:
                    entry["overhead"] = scalar_overhead(
                        samples[rid], samples_of(host, direction, metric), hib
                    )
                entries.append(entry)
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
                "test_id": ref_result.test_id,
                "title": ref_result.title or ref_result.test_id,
                "group": ref_result.group,
                "tool": ref_result.tool,
                "comparability_key": key,
                "direction": direction,
                "main_metric": main_metric(ref_result.test_id),
                "metrics": metrics,
                # The oracle compares runs by their comparability keys alone:
                # nothing is joined by workload (imports; test_imported_runs).
                "weaker": [],
            }
        )
    not_shared = {
        first(per_run).test_id
        for per_run in by_key.values()
        if any(rid in per_run for rid in run_ids)
    } - {t["test_id"] for t in tests}
    return {
        "runs": [compare._run_label(r) for r in runs],
        "reference": reference.pk,
        "equivalence_percent": margin,
        "interval_explanation": stats.INTERVAL_EXPLANATION,
        "verdict_explanation": stats.VERDICT_EXPLANATION.format(margin=margin),
        "tests": tests,
        "not_shared": sorted(not_shared),
        "weaker": [],
    }


def scalar_entry(run_id: int, values: list, percentile: bool) -> dict:
    entry = dict.fromkeys(
        "mean gmean stdev ci95_low ci95_high ci95_too_wide min max note values "
        "delta_percent ratio ratio_low ratio_high ratio_too_wide p_value "
        "p_adjusted p_text verdict verdict_text repeats_needed better "
        "overhead".split()
    )
    entry = {"run": run_id, "n": len(values), **entry, "values": values}
    entry["ci95_too_wide"] = entry["ratio_too_wide"] = False
    if percentile:
        rng = stats.percentile_range(values)
        entry.update(
            min=rng["min"],
            max=rng["max"],
            note="percentiles of repeats are not averaged: range shown",
        )
        return entry
    summary = scalar_summarize(values)
    for k in ("mean", "gmean", "stdev", "ci95_low", "ci95_high", "min", "max", "note"):
        entry[k] = summary[k]
    entry["ci95_too_wide"] = stats.too_wide(summary["ci95_low"], summary["ci95_high"])
    return entry


def store(name: str, **changes) -> Run:
    with gzip.open(BUNDLES / name, "rt") as handle:
        bundle = copy.deepcopy(json.load(handle))
    bundle["bundle_id"] = str(uuid.uuid4())
    run = store_bundle(bundle)
    if changes:
        Run.objects.filter(pk=run.pk).update(**changes)
        run.refresh_from_db()
    return run


def assert_same(runs: list[Run], reference: Run | None = None) -> dict:
    reference = reference or runs[0]
    batched = compare.build_comparison(runs, reference)
    assert batched == scalar_comparison(runs, reference)
    # Key order too: the JSON reads the same.
    assert json.dumps(batched) == json.dumps(scalar_comparison(runs, reference))
    return batched


@pytest.mark.django_db
def test_a_comparison_of_real_runs_equals_the_scalar_one():
    """Two full-profile runs, one a guest of the other (overheads), and the
    published reference runs (seed 001's five cache modes, 10 repeats...)."""
    host = store("full-none.json.gz", role="host")
    guest = store("full-writeback.json.gz", baseline_id=host.pk)
    other = store("full-writeback.json.gz", baseline_id=host.pk)
    data = assert_same([guest, host])
    assert any(
        e["overhead"] for t in data["tests"] for m in t["metrics"] for e in m["runs"]
    )
    assert {
        e["verdict"] for t in data["tests"] for m in t["metrics"] for e in m["runs"]
    } > {"cannot tell"}
    assert_same([host, guest, other], reference=guest)
    call_command("load_reference")
    published = list(Run.objects.filter(source="published").order_by("pk"))
    for i in range(0, len(published), 5):
        group = published[i : i + 5]
        for reference in group[:2]:
            assert_same(group, reference)
    assert_same(published[:12])


@pytest.mark.django_db
def test_a_comparison_of_awkward_values_equals_the_scalar_one():
    """Stored values rewritten: n < 3, no spread, zeros, integers, metrics
    missing from some runs, and results without stored values (rebuilt from
    their measurements)."""
    host = store("full-none.json.gz", role="host")
    runs = [store("full-writeback.json.gz", baseline_id=host.pk) for _ in range(4)]
    runs.append(store("full-none.json.gz"))
    rng = random.Random(11)
    metrics = list(MAIN_METRICS)
    for result in Result.objects.filter(run__in=[host, *runs]).order_by("pk"):
        result_stats = result.stats
        roll = rng.random()
        if roll < 0.1:
            result_stats.pop("values")  # an older result: from the measurements
        elif roll < 0.2:
            result_stats["values"] = {}  # a test that measured nothing
        else:
            for direction in list(result_stats["values"]):
                for metric in metrics:
                    if rng.random() < 0.15:
                        result_stats["values"][direction].pop(metric, None)
                    else:
                        result_stats["values"][direction][metric] = generated(rng)
        Result.objects.filter(pk=result.pk).update(stats=result_stats)
    for reference in runs[:3]:
        assert_same([host, *runs], reference)
    assert_same(runs[:2])
    assert_same(runs[:1])


@pytest.mark.django_db
def test_each_result_is_read_in_its_references_main_direction():
    """Results whose own main direction is not their reference's (a test of
    two directions, or one lacking the preferred one) are read in the
    reference's, from their stored values or measurements, as before:
    ``_comparison_results`` hands over only each result's own direction."""
    host = store("full-none.json.gz", role="host")
    runs = [store("full-writeback.json.gz", baseline_id=host.pk) for _ in range(3)]
    rng = random.Random(5)
    flipped = 0
    for result in Result.objects.filter(run__in=[host, *runs]).order_by("pk"):
        result_stats = result.stats
        main = result_stats.get("main_direction")
        if not main or not result_stats.get("values", {}).get(main):
            continue
        # A second direction beside the main one, with its own figures.
        other = "write" if main == "read" else "read"
        result_stats["values"][other] = {m: generated(rng) for m in MAIN_METRICS}
        roll = rng.random()
        if roll < 0.4:
            result_stats["main_direction"] = other
            flipped += 1
        elif roll < 0.5:
            result_stats.pop("values")  # from the measurements, main direction only
        Result.objects.filter(pk=result.pk).update(stats=result_stats)
    assert flipped > 10
    for reference in runs:
        data = assert_same([host, *runs], reference)
        assert_same(runs, reference)
    directions = {t["direction"] for t in data["tests"]}
    assert directions == {"read", "write"}


@pytest.mark.django_db
@pytest.mark.parametrize("visibility", ["public", "unlisted", "private"])
def test_a_baseline_lends_its_figures_when_listed_or_compared(visibility):
    """A guest's overhead against its host baseline, in the one query that
    reads the results: only a listed baseline, or one among the compared
    runs, lends its figures."""
    host = store("full-none.json.gz", role="host", visibility=visibility)
    guests = [store("full-writeback.json.gz", baseline_id=host.pk) for _ in range(2)]

    def overheads(data: dict) -> list:
        return [
            e["overhead"]
            for t in data["tests"]
            for m in t["metrics"]
            for e in m["runs"]
            if e["run"] == guests[0].pk and m["kind"] == "figure"
        ]

    alone = assert_same(guests)
    assert all(o is not None for o in overheads(alone)) == (visibility == "public")
    assert any(o is not None for o in overheads(alone)) == (visibility == "public")
    with_host = assert_same([*guests, host])
    assert all(o is not None for o in overheads(with_host))
