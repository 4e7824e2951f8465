"""Statistics over repeats and across runs: the one module everything uses.

The API, the pages, the exports and the reports take every interval, p-value
and verdict from here, computed with SciPy (``scipy.stats``) and NumPy.

Choices, and why:

- **Intervals on the log scale.**  Bandwidth, IOPS and latency are positive
  and their noise is multiplicative (a disk 10% slower now and then, not
  5 MB/s slower).  A Student-t interval on the raw values can go below zero
  ("-1,616 IOPS – 3,511 IOPS"); the same interval computed on the logarithms
  and turned back with ``exp`` is an interval for the geometric mean that is
  always positive and asymmetric the way the data are.  The centre of the
  interval is the geometric mean (``gmean``); ``mean`` stays the arithmetic
  mean, the figure people recompute from the raw outputs.  A figure and its
  whisker must be about the same quantity, so pages plot and headline
  ``gmean`` (the arithmetic mean only where a repeat measured zero and there
  is no interval at all); the arithmetic mean has no interval of its own.
- **No interval below three repeats.**  With n = 2 the t quantile is 12.7
  and the "interval" says nothing; n = 1 has no spread at all.  Below
  ``MIN_REPEATS`` a summary gives min–max and ``NOT_ENOUGH`` instead.
- **Comparisons as ratios.**  A run against the reference is the ratio of
  geometric means, with its interval from Welch's t-test on the logarithms
  (unequal variances, Welch–Satterthwaite degrees of freedom).  The p-value
  is that same test's, so "significant" and "the interval excludes 1" agree.
  (Welch on the raw values, ``welch()``, is kept for the published worked
  examples; on seed 001 it gives writeback vs none p = 0.19 where the log
  scale gives 0.21.)
- **Holm's correction** over the comparisons shown together: one figure of
  one test, each run against the reference (k runs make k - 1 tests, not all
  k(k-1)/2 pairs).
- **Three verdicts** (``verdict()``): *faster/slower* when the Holm-adjusted
  p is below ``ALPHA``; *equivalent* ("no difference larger than Y%") when
  the whole 95% interval lies inside ±Y% (on the ratio scale, so between
  1/(1+Y) and 1+Y, which keeps A vs B the mirror of B vs A); otherwise
  *cannot tell*, with the repeats per run that would make the interval
  narrow enough to decide at the noise seen.  Y is ``EQUIVALENCE_PERCENT``
  (5%, settable as ``BENCHDB_EQUIVALENCE_PERCENT``): about the run-to-run
  noise of a good disk benchmark, and the smallest difference worth a
  configuration change.  Using the 95% interval (not TOST's 90%) makes the
  equivalence claim conservative.
- **Across runs** (``results.population``): medians and interquartile ranges
  of per-run figures, with a bootstrap interval of the median (percentile
  method, ``BOOTSTRAP_RESAMPLES`` resamples, fixed seed: the same data always
  give the same interval).  Resampling is vectorised in NumPy.  Above
  ``BOOTSTRAP_MAX_VALUES`` values, and for the overhead report's per-test
  summaries, the distribution-free order-statistic interval of the median
  (``median_order_interval``) is used: exact coverage >= 95%, no resampling.
- **Which setting wins across systems** (Wilcoxon signed-rank with the
  Hodges–Lehmann ratio, Friedman with Nemenyi's critical difference, the
  Bayesian signed-rank test's probabilities of better / equivalent / worse)
  is ``results.across``, on the same SciPy and the same margin.
- **An interval too wide to mean anything is not shown as a number**
  (``too_wide``): a 95% interval of a positive figure or of a ratio whose
  lower bound is at or below zero, or whose upper bound is more than
  ``TOO_WIDE_FACTOR`` (10) times its lower, is "too noisy to estimate".  A
  factor 10 is an interval that cannot place the figure within its order of
  magnitude (the centre known only to within ×/÷ 3.2); with 3 repeats it is
  a coefficient of variation of about 50% on the log scale, far beyond the
  ±5% the verdicts judge.  Printing its bounds ("CI −98.5%…+238298.8%",
  "0 IOPS – 117,599 IOPS") looks like a measurement and is none.  The
  bounds stay as computed in the API and exports, with the flag beside them.
- **Latency percentiles are never averaged**: a p99 of three repeats is
  shown as the three p99s and their range (``percentile_range()``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
from scipy import special
from scipy import stats as sps

# A run's figure is defined once, in the agent (stdlib, so its end-of-run
# table shows what the run page shows): mean and sample standard deviation of
# a short list, the centre of every log-scale interval here; the figure a
# summary stands for (``centre``); and when an interval is too wide to mean
# anything (re-exported: its one home).
from benchdb_agent.stats import (  # noqa: F401
    TOO_NOISY,
    TOO_WIDE_FACTOR,
    centre,
    too_noisy_text,
    too_wide,
)
from benchdb_agent.stats import mean_sd as _mean_sd

CONFIDENCE = 0.95
# Below this (Holm-adjusted) p-value a difference is called real.
ALPHA = 0.05
# Fewer repeats than this give no interval and no verdict beyond "cannot tell".
MIN_REPEATS = 3
# "No difference larger than Y%": the equivalence margin, in percent.
EQUIVALENCE_PERCENT = 5.0
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260123
BOOTSTRAP_MAX_VALUES = 1000
# Largest resample matrix (resamples x values) built at once, in elements.
_BOOTSTRAP_CHUNK = 2_000_000

NOT_ENOUGH = "not enough repeats to estimate noise"
# One line a page shows under an interval.
INTERVAL_EXPLANATION = (
    "Bars, points and tables show the same figure; its 95% interval is the "
    "geometric mean's, computed on the log scale, so it never goes below zero "
    "(the API's gmean with ci95_low–ci95_high; its mean is the arithmetic "
    "mean, which has no interval here); fewer than 3 repeats give min–max only."
)


def figure_legend(repeats) -> str:
    """What every figure of a page is, said once in its legend (``centre``):
    "Figures: geometric mean of 5 repeats, 95% interval.", with the range of
    the repeats where the figures' differ, and min–max where there are fewer
    than ``MIN_REPEATS``.  Empty without figures."""
    ns = sorted({n for n in repeats if n})
    if not ns:
        return ""
    span = str(ns[0]) if ns[0] == ns[-1] else f"{ns[0]}–{ns[-1]}"
    of = f"Figures: geometric mean of {span} repeat{'' if ns[-1] == 1 else 's'}"
    if ns[0] >= MIN_REPEATS:
        return f"{of}, 95% interval."
    if ns[-1] < MIN_REPEATS:
        return f"{of}, min–max (too few repeats for a 95% interval)."
    return f"{of}, 95% interval (min–max where fewer than {MIN_REPEATS})."


VERDICT_EXPLANATION = (
    "Each run is compared with the reference: ratio of geometric means with a "
    "95% interval (Welch's t-test on logs), p corrected by Holm over the runs "
    "shown; 'equivalent' means the whole interval is within ±{margin:g}%."
)

# ``verdict(needed=...)`` left out: compute ``repeats_needed`` there.
_COMPUTE = object()

# Verdict codes (``verdict()["verdict"]``).
FASTER = "faster"
SLOWER = "slower"
EQUIVALENT = "equivalent"
CANNOT_TELL = "cannot tell"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, CANNOT_TELL)


def _clean(values: Sequence[float] | None) -> np.ndarray:
    if values is None:
        return np.empty(0)
    return np.asarray([float(v) for v in values if v is not None], dtype=float)


def _floats(values: Sequence[float] | None) -> list[float]:
    if not values:
        return []
    if None in values:
        return [float(v) for v in values if v is not None]
    return list(map(float, values))


def mean(values: Sequence[float]) -> float | None:
    xs = _floats(values)
    return _mean_sd(xs)[0] if xs else None


def stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None below two values."""
    xs = _floats(values)
    return _mean_sd(xs)[1] if xs else None


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided critical value of Student's t: |T| <= q w.p. ``confidence``.

    ``scipy.special.stdtrit`` is the ufunc behind ``scipy.stats.t.ppf``,
    without the distribution object's per-call overhead (10 µs, not 170).
    """
    return float(special.stdtrit(df, 0.5 + confidence / 2.0))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t (``scipy.special.stdtr``)."""
    return float(2.0 * special.stdtr(df, -abs(t)))


