"""The one statistic of a figure over a run's repeats, in the standard library.

A run's figure is the geometric mean of its repeats, with a 95% Student-t
interval computed on the logarithms and turned back with ``exp`` (always
positive, asymmetric the way multiplicative disk noise is); fewer than
``MIN_REPEATS`` repeats give no interval, a repeat that measured zero gives no
log-scale figure at all.  The server's run page shows exactly this
(benchdb/results/stats.py takes its mean and standard deviation from
``mean_sd`` here, and tests/results/test_agent_stats.py holds ``summarize``
equal to the server's, SciPy's t quantile included), so the table the agent
prints at the end of a run and the run page agree figure for figure.

The t quantile is computed without SciPy: the Student-t distribution function
through the regularized incomplete beta function (its continued fraction,
DLMF 8.17.22, evaluated with the modified Lentz method), inverted by
bisection to the last bit.
"""

from __future__ import annotations

import math
from functools import lru_cache

CONFIDENCE = 0.95
MIN_REPEATS = 3
NOT_ENOUGH = "not enough repeats to estimate noise"
ZERO = "no interval: a repeat measured zero"
# An interval whose upper bound is more than this many times its lower is too
# wide to estimate anything (``too_wide``; benchdb/results/stats.py says why
# 10): the run page, the exports and this table say so instead of its bounds.
TOO_WIDE_FACTOR = 10.0
TOO_NOISY = "too noisy to estimate"


def too_wide(low, high) -> bool:
    """Whether a 95% interval (of a positive figure, or of a ratio) is too
    wide to estimate anything: its lower bound at or below zero, or its upper
    bound more than ``TOO_WIDE_FACTOR`` times its lower.  False without an
    interval (that is "not enough repeats", said otherwise)."""
    if low is None or high is None:
        return False
    if low <= 0:
        return True
    return high > low * TOO_WIDE_FACTOR


def too_noisy_text(n, unit: str = "repeat") -> str:
    """What is shown instead of a too-wide interval's bounds: "too noisy to
    estimate (3 repeats)"."""
    if not n:
        return TOO_NOISY
    return f"{TOO_NOISY} ({n} {unit}{'' if n == 1 else 's'})"


def mean_sd(xs: list) -> tuple:
    """Mean and sample standard deviation (n - 1, None below two values) of a
    non-empty list of floats: the server's ``stats._mean_sd``."""
    n = len(xs)
    m = math.fsum(xs) / n
    if n < 2:
        return m, None
    return m, math.sqrt(math.fsum([(v - m) ** 2 for v in xs]) / (n - 1))


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (DLMF 8.17.22), modified Lentz."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 1000):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return f


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b)
        - math.lgamma(a)
        - math.lgamma(b)
        + a * math.log(x)
        + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


@lru_cache(maxsize=256)
def t_quantile(confidence: float, df: float) -> float:
    """The two-sided critical value q of Student's t with ``df`` degrees of
    freedom: P(|T| <= q) = ``confidence`` (SciPy's ``stdtrit(df, 0.5 +
    confidence / 2)``).

    P(|T| > t) = I_x(df/2, 1/2) with x = df / (df + t²), increasing in x:
    bisect x until the interval cannot shrink, then t = sqrt(df (1 - x) / x).
    """
    tail = 1.0 - confidence
    low, high = 0.0, 1.0
    while True:
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        if incomplete_beta(df / 2.0, 0.5, mid) < tail:
            low = mid
        else:
            high = mid
    x = (low + high) / 2.0
    return math.sqrt(df * (1.0 - x) / x)


def centre(summary: dict) -> float | None:
    """A run's figure of one metric, from its summary (``summarize``, or the
    server's): the geometric mean of the repeats, the centre of the 95%
    interval drawn with it, so a value and its whisker are about the same
    quantity.  The arithmetic mean only where there is no geometric mean (a
    repeat measured zero), and then there is no interval either.  What the
    run page, the compare page, this table and the server's stored figure
    columns (lists, ranks, reports, exports) all show."""
    g = summary.get("gmean")
    return g if g is not None else summary.get("mean")


def summarize(values) -> dict:
    """One figure over a run's repeats: ``n``, ``min``, ``max``, ``mean``
    (arithmetic), ``gmean`` and its 95% interval ``ci95_low``..``ci95_high``
    (on the log scale; None below ``MIN_REPEATS`` repeats or when a repeat is
    zero), and ``note`` saying why there is no interval."""
    xs = [float(v) for v in values if v is not None]
    n = len(xs)
    out = {
        "n": n,
        "min": min(xs) if xs else None,
        "max": max(xs) if xs else None,
        "mean": mean_sd(xs)[0] if xs else None,
        "gmean": None,
        "ci95_low": None,
        "ci95_high": None,
        "note": None,
    }
    if xs and min(xs) > 0:
        log_mean, log_sd = mean_sd([math.log(v) for v in xs])
        # Within the repeats' range, as it is exactly: exp(log(x)) of one
        # repeat (or of equal ones) is x give or take the last bit.
        out["gmean"] = min(max(math.exp(log_mean), out["min"]), out["max"])
        if n >= MIN_REPEATS:
            half = t_quantile(CONFIDENCE, n - 1) * log_sd / math.sqrt(n)
            out["ci95_low"] = math.exp(log_mean - half)
            out["ci95_high"] = math.exp(log_mean + half)
    if n < MIN_REPEATS:
        out["note"] = NOT_ENOUGH
    elif out["ci95_low"] is None:
        out["note"] = ZERO
    return out


def human(value, metric: str, micro: str = "us", missing: str = "-") -> str:
    """A figure as people read it, the same on the run page (which passes
    ``micro="µs"``, benchdb_format.human) and in the agent's end-of-run table
    (ASCII "us" for any terminal)."""
    if value is None:
        return missing
    if metric == "bw_bytes":
        return f"{value / 1e6:,.1f} MB/s"
    if metric == "io_bytes":
        return f"{value / 2**20:,.1f} MiB"
    if metric.endswith("_ns"):
        if value >= 1e6:
            return f"{value / 1e6:,.2f} ms"
        return f"{value / 1e3:,.1f} {micro}"
    if metric == "runtime_s":
        return f"{value:,.3f} s"
    if metric == "iops":
        return f"{value:,.0f} IOPS"
    return f"{value:,.4g}"
