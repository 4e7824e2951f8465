"""Which setting wins across systems: tests over N systems, pure functions.

``results.stats`` works within runs (repeats) and ``results.population``
reads the community's runs; this module answers "A or B?" and "which of k
settings?" over the systems that measured them, the problem Demšar solved
for "k algorithms over N data sets" (JMLR 7, 2006).  Each function takes
per-system figures (already reduced to one number per system and setting:
the mean log figure of its runs) and returns plain dicts; nothing here reads
the database but the posteriors kept by their inputs
(``bayes_signed_ranks``, inside a stored answer's computation).

- **Two settings** (``two_settings``): the per-system log ratio d = ln(B/A).
  The Wilcoxon signed-rank test on d (``scipy.stats.wilcoxon``; zero
  differences split between the signs, as Demšar does), and the
  Hodges–Lehmann estimate of the ratio: exp of the median of the Walsh
  averages (d_i + d_j)/2, i <= j, with its distribution-free interval, the
  Walsh averages of ranks k and M + 1 - k (M = n(n+1)/2) where k - 1 is the
  signed-rank statistic's critical value (exact null distribution).  Unlike
  the median ratio, a system's weight follows its rank, and the interval's
  coverage does not rest on resampling.
- **k settings** (``k_settings``): ranks within each system (1 = best),
  average ranks, Friedman's statistic as Demšar writes it (no tie
  correction), the Iman–Davenport F and its p (Demšar's recommendation), and
  SciPy's tie-corrected chi-square beside them; Nemenyi's critical
  difference CD = q_alpha * sqrt(k(k+1)/(6N)) with q_alpha the studentized
  range quantile over sqrt(2), each pair's Nemenyi p, and the groups whose
  ranks lie within CD (the bars of a critical-difference diagram).
- **Probabilities** (``bayes_signed_rank``): the Bayesian signed-rank test
  of Benavoli et al. (ICML 2014; JMLR 18, 2017), a Dirichlet process on the
  per-system differences with a pseudo-observation at 0 of weight 0.5, and a
  region of practical equivalence of +-``EQUIVALENCE_PERCENT`` (on the
  ratio, so ln(1 + Y/100) on d).  It returns the posterior probability that
  B is better, practically equivalent, or worse.  It is ``baycomp``'s
  ``SignedRankTest`` (PyPI ``baycomp`` 1.0.3, which runs with the pinned
  NumPy and SciPy): the same draws from the same seed give the same
  probabilities (tests/results/test_across.py), computed with one matrix
  product per chunk of draws instead of baycomp's Python loop over 50,000
  draws (1.5 s for eight systems).  baycomp itself is not a dependency: it
  requires matplotlib for plots benchdb does not draw, and its hierarchical
  model (Corani et al. 2017) needs PyStan, a C++ toolchain at run time.
- **Too few systems** (``MIN_SYSTEMS``): with n paired systems the smallest
  two-sided p the signed-rank test can reach is 2/2^n: 0.0625 at 5, 0.031 at
  6.  Below 6 systems no answer can call a difference real, so each answer
  says "not enough systems yet" and how many more are needed instead.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import inspect
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from scipy import stats as sps

from benchdb.results import answer_cache, stats

# Below this many systems the signed-rank test cannot reach p < 0.05.
MIN_SYSTEMS = 6
# Draws of the Bayesian signed-rank posterior (baycomp's default).
POSTERIOR_SAMPLES = 50_000
# The Dirichlet process' pseudo-observation at 0 (baycomp's default).
PRIOR_WEIGHT = 0.5
POSTERIOR_SEED = 20260123
# Largest (draws x systems) block of the posterior computed at once.
_CHUNK = 2_000_000
# Exact signed-rank null distribution up to this many systems, normal above.
_EXACT_MAX = 400

NOT_ENOUGH_SYSTEMS = "not enough systems yet"


def _finite(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[np.isfinite(x)]


def systems_needed(n: int, minimum: int = MIN_SYSTEMS) -> int:
    """How many more systems an answer needs (0 when it has enough)."""
    return max(0, minimum - n)


def not_enough_text(n: int, measured: str = "both") -> str:
    """ "not enough systems yet: 4 systems measured both, at least 6 needed
    (2 more)"."""
    return (
        f"{NOT_ENOUGH_SYSTEMS}: {n} system{'s' * (n != 1)} measured {measured}, "
        f"at least {MIN_SYSTEMS} needed ({systems_needed(n)} more)"
    )