def is_percentile(metric: str) -> bool:
    """A latency percentile (``clat_p50_ns``, ``clat_p99_ns``…): never averaged."""
    return metric.startswith("clat_p")


def summarize_metric(metric: str, values: Sequence[float]) -> dict:
    """``summarize``, or for a percentile each repeat's value and their range."""
    if is_percentile(metric):
        xs = _floats(values)
        return {
            "n": len(xs),
            "mean": None,
            "stdev": None,
            "gmean": None,
            "ci95_low": None,
            "ci95_high": None,
            "cv": None,
            "min": min(xs) if xs else None,
            "max": max(xs) if xs else None,
            "values": xs,
            "interval": "range",
            "note": "percentiles of repeats are not averaged: range shown",
        }
    return summarize(values)


def summarize(values: Sequence[float]) -> dict:
    """What a page or the API shows for one figure over a run's repeats.

    ``n``, ``mean`` (arithmetic), ``stdev``, ``cv``, ``min``, ``max``;
    ``gmean`` with its 95% interval ``ci95_low``…``ci95_high`` on the log
    scale (positive values, n >= 3 only, else None); ``note`` says why there
    is no interval.  A figure that is zero in some repeat (nothing measured)
    gets no log-scale figures at all.
    """
    return summaries([Sample(values)])[0]


