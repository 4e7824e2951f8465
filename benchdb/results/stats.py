"""Statistics over repeats: the one place the API and the pages take them from.

Mean, sample standard deviation, a 95% confidence interval from Student's t
distribution, Welch's t-test between two runs' repeats, and percentile rank.
Pure Python (no SciPy): Student's t CDF through the regularized incomplete
beta function (continued fraction, as in Numerical Recipes §6.4), accurate to
well below the precision any benchmark repeat count can use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95
# Below this p-value a difference between two runs is called significant.
ALPHA = 0.05


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None below two values."""
    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b)
        - math.lgamma(a)
        - math.lgamma(b)
        + a * math.log(x)
        + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The two-sided critical value: |T| <= q with probability ``p``."""
    lo, hi = 0.0, 1.0
    while t_sf_two_sided(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf_two_sided(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def summarize(values: Sequence[float]) -> dict:
    """n, mean, stdev, 95% CI (None where fewer than two values), cv."""
    vals = [float(v) for v in values if v is not None]
    n = len(vals)
    m = mean(vals)
    s = stdev(vals)
    if n >= 2 and s is not None:
        half = t_quantile(CONFIDENCE, n - 1) * s / math.sqrt(n)
        low, high = m - half, m + half
    else:
        low = high = None
    cv = (s / m) if (s is not None and m) else None
    return {
        "n": n,
        "mean": m,
        "stdev": s,
        "ci95_low": low,
        "ci95_high": high,
        "cv": cv,
        "min": min(vals) if vals else None,
        "max": max(vals) if vals else None,
    }


def welch(a: Sequence[float], b: Sequence[float]) -> dict:
    """Welch's t-test of two samples' means.

    Returns ``{"t", "df", "p", "significant", "verdict"}``; ``verdict`` is one
    of "significant", "within noise", "not enough repeats".  Two samples with
    no spread at all and different means are called significant (p = 0).
    """
    a = [float(v) for v in a if v is not None]
    b = [float(v) for v in b if v is not None]
    if len(a) < 2 or len(b) < 2:
        return {
            "t": None,
            "df": None,
            "p": None,
            "significant": None,
            "verdict": "not enough repeats",
        }
    ma, mb = mean(a), mean(b)
    va, vb = stdev(a) ** 2, stdev(b) ** 2
    se2 = va / len(a) + vb / len(b)
    if se2 == 0.0:
        same = ma == mb
        return {
            "t": 0.0 if same else math.inf,
            "df": None,
            "p": 1.0 if same else 0.0,
            "significant": not same,
            "verdict": "within noise" if same else "significant",
        }
    t = (mb - ma) / math.sqrt(se2)
    df = se2**2 / (
        (va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1)
    )
    p = t_sf_two_sided(t, df)
    significant = p < ALPHA
    return {
        "t": t,
        "df": df,
        "p": p,
        "significant": significant,
        "verdict": "significant" if significant else "within noise",
    }


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
    pop = [v for v in population if v is not None]
    if not pop:
        return None
    below = sum(1 for v in pop if v < value)
    equal = sum(1 for v in pop if v == value)
    return (below + 0.5 * equal) / len(pop) * 100.0