# --- two settings ------------------------------------------------------------------


def signed_rank_null(n: int) -> np.ndarray:
    """P(T = t) for t = 0..n(n+1)/2, T the signed-rank statistic of n
    differences without ties under the null (each sign equally likely)."""
    m = n * (n + 1) // 2
    p = np.zeros(m + 1)
    p[0] = 1.0
    for i in range(1, n + 1):
        # Rank i is positive (adds i) or negative, each with probability 1/2;
        # only the first i(i+1)/2 + 1 values can be reached yet.
        top = i * (i + 1) // 2 + 1
        p[i:top] += p[: top - i].copy()
        p[:top] /= 2.0
    return p


@functools.lru_cache(maxsize=256)
def signed_rank_critical(n: int, alpha: float = stats.ALPHA) -> int | None:
    """The largest T with P(T <= t) <= alpha/2 (two-sided critical value of
    the signed-rank statistic, as in the printed tables); None if none."""
    if n < 1:
        return None
    if n > _EXACT_MAX:
        m = n * (n + 1) / 4.0
        sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
        t = math.floor(m + sps.norm.ppf(alpha / 2.0) * sd)
        return t if t >= 0 else None
    cdf = np.cumsum(signed_rank_null(n))
    ok = np.nonzero(cdf <= alpha / 2.0 + 1e-12)[0]
    return int(ok[-1]) if ok.size else None


def walsh_averages(d: np.ndarray) -> np.ndarray:
    """(d_i + d_j) / 2 for i <= j, sorted."""
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann(
    diffs: Sequence[float], confidence: float = stats.CONFIDENCE
) -> dict:
    """Hodges–Lehmann estimate of the centre of ``diffs`` and its interval.

    ``{"estimate", "low", "high"}``: the median of the Walsh averages and
    the averages of ranks k and M + 1 - k, k = critical value + 1 (the
    interval inverts the signed-rank test: exact coverage >= ``confidence``
    for continuous differences).  None where undefined.
    """
    d = _finite(diffs)
    out = {"estimate": None, "low": None, "high": None}
    if not d.size:
        return out
    w = walsh_averages(d)
    out["estimate"] = float(np.median(w))
    crit = signed_rank_critical(d.size, 1.0 - confidence)
    if crit is None:
        return out
    k = crit + 1
    out["low"], out["high"] = float(w[k - 1]), float(w[w.size - k])
    return out


def wilcoxon(diffs: Sequence[float]) -> dict:
    """Wilcoxon signed-rank test of ``diffs`` against 0: ``{"statistic",
    "p", "method", "r_plus", "r_minus"}``; zeros split between the signs
    (Demšar's rule), p from SciPy (exact when it can be)."""
    d = _finite(diffs)
    out = {"statistic": None, "p": None, "method": None}
    out["r_plus"], out["r_minus"] = _rank_sums(d)
    if d.size < 2 or not np.any(d):
        return out
    res = sps.wilcoxon(d, zero_method="zsplit")
    out["statistic"] = float(res.statistic)
    out["p"] = float(res.pvalue)
    exact = not np.any(d == 0) and np.unique(np.abs(d)).size == d.size
    out["method"] = "exact" if exact and d.size <= 50 else "normal approximation"
    return out


def _rank_sums(d: np.ndarray) -> tuple[float | None, float | None]:
    if not d.size:
        return None, None
    ranks = sps.rankdata(np.abs(d))
    zeros = ranks[d == 0].sum() / 2.0
    return float(ranks[d > 0].sum() + zeros), float(ranks[d < 0].sum() + zeros)