def welch(a: Sequence[float], b: Sequence[float]) -> dict:
    """Welch's t-test of two samples' means on the raw values (SciPy).

    ``{"t", "df", "p"}``; all None when either side has fewer than two
    values.  Two samples without any spread: p = 1 if equal, else 0.
    """
    x, y = _clean(a), _clean(b)
    if x.size < 2 or y.size < 2:
        return {"t": None, "df": None, "p": None}
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    if va + vb == 0.0:
        same = bool(x.mean() == y.mean())
        return {"t": 0.0 if same else math.inf, "df": None, "p": 1.0 if same else 0.0}
    res = sps.ttest_ind(y, x, equal_var=False)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    return {"t": float(res.statistic), "df": float(df), "p": float(res.pvalue)}


def ratio(
    reference: Sequence[float],
    other: Sequence[float],
    confidence: float = CONFIDENCE,
) -> dict:
    """``other`` / ``reference`` as a ratio of geometric means, with its interval.

    Welch's t-test on the logarithms: ``ratio``, ``low``, ``high`` (None when
    either side has fewer than ``MIN_REPEATS`` values), ``p`` (two-sided, of
    "the ratio is 1"), ``df``, ``n_reference``, ``n_other`` and ``se_log``
    (the standard error of the log ratio, for the repeats-needed estimate).
    Swapping the two sides gives 1/ratio, 1/high…1/low and the same p.
    Non-positive values have no logarithm: the answer is all None then.
    """
    return ratios([(Sample(reference), Sample(other))], confidence)[0]


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values, in the order given (None kept).

    The family is the non-None p-values: the smallest is multiplied by m,
    the next by m - 1, …, made monotone and capped at 1.
    """
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    p = [float(pvalues[i]) for i in idx]
    m = len(p)
    if any(x != x for x in p):  # NaN: NumPy's order and propagation
        arr = np.asarray(p, dtype=float)
        order = np.argsort(arr, kind="stable")
        adjusted = np.minimum(
            1.0, np.maximum.accumulate(arr[order] * (m - np.arange(m)))
        )
        for rank, j in enumerate(order):
            out[idx[j]] = float(adjusted[rank])
        return out
    # Plain Python for a family of a few p-values (NumPy's per-call cost is
    # twice the arithmetic): the same products, running maximum and cap, in
    # the same stable order as ``np.argsort(kind="stable")``.
    running = -math.inf
    for rank, j in enumerate(sorted(range(m), key=p.__getitem__)):
        value = p[j] * (m - rank)
        if value > running:
            running = value
        out[idx[j]] = 1.0 if running > 1.0 else running
    return out


def format_p(p: float | None) -> str:
    """How every page and report prints a p-value: "p < 0.001", "p = 0.02"."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "p not computed"
    if p < 0.001:
        return "p < 0.001"
    if p < 0.01:
        return f"p = {p:.3f}"
    return f"p = {p:.2f}"


def format_percent(value: float) -> str:
    return f"{value:+.1f}%"


def too_wide_percent(low: float | None, high: float | None) -> bool:
    """``too_wide`` of a ratio's interval given as percent changes
    (−98.5…+238298.8 is the ratio 0.015…2383.99)."""
    if low is None or high is None:
        return False
    return too_wide(1.0 + low / 100.0, 1.0 + high / 100.0)