def bayes_signed_rank(
    diffs: Sequence[float],
    rope: float,
    prior: float = PRIOR_WEIGHT,
    samples: int = POSTERIOR_SAMPLES,
    seed: int = POSTERIOR_SEED,
) -> tuple[float, float, float]:
    """(P(below -rope), P(within rope), P(above rope)) of the differences.

    Benavoli et al.'s Bayesian signed-rank test, as baycomp's
    ``SignedRankTest.sample(x, y, rope, prior=..., nsamples=...,
    random_state=seed)`` with ``diffs = y - x`` draws it: each draw weighs
    the differences (and a pseudo-observation 0 of weight ``prior``) by a
    Dirichlet vector w; the mass of pairs whose sum d_i + d_j lies below
    -2·rope, within, or above +2·rope is w' M w; a probability is the share
    of draws in which that region has the most mass.
    """
    return bayes_signed_ranks([diffs], rope, prior, samples, seed)[0]


def bayes_signed_ranks(
    many: Sequence[Sequence[float]],
    rope: float,
    prior: float = PRIOR_WEIGHT,
    samples: int = POSTERIOR_SAMPLES,
    seed: int = POSTERIOR_SEED,
) -> list[tuple[float, float, float]]:
    """``bayes_signed_rank`` of each of several difference vectors.

    The draws depend only on the number of differences, the prior and the
    seed, so vectors of the same length (the pairs of k settings over the
    same systems) are weighed by one set of draws, drawn once: the
    Dirichlet draws are most of the cost.  Inside a stored answer's
    computation each result is kept by its inputs
    (``answer_cache.posteriors``): the refresh computes the reports'
    answers again after an upload, and their paired systems' differences
    rarely change."""
    vectors = [_finite(d) for d in many]
    keys = _keys(vectors, rope, prior, samples, seed)
    ahead = _drawn_ahead.get() or {}
    keep = answer_cache.computing()
    found = {k: ahead[k] for k in keys if k in ahead}
    if keep and len(found) < len(keys):
        found.update(answer_cache.posteriors([k for k in keys if k not in found]))
    todo: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        if key not in found:
            todo.setdefault(vectors[i].size, []).append(i)
    new = {}
    for idx in todo.values():
        probs = _posteriors([vectors[i] for i in idx], rope, prior, samples, seed)
        new.update(zip((keys[i] for i in idx), probs, strict=True))
    if keep and new:
        answer_cache.keep_posteriors(new)
    found.update(new)
    return [found[key] for key in keys]


def _keys(
    vectors: list[np.ndarray], rope: float, prior: float, samples: int, seed: int
) -> list[str]:
    """Each posterior's key: a hash of its differences and every other input,
    with the digest of the code that draws (``_posterior_code``)."""
    args = f"{float(rope)!r} {float(prior)!r} {int(samples)} {int(seed)}"
    args += _posterior_code()
    return [hashlib.sha256(d.tobytes() + args.encode()).hexdigest() for d in vectors]


# Posteriors drawn ahead (``drawn_together``), by key, for the calls inside.
_drawn_ahead: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "benchdb_posteriors_drawn_ahead", default=None
)


@contextmanager
def drawn_together(
    many: Sequence[Sequence[float]],
    margin_percent: float = stats.EQUIVALENCE_PERCENT,
) -> Iterator[None]:
    """Inside, ``two_settings`` of any of these difference vectors finds its
    posterior drawn already: those of the vectors with enough systems, drawn
    here at once (``bayes_signed_ranks``: one set of draws per length).

    An answer that compares several settings with one reference (the cache
    modes against none) reads its pairs' differences first and draws their
    posteriors together: a set of draws for each pair was most of its cost.
    The same numbers as one at a time (the draws depend only on the length,
    the prior and the seed)."""
    vectors = [d for d in (_finite(v) for v in many) if d.size >= MIN_SYSTEMS]
    rope = rope_of(margin_percent)
    found = dict(
        zip(
            _keys(vectors, rope, PRIOR_WEIGHT, POSTERIOR_SAMPLES, POSTERIOR_SEED),
            bayes_signed_ranks(vectors, rope) if vectors else [],
            strict=True,
        )
    )
    token = _drawn_ahead.set({**(_drawn_ahead.get() or {}), **found})
    try:
        yield
    finally:
        _drawn_ahead.reset(token)