def repeats_needed(
    sd_log_reference: float | None,
    sd_log_other: float | None,
    margin_percent: float = EQUIVALENCE_PERCENT,
    confidence: float = CONFIDENCE,
    limit: int = 1000,
) -> int | None:
    """Repeats per run that would settle a comparison at this noise.

    An interval of half-width below half the margin (on the log scale) always
    gives a verdict: it either excludes no change or lies inside ±margin.
    The smallest n (the same on both sides, at least MIN_REPEATS) with
    t(n) * sqrt((s_a² + s_b²) / n) < log(1 + margin) / 2; None without a
    noise estimate, and ``limit`` + 1 meaning "more than is practical".
    """
    return repeats_needed_many(
        [(sd_log_reference, sd_log_other)], margin_percent, confidence, limit
    )[0]


def equivalence_band(margin_percent: float = EQUIVALENCE_PERCENT) -> tuple:
    """The ratio interval counted as "no difference": 1/(1+Y) … 1+Y."""
    hi = 1.0 + margin_percent / 100.0
    return 1.0 / hi, hi


def interval_verdict(
    ratio: float,
    low: float,
    high: float,
    higher_is_better: bool | None,
    margin_percent: float = EQUIVALENCE_PERCENT,
) -> str:
    """An across-runs effect's verdict from its interval alone (the reports'
    and the population answers'): ``FASTER`` or ``SLOWER`` when the interval
    ``low``…``high`` of ``ratio`` excludes 1 (which is better by
    ``higher_is_better``; up counts as faster when neither is),
    ``EQUIVALENT`` when it lies inside the equivalence band
    (``equivalence_band``), else ``CANNOT_TELL``."""
    if low > 1.0 or high < 1.0:
        up = ratio > 1.0
        better = up if higher_is_better is not False else not up
        return FASTER if better else SLOWER
    lo_band, hi_band = equivalence_band(margin_percent)
    if lo_band <= low and high <= hi_band:
        return EQUIVALENT
    return CANNOT_TELL


def verdict(
    r: dict,
    p_adjusted: float | None,
    higher_is_better: bool | None,
    margin_percent: float = EQUIVALENCE_PERCENT,
    *,
    needed: int | None | object = _COMPUTE,
) -> dict:
    """Which of the three verdicts a ratio (from ``ratio()``) supports.

    ``{"verdict", "text", "percent", "percent_low", "percent_high",
    "repeats_needed"}``: percent is (ratio - 1) * 100 of the figure itself
    (so +20% latency reads "slower by 20.0%").  For a figure with no better
    direction (``higher_is_better`` None) a real difference is "higher" or
    "lower" in the text and ``faster``/``slower`` stand for up/down.
    ``needed``: ``repeats_needed()`` of this ratio when the caller computed
    it already (``repeats_needed_many``).
    """
    out = {
        "verdict": CANNOT_TELL,
        "text": "",
        "percent": None,
        "percent_low": None,
        "percent_high": None,
        "repeats_needed": None,
    }
    if r.get("ratio") is not None:
        out["percent"] = (r["ratio"] - 1.0) * 100.0
    if r.get("low") is None:
        n = min(r.get("n_reference") or 0, r.get("n_other") or 0)
        out["text"] = (
            f"cannot tell: too few repeats ({n}; at least {MIN_REPEATS} "
            "per run are needed to estimate noise)"
            if n < MIN_REPEATS
            else "cannot tell: no interval for this figure"
        )
        return out
    out["percent_low"] = (r["low"] - 1.0) * 100.0
    out["percent_high"] = (r["high"] - 1.0) * 100.0
    if too_wide(r["low"], r["high"]):
        n = min(r.get("n_reference") or 0, r.get("n_other") or 0)
        ci = f"interval {too_noisy_text(n)}"
    else:
        ci = (
            f"CI {format_percent(out['percent_low'])}…"
            f"{format_percent(out['percent_high'])}"
        )
    lo_band, hi_band = equivalence_band(margin_percent)
    if p_adjusted is not None and p_adjusted < ALPHA and r["ratio"] != 1.0:
        up = r["ratio"] > 1.0
        if higher_is_better is None:
            word = "higher" if up else "lower"
            out["verdict"] = FASTER if up else SLOWER
        else:
            better = up if higher_is_better else not up
            word = FASTER if better else SLOWER
            out["verdict"] = word
        out["text"] = (
            f"{word} by {abs(out['percent']):.1f}% ({ci}, {format_p(p_adjusted)})"
        )
    elif lo_band <= r["low"] and r["high"] <= hi_band:
        out["verdict"] = EQUIVALENT
        out["text"] = (
            f"no difference larger than {margin_percent:g}% (equivalent; {ci})"
        )
    else:
        need = (
            repeats_needed(
                r.get("sd_log_reference"), r.get("sd_log_other"), margin_percent
            )
            if needed is _COMPUTE
            else needed
        )
        out["repeats_needed"] = need
        if need is None:
            extra = ""
        elif need > 1000:
            extra = "; more than 1000 repeats per run would be needed at this noise"
        else:
            extra = f"; about {need} repeats per run would be needed at this noise"
        out["text"] = f"cannot tell: too few repeats or too much noise ({ci}{extra})"
    return out