@functools.cache
def _posterior_code() -> str:
    """A digest of the code that computes a posterior, part of a kept one's
    key: after a change to it nothing kept by the old code is read (a stored
    answer knows its code, STYLE.md 13)."""
    source = "".join(inspect.getsource(f) for f in (_posteriors, _edge_mass))
    return " " + hashlib.sha256(source.encode()).hexdigest()[:16]


def _posteriors(
    vectors: list[np.ndarray], rope: float, prior: float, samples: int, seed: int
) -> list[tuple[float, float, float]]:
    """``bayes_signed_rank`` of difference vectors of one length, on one
    set of draws (baycomp's: the same seed, the same stream).

    w' M w in O(n) per draw instead of a matrix product (O(n²)): in the
    order of z, the pairs (i, j) with z_i + z_j below -2·rope are, for each
    i, a first run of j (a float sum grows with z_j), those equal to it the
    run after; so (M w)_i is a prefix sum of the sorted weights."""
    size = vectors[0].size + 1
    bounds = []
    for d in vectors:
        z = np.concatenate(([0.0], d))
        order = np.argsort(z, kind="stable")
        zs = z[order]
        sums = zs[:, None] + zs[None, :]
        # Per sorted i: how many j lie below the low bound, on it, above
        # the high bound, on it.
        n_below = np.count_nonzero(sums < -2 * rope, axis=1)
        n_above = np.count_nonzero(sums > 2 * rope, axis=1)
        low_edge = n_below + np.count_nonzero(sums == -2 * rope, axis=1)
        top = size - n_above
        high_edge = top - np.count_nonzero(sums == 2 * rope, axis=1)
        bounds.append(
            (order, n_below, _ties(n_below, low_edge), top, _ties(top, high_edge))
        )
    weights = np.ones(size)
    weights[0] = prior
    rng = np.random.RandomState(seed)
    counts = np.zeros((len(vectors), 3))
    per_chunk = max(1, _CHUNK // size)
    # Buffers kept across chunks and vectors (no fresh pages per array).
    w_buf = np.empty((per_chunk, size))
    cum_buf = np.zeros((per_chunk, size + 1))
    edge_buf = np.empty((per_chunk, size))
    done = 0
    while done < samples:
        k = min(per_chunk, samples - done)
        drawn = rng.dirichlet(weights, k)
        w, cum, edge = w_buf[:k], cum_buf[:k], edge_buf[:k]
        for counted, (order, n_below, low_ties, top, high_ties) in zip(
            counts, bounds, strict=True
        ):
            np.take(drawn, order, axis=1, out=w, mode="clip")
            np.cumsum(w, axis=1, out=cum[:, 1:])
            lo = np.multiply(_edge_mass(cum, n_below, low_ties, edge), w, out=edge)
            lo = lo.sum(axis=1)
            above = np.subtract(
                cum[:, -1:], _edge_mass(cum, top, high_ties, edge), out=edge
            )
            hi = np.multiply(above, w, out=edge).sum(axis=1)
            if rope > 0:
                mass = np.stack((lo, 1.0 - lo - hi, hi), axis=1)
            else:
                # No region of equivalence: above or not (baycomp's
                # without_rope).
                mass = np.stack((1.0 - hi, np.zeros(k), hi), axis=1)
            counted += np.bincount(np.argmax(mass, axis=1), minlength=3)
        done += k
    return [tuple(float(x) for x in row / samples) for row in counts]


def _ties(strict: np.ndarray, edge: np.ndarray) -> tuple:
    """The sorted i with sums on the bound: their indices and ``edge[i]``."""
    idx = np.flatnonzero(strict != edge)
    return idx, edge[idx]


def _edge_mass(
    cum: np.ndarray, strict: np.ndarray, ties: tuple, out: np.ndarray
) -> np.ndarray:
    """Per draw and sorted i: the weight of the j before ``strict[i]``, and
    half of those between it and ``edge[i]`` (the sums on the bound), into
    ``out``.  Only the i with such sums are averaged: for the others
    (a + a) * 0.5 is a exactly."""
    np.take(cum, strict, axis=1, out=out, mode="clip")
    idx, edge = ties
    if idx.size:
        part = out[:, idx]
        part += np.take(cum, edge, axis=1)
        part *= 0.5
        out[:, idx] = part
    return out


def rope_of(margin_percent: float) -> float:
    """The region of practical equivalence on ln(B/A) for a +-Y% margin."""
    return math.log1p(margin_percent / 100.0)


def two_settings(
    diffs: Sequence[float],
    higher_is_better: bool | None,
    margin_percent: float = stats.EQUIVALENCE_PERCENT,
    confidence: float = stats.CONFIDENCE,
) -> dict:
    """B against A over the systems that measured both, from d = ln(B/A).

    Returns ``{"systems", "enough", "systems_needed", "wilcoxon",
    "hodges_lehmann": {"ratio", "low", "high", "percent", ...},
    "probabilities": {"b_better", "equivalent", "a_better"}, "b_wins",
    "a_wins", "ties", "verdict", "text"}``; with fewer than ``MIN_SYSTEMS``
    systems only the counts and the "not enough systems yet" text.  When
    lower is better (latency), "better" means a lower figure.
    """
    d = _finite(diffs)
    n = int(d.size)
    sign = -1.0 if higher_is_better is False else 1.0
    out = {
        "systems": n,
        "minimum_systems": MIN_SYSTEMS,
        "enough": n >= MIN_SYSTEMS,
        "systems_needed": systems_needed(n),
        "b_wins": int(np.sum(sign * d > 0)),
        "a_wins": int(np.sum(sign * d < 0)),
        "ties": int(np.sum(d == 0)),
        "equivalence_percent": margin_percent,
        "wilcoxon": None,
        "hodges_lehmann": None,
        "probabilities": None,
        "verdict": stats.CANNOT_TELL,
        "text": not_enough_text(n),
    }
    if not out["enough"]:
        return out
    test = wilcoxon(d)
    hl = hodges_lehmann(d, confidence)
    out["wilcoxon"] = test
    out["hodges_lehmann"] = {
        "ratio": math.exp(hl["estimate"]),
        "low": None if hl["low"] is None else math.exp(hl["low"]),
        "high": None if hl["high"] is None else math.exp(hl["high"]),
        "percent": math.expm1(hl["estimate"]) * 100.0,
        "confidence": confidence,
    }
    lo, eq, hi = bayes_signed_rank(d, rope_of(margin_percent))
    b_better, a_better = (lo, hi) if sign < 0 else (hi, lo)
    out["probabilities"] = {
        "b_better": b_better,
        "equivalent": eq,
        "a_better": a_better,
    }
    out.update(_two_verdict(out, sign, margin_percent))
    return out


def _two_verdict(out: dict, sign: float, margin: float) -> dict:
    hl, p = out["hodges_lehmann"], out["wilcoxon"]["p"]
    low_band, high_band = stats.equivalence_band(margin)
    ci = (
        f"Hodges–Lehmann {stats.format_percent(hl['percent'])}, "
        f"{hl['confidence'] * 100:g}% CI "
        f"{stats.format_percent((hl['low'] - 1) * 100)}…"
        f"{stats.format_percent((hl['high'] - 1) * 100)}"
    )
    pr = out["probabilities"]
    probs = (
        f"P(B better) {pr['b_better']:.2f}, P(within ±{margin:g}%) "
        f"{pr['equivalent']:.2f}, P(A better) {pr['a_better']:.2f}"
    )
    basis = f"Wilcoxon {stats.format_p(p)} over {out['systems']} systems; {ci}; {probs}"
    if p is not None and p < stats.ALPHA:
        better = (hl["ratio"] > 1.0) == (sign > 0)
        verdict = stats.FASTER if better else stats.SLOWER
        word = "better" if better else "worse"
        return {"verdict": verdict, "text": f"B is {word} ({basis})"}
    if low_band <= hl["low"] and hl["high"] <= high_band:
        return {
            "verdict": stats.EQUIVALENT,
            "text": f"no difference larger than {margin:g}% ({basis})",
        }
    return {"verdict": stats.CANNOT_TELL, "text": f"cannot tell ({basis})"}


# --- k settings ----------------------------------------------------------------------


def _table(matrix, k: int) -> np.ndarray:
    """``matrix`` as an N x k array (0 x k when empty, even for k = 0)."""
    m = np.asarray(matrix, dtype=float)
    return m.reshape(0, k) if m.size == 0 else m.reshape(-1, k)


def ranks(matrix: np.ndarray, higher_is_better: bool | None = True) -> np.ndarray:
    """Ranks within each row (system), 1 = best, ties averaged."""
    m = np.asarray(matrix, dtype=float)
    return sps.rankdata(-m if higher_is_better is not False else m, axis=1)


@functools.lru_cache(maxsize=64)
def nemenyi_q(k: int, alpha: float = stats.ALPHA) -> float:
    """q_alpha of the Nemenyi test: the studentized range quantile (k
    groups, infinite degrees of freedom) over sqrt(2) (2.569 for k = 4)."""
    return float(sps.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0))