def compare_to_reference(
    reference: Sequence[float],
    others: Sequence[Sequence[float]],
    higher_is_better: bool | None,
    margin_percent: float = EQUIVALENCE_PERCENT,
) -> list[dict]:
    """Each sample in ``others`` against ``reference``, Holm over all of them.

    Per other sample: ``ratio()``'s figures, ``p`` (unadjusted),
    ``p_adjusted`` (Holm over this family), ``p_text`` and the verdict.
    """
    samples = [Sample(o) for o in others]
    families = [(Sample(reference), samples, higher_is_better)]
    return compare_families(families, margin_percent)[0]


def _family_parts(
    ratios: list[dict],
    higher_is_better: bool | None,
    margin_percent: float,
    needed: Sequence,
) -> list[tuple]:
    """One family's answers (Holm over its ratios, with their
    ``repeats_needed``) in parts: (ratio, p_adjusted, p_text, family_size,
    verdict) per pair."""
    adjusted = holm([r["p"] for r in ratios])
    family_size = sum(1 for x in adjusted if x is not None)
    return [
        (
            r,
            p_adj,
            format_p(p_adj) if p_adj is not None else None,
            family_size,
            verdict(r, p_adj, higher_is_better, margin_percent, needed=need),
        )
        for r, p_adj, need in zip(ratios, adjusted, needed, strict=True)
    ]


def _answer(r: dict, p_adj, p_text, family_size: int, v: dict) -> dict:
    """One pair's answer of ``compare_to_reference`` from its parts."""
    return {
        **r,
        "p_adjusted": p_adj,
        "p_text": p_text,
        "family_size": family_size,
        **v,
    }


def overhead(
    guest: Sequence[float], host: Sequence[float], higher_is_better: bool | None
) -> dict:
    """Guest / host as a ratio of geometric means with its 95% interval.

    1.0 is native speed.  ``ratio``, ``low``, ``high`` (None below
    ``MIN_REPEATS`` repeats on either side), ``p`` (of "no overhead"),
    ``percent`` and a ``text`` such as "guest 0.62× host (CI 0.58…0.66)".
    ``slower`` says whether the guest is worse than the host, taking the
    figure's direction into account (None when not significant).
    """
    return overhead_of(ratio(host, guest), higher_is_better)


def overhead_of(r: dict, higher_is_better: bool | None) -> dict:
    """``overhead()`` from ``ratio(host, guest)``, computed already."""
    out = {
        "ratio": r["ratio"],
        "low": r["low"],
        "high": r["high"],
        "p": r["p"],
        "n_guest": r["n_other"],
        "n_host": r["n_reference"],
        "percent": None if r["ratio"] is None else (r["ratio"] - 1.0) * 100.0,
        "slower": None,
        "text": "",
    }
    if r["ratio"] is None:
        out["text"] = "no overhead: a side has no positive figure"
        return out
    if r["low"] is None:
        out["text"] = f"guest {r['ratio']:.2f}× host ({NOT_ENOUGH})"
        return out
    if too_wide(r["low"], r["high"]):
        n = min(r["n_other"] or 0, r["n_reference"] or 0)
        out["text"] = f"guest ÷ host {too_noisy_text(n)}"
    else:
        out["text"] = (
            f"guest {r['ratio']:.2f}× host (CI {r['low']:.2f}…{r['high']:.2f})"
        )
    if r["p"] is not None and r["p"] < ALPHA and higher_is_better is not None:
        out["slower"] = (r["ratio"] < 1.0) if higher_is_better else (r["ratio"] > 1.0)
    return out


# Batched: a comparison's every figure at once ---------------------------------
# A comparison of ten runs sets about a thousand samples against their
# references.  These give exactly what ``summarize``, ``ratio``,
# ``compare_to_reference`` and ``overhead`` give one sample or pair at a time
# (tests/results/test_batched_stats.py compares them value for value): the
# same arithmetic in the same order, on each sample's figures computed once
# (``Sample``), with SciPy's t functions called once over arrays of every
# pair's degrees of freedom instead of once per pair.