def critical_difference(k: int, n: int, alpha: float = stats.ALPHA) -> float:
    """Nemenyi's CD = q_alpha * sqrt(k(k+1) / (6N))."""
    return nemenyi_q(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n))


def cd_groups(avg_ranks: Sequence[float], cd: float) -> list[list[int]]:
    """Maximal runs of settings (indices, best first) whose average ranks
    lie within ``cd`` of each other: the bars of a CD diagram.  Runs of one
    setting are left out (a setting alone is drawn without a bar)."""
    order = list(np.argsort(avg_ranks, kind="stable"))
    r = [avg_ranks[i] for i in order]
    groups, last_end = [], -1
    for start in range(len(order)):
        end = start
        while end + 1 < len(order) and r[end + 1] - r[start] <= cd:
            end += 1
        if end > last_end and end > start:
            groups.append([int(i) for i in order[start : end + 1]])
        last_end = max(last_end, end)
    return groups


def k_settings(
    matrix: Sequence[Sequence[float]],
    names: Sequence[str],
    higher_is_better: bool | None = True,
    alpha: float = stats.ALPHA,
) -> dict:
    """k settings over the N systems that measured all of them.

    ``matrix`` is N x k (a row per system, a column per setting in the
    order of ``names``).  Returns ``{"systems", "settings", "enough",
    "systems_needed", "average_ranks": {name: rank}, "friedman": {...},
    "critical_difference", "pairs": [...], "groups": [[name, ...]],
    "text"}``; below ``MIN_SYSTEMS`` systems (or fewer than two settings)
    only the counts and what is missing.
    """
    m = _table(matrix, len(names))
    n, k = m.shape
    out = {
        "systems": n,
        "settings": list(names),
        "minimum_systems": MIN_SYSTEMS,
        "enough": n >= MIN_SYSTEMS and k >= 2,
        "systems_needed": systems_needed(n),
        "average_ranks": None,
        "friedman": None,
        "critical_difference": None,
        "alpha": alpha,
        "pairs": [],
        "groups": [],
        "text": "",
    }
    if k < 2:
        out["text"] = "fewer than two settings have data"
        return out
    if not out["enough"]:
        out["text"] = not_enough_text(n, "all of them" if k > 2 else "both")
        return out
    r = ranks(m, higher_is_better)
    avg = r.mean(axis=0)
    chi2 = 12.0 * n / (k * (k + 1)) * (np.sum(avg**2) - k * (k + 1) ** 2 / 4.0)
    ff = (n - 1) * chi2 / (n * (k - 1) - chi2) if n * (k - 1) != chi2 else math.inf
    p_ff = float(sps.f.sf(ff, k - 1, (k - 1) * (n - 1)))
    friedman = {"chi2": float(chi2), "f": float(ff), "p": p_ff}
    if k >= 3:
        corrected = sps.friedmanchisquare(*m.T)
        friedman["chi2_tie_corrected"] = float(corrected.statistic)
        friedman["p_chi2"] = float(corrected.pvalue)
    cd = critical_difference(k, n, alpha)
    se = math.sqrt(k * (k + 1) / (6.0 * n))
    ii, jj = np.triu_indices(k, 1)
    diffs = np.abs(avg[ii] - avg[jj])
    # Each pair's Nemenyi p (one vectorised call: each is an integral).
    ps = np.minimum(1.0, sps.studentized_range.sf(diffs / se * math.sqrt(2), k, np.inf))
    pairs = [
        {
            "a": names[i],
            "b": names[j],
            "rank_difference": float(diff),
            "p": float(p),
            "different": bool(diff > cd and p_ff < alpha),
        }
        for i, j, diff, p in zip(ii, jj, diffs, ps, strict=True)
    ]
    out.update(
        average_ranks={name: float(a) for name, a in zip(names, avg, strict=True)},
        friedman=friedman,
        critical_difference=cd,
        pairs=pairs,
        groups=[[names[i] for i in g] for g in cd_groups(list(avg), cd)],
    )
    best = names[int(np.argmin(avg))]
    if p_ff >= alpha:
        out["text"] = (
            f"no setting ranks apart from the others (Friedman "
            f"{stats.format_p(p_ff)} over {n} systems)"
        )
    else:
        out["text"] = (
            f"{best} ranks best (average rank {avg.min():.2f} of {k}); Friedman "
            f"{stats.format_p(p_ff)} over {n} systems; settings closer than "
            f"CD {cd:.2f} in rank cannot be told apart"
        )
    return out