class Sample:
    """One run's repeats of one figure, with what every answer about it uses.

    ``xs`` the values as floats (None dropped), ``n``, ``min``, ``max``;
    ``log_mean`` and ``log_sd`` (n - 1; None below two values) of the
    logarithms, None unless every value is positive (or ``logs`` is false:
    a percentile, never averaged).
    """

    __slots__ = ("xs", "n", "min", "max", "log_mean", "log_sd")

    def __init__(self, values: Sequence[float] | None, logs: bool = True):
        xs = self.xs = _floats(values)
        self.n = len(xs)
        if not xs:
            self.min = self.max = self.log_mean = self.log_sd = None
            return
        self.min = low = min(xs)
        self.max = max(xs)
        if logs and low > 0:
            self.log_mean, self.log_sd = _mean_sd(list(map(math.log, xs)))
        else:
            self.log_mean = self.log_sd = None


def _t_quantiles(dfs: Sequence[float], confidence: float = CONFIDENCE) -> list:
    """``t_quantile`` of each degrees of freedom: one ufunc call."""
    if not dfs:
        return []
    q = special.stdtrit(np.asarray(dfs, dtype=float), 0.5 + confidence / 2.0)
    return q.tolist()


def summaries(samples: Sequence[Sample], confidence: float = CONFIDENCE) -> list:
    """``summarize(values)`` of each sample, in order: the t quantile of
    each sample size once, in one call."""
    out = []
    for s, (m, sd, gmean, low, high, note) in zip(
        samples, summary_rows(samples, confidence), strict=True
    ):
        out.append(
            {
                "n": s.n,
                "mean": m,
                "stdev": sd,
                "gmean": gmean,
                "ci95_low": low,
                "ci95_high": high,
                "cv": (sd / m) if (sd is not None and m) else None,
                "min": s.min,
                "max": s.max,
                "interval": "log-t",
                "note": note,
            }
        )
    return out


def summary_rows(samples: Sequence[Sample], confidence: float = CONFIDENCE) -> list:
    """What ``summaries`` says of each sample beside its n, min and max, as
    (mean, stdev, gmean, ci95_low, ci95_high, note): for a caller that puts
    the figures in its own rows (``compare.build_comparison``)."""
    sizes = sorted(
        {s.n for s in samples if s.log_mean is not None and s.n >= MIN_REPEATS}
    )
    quantile = dict(
        zip(sizes, _t_quantiles([n - 1 for n in sizes], confidence), strict=True)
    )
    exp, sqrt = math.exp, math.sqrt
    out = []
    for s in samples:
        n = s.n
        m, sd = _mean_sd(s.xs) if n else (None, None)
        gmean = low = high = None
        lm = s.log_mean
        if lm is not None:
            # Within the repeats' range, as it is exactly: exp(log(x)) of one
            # repeat (or of equal ones) is x give or take the last bit.
            gmean = min(max(exp(lm), s.min), s.max)
            if n >= MIN_REPEATS:
                half = quantile[n] * s.log_sd / sqrt(n)
                low = exp(lm - half)
                high = exp(lm + half)
        if n < MIN_REPEATS:
            note = NOT_ENOUGH
        elif low is None:
            note = "no interval: a repeat measured zero"
        else:
            note = None
        out.append((m, sd, gmean, low, high, note))
    return out


def ratios(
    pairs: Sequence[tuple[Sample, Sample]], confidence: float = CONFIDENCE
) -> list[dict]:
    """``ratio(reference, other)`` of each (reference, other) pair, in order:
    the t quantiles and p-values of every pair in one call each."""
    out, pending = [], []
    for ref, other in pairs:
        nx, ny = ref.n, other.n
        r = {
            "ratio": None,
            "low": None,
            "high": None,
            "p": None,
            "df": None,
            "se_log": None,
            "n_reference": nx,
            "n_other": ny,
            "sd_log_reference": None,
            "sd_log_other": None,
        }
        out.append(r)
        if ref.log_mean is None or other.log_mean is None:
            continue
        sx, sy = ref.log_sd, other.log_sd
        diff = other.log_mean - ref.log_mean
        r["ratio"] = math.exp(diff)
        if nx < MIN_REPEATS or ny < MIN_REPEATS:
            continue
        r["sd_log_reference"], r["sd_log_other"] = sx, sy
        va, vb = sx**2 / nx, sy**2 / ny
        se = math.sqrt(va + vb)
        r["se_log"] = se
        if se == 0.0:
            r["low"] = r["high"] = r["ratio"]
            r["p"] = 1.0 if diff == 0 else 0.0
            continue
        df = (va + vb) ** 2 / (va**2 / (nx - 1) + vb**2 / (ny - 1))
        pending.append((r, diff, se, df))
    if pending:
        dfs = np.asarray([df for _r, _d, _s, df in pending], dtype=float)
        quantiles = special.stdtrit(dfs, 0.5 + confidence / 2.0).tolist()
        ts = np.asarray([-abs(d / se) for _r, d, se, _df in pending], dtype=float)
        ps = (2.0 * special.stdtr(dfs, ts)).tolist()
        for (r, diff, se, df), q, p in zip(pending, quantiles, ps, strict=True):
            half = q * se
            r["low"], r["high"] = math.exp(diff - half), math.exp(diff + half)
            r["df"] = df
            r["p"] = p
    return out


def repeats_needed_many(
    sds: Sequence[tuple[float | None, float | None]],
    margin_percent: float = EQUIVALENCE_PERCENT,
    confidence: float = CONFIDENCE,
    limit: int = 1000,
) -> list[int | None]:
    """``repeats_needed(a, b, margin_percent)`` of each (a, b), in order: the
    same search, every pair's next n tried in one ufunc call."""
    out: list[int | None] = [None] * len(sds)
    target = math.log1p(margin_percent / 100.0) / 2.0
    z = float(special.ndtri(0.5 + confidence / 2.0))
    todo = []
    for i, (a, b) in enumerate(sds):
        if a is None or b is None:
            continue
        var = a**2 + b**2
        if var == 0.0:
            out[i] = MIN_REPEATS
            continue
        ratio = var**2 / (a**4 + b**4)
        n = max(MIN_REPEATS, math.ceil(z * z * var / (target * target)))
        if n > limit:
            out[i] = limit + 1
            continue
        todo.append((i, n, var, ratio))
    if not todo:
        return out
    index = np.asarray([t[0] for t in todo])
    n = np.asarray([t[1] for t in todo], dtype=np.int64)
    var = np.asarray([t[2] for t in todo], dtype=float)
    rat = np.asarray([t[3] for t in todo], dtype=float)
    p = 0.5 + confidence / 2.0

    def decides(n, var, rat):
        return special.stdtrit((n - 1) * rat, p) * np.sqrt(var / n) < target

    ok = decides(np.full(n.shape, limit, dtype=np.int64), var, rat)
    for i in index[~ok].tolist():
        out[i] = limit + 1
    index, n, var, rat = index[ok], n[ok], var[ok], rat[ok]
    while index.size:
        done = decides(n, var, rat)
        for i, k in zip(index[done].tolist(), n[done].tolist(), strict=True):
            out[i] = k
        keep = ~done
        index, n, var, rat = index[keep], n[keep] + 1, var[keep], rat[keep]
    return out


def compare_families(
    families: Sequence[tuple[Sample, Sequence[Sample], bool | None]],
    margin_percent: float = EQUIVALENCE_PERCENT,
) -> list[list[dict]]:
    """``compare_to_reference`` of each (reference, others, higher_is_better)
    family, in order, every pair's ratio and repeats-needed computed at once."""
    return [
        [_answer(*parts) for parts in family]
        for family in family_parts(families, margin_percent)
    ]


def family_parts(
    families: Sequence[tuple[Sample, Sequence[Sample], bool | None]],
    margin_percent: float = EQUIVALENCE_PERCENT,
) -> list[list[tuple]]:
    """``compare_families``' answers in parts, per pair (ratio(), p_adjusted,
    p_text, family_size, verdict()): its answer is ``{**ratio, "p_adjusted",
    "p_text", "family_size", **verdict}``, which a caller that copies a few
    of them into its own rows need not build (``compare.build_comparison``)."""
    pairs = [(ref, o) for ref, others, _hib in families for o in others]
    answers = ratios(pairs)
    needed = repeats_needed_many(
        [
            (r["sd_log_reference"], r["sd_log_other"])
            if r["low"] is not None
            else (None, None)
            for r in answers
        ],
        margin_percent,
    )
    out, at = [], 0
    for _ref, others, hib in families:
        k = len(others)
        out.append(
            _family_parts(
                answers[at : at + k], hib, margin_percent, needed[at : at + k]
            )
        )
        at += k
    return out