def pairwise_probabilities(
    logs: np.ndarray,
    names: Sequence[str],
    higher_is_better: bool | None,
    margin_percent: float = stats.EQUIVALENCE_PERCENT,
) -> list[dict]:
    """For each pair (A, B) of columns of N x k log figures: P(B better),
    P(practically equivalent), P(A better) from ``bayes_signed_rank`` over
    the N systems; [] below ``MIN_SYSTEMS`` systems."""
    m = _table(logs, len(names))
    if m.shape[0] < MIN_SYSTEMS:
        return []
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    found = bayes_signed_ranks(
        [m[:, j] - m[:, i] for i, j in pairs], rope_of(margin_percent)
    )
    out = []
    for (i, j), (lo, eq, hi) in zip(pairs, found, strict=True):
        b_better, a_better = (lo, hi) if higher_is_better is False else (hi, lo)
        out.append(
            {
                "a": names[i],
                "b": names[j],
                "b_better": b_better,
                "equivalent": eq,
                "a_better": a_better,
            }
        )
    return out


# --- one sweep, paired by round ----------------------------------------------------


def paired_by_round(
    reference: dict[int, float],
    other: dict[int, float],
    confidence: float = stats.CONFIDENCE,
) -> dict:
    """A setting against the reference within one interleaved sweep.

    ``reference`` and ``other`` map a round to that round's figure.  Each
    round present on both sides gives one ratio other ÷ reference, so a
    drift of the host between rounds cancels; the answer is their geometric
    mean with a Student-t interval on the logs (``stats.MIN_REPEATS`` rounds
    or more): ``{"rounds", "ratio", "low", "high", "per_round": [[round,
    ratio], ...]}``, the ratios None where no round pairs.
    """
    rounds = sorted(
        r
        for r in set(reference) & set(other)
        if reference[r] and other[r] and reference[r] > 0 and other[r] > 0
    )
    logs = np.array([math.log(other[r] / reference[r]) for r in rounds])
    out = {
        "rounds": len(rounds),
        "ratio": None,
        "low": None,
        "high": None,
        "per_round": [[r, math.exp(v)] for r, v in zip(rounds, logs, strict=True)],
    }
    if not rounds:
        return out
    out["ratio"] = math.exp(float(logs.mean()))
    if len(rounds) >= stats.MIN_REPEATS:
        half = (
            stats.t_quantile(confidence, len(rounds) - 1)
            * float(logs.std(ddof=1))
            / math.sqrt(len(rounds))
        )
        out["low"] = math.exp(float(logs.mean()) - half)
        out["high"] = math.exp(float(logs.mean()) + half)
    return out