def percentile_range(values: Sequence[float]) -> dict:
    """A latency percentile over repeats: each repeat's value and their range.

    Percentiles of different repeats are never averaged (the mean of three
    p99s is not the p99 of anything); ``{"n", "values", "min", "max"}``.
    """
    x = _clean(values)
    return {
        "n": int(x.size),
        "values": [float(v) for v in x],
        "min": float(x.min()) if x.size else None,
        "max": float(x.max()) if x.size else None,
    }


def median_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Median, quartiles and a percentile-bootstrap interval of the median.

    Vectorised: the resamples are drawn as index matrices in chunks of at
    most ``_BOOTSTRAP_CHUNK`` elements.  Fixed seed, so the same values give
    the same interval.  No interval below ``MIN_REPEATS`` values.  Beyond
    ``BOOTSTRAP_MAX_VALUES`` values the order-statistic interval is used
    instead (``interval_method`` says which): the two agree at that size, and
    2000 resamples of 100,000 runs would cost seconds per request.
    """
    # Resampled in the order given (sort first for an order-free answer):
    # negating the values then negates and mirrors the interval exactly.
    x = _clean(values)
    n = int(x.size)
    out = {
        "n": n,
        "median": None,
        "q1": None,
        "q3": None,
        "min": None,
        "max": None,
        "ci95_low": None,
        "ci95_high": None,
        "interval_method": None,
    }
    if not n:
        return out
    out["median"] = float(np.median(x))
    out["q1"], out["q3"] = (float(q) for q in np.quantile(x, [0.25, 0.75]))
    out["min"], out["max"] = float(x.min()), float(x.max())
    if n < MIN_REPEATS:
        return out
    if n > BOOTSTRAP_MAX_VALUES:
        # Many values: the distribution-free interval, cheap and as good.
        out["ci95_low"], out["ci95_high"] = median_order_interval(
            np.sort(x), confidence
        )
        out["interval_method"] = "order statistics"
        return out
    medians = bootstrap_medians(x, resamples, seed)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    out["ci95_low"], out["ci95_high"] = float(low), float(high)
    out["interval_method"] = "bootstrap"
    return out


def median_order_interval(
    sorted_values: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """Distribution-free interval of the median from order statistics.

    [x(j), x(n-j+1)] with the largest j whose coverage, 1 - 2 P(B < j) for
    B ~ Binomial(n, 1/2), is at least ``confidence``; (None, None) below six
    values, where no such j exists at 95%.  ``sorted_values`` ascending.
    """
    n = len(sorted_values)
    j = median_order_rank(n, confidence)
    if j is None:
        return None, None
    return float(sorted_values[j - 1]), float(sorted_values[n - j])


def median_order_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The 1-based rank j of ``median_order_interval``: [x(j), x(n-j+1)]."""
    if n < 1:
        return None
    j = int(sps.binom.ppf((1.0 - confidence) / 2.0, n, 0.5))
    if j < 1 or sps.binom.cdf(j - 1, n, 0.5) > (1.0 - confidence) / 2.0:
        return None
    return j


def content_seed(x: np.ndarray) -> int:
    """A seed fixed by the values themselves (in the order given)."""
    return BOOTSTRAP_SEED ^ zlib.crc32(np.ascontiguousarray(x, dtype=float).tobytes())


def bootstrap_medians(
    x: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples of ``x`` (NumPy)."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    n = x.size
    per_chunk = max(1, _BOOTSTRAP_CHUNK // n)
    out = np.empty(resamples)
    done = 0
    while done < resamples:
        k = min(per_chunk, resamples - done)
        out[done : done + k] = np.median(x[rng.integers(0, n, size=(k, n))], axis=1)
        done += k
    return out


def percent_delta(reference: float | None, value: float | None) -> float | None:
    """(value - reference) / reference in percent; None if undefined."""
    if reference in (None, 0) or value is None:
        return None
    return (value - reference) / reference * 100.0


def percentile_rank(value: float, population: Sequence[float]) -> float | None:
    """Share of the population at or below ``value``, in percent (0..100).

    Ties count half, the usual definition, so a value equal to every member
    ranks at 50.
    """
    pop = _clean(population)
    if not pop.size:
        return None
    return float(sps.percentileofscore(pop, value, kind="mean"))
