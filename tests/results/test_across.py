"""Across-systems statistics against published worked examples and against
generated populations with a known ranking and a known equivalence.

References:
- Demšar, "Statistical Comparisons of Classifiers over Multiple Data Sets",
  JMLR 7 (2006): Table 2 (C4.5 vs C4.5+m, Wilcoxon: R+ = 93, R- = 12,
  T = 12 below the critical 21) and Table 6 (four C4.5 variants on 14 data
  sets: average ranks 3.143, 2.000, 2.893, 1.964; chi2_F = 9.28; F_F = 3.69;
  Nemenyi CD 1.25 at 0.05 and 1.12 at 0.10, where C4.5 is worse than C4.5+m
  and C4.5+m+cf).  The AUCs as SciPy's own test of ``friedmanchisquare``
  types them (scipy/stats/tests/test_stats.py), with its 0.9751 for the
  "voting" row that the paper prints rounded to 0.975 (its ranks need it).
- SciPy 1.17's documented examples of ``wilcoxon`` (Darwin's corn: 24.0,
  0.041259765625) and ``friedmanchisquare`` (11.428571428571416,
  0.043514520866727614).
- The printed two-sided 0.05 critical values of the signed-rank statistic.
- baycomp 1.0.3's ``SignedRankTest.probs`` on the vectors of its own test
  suite (tests/test_multiple.py), computed with baycomp on the pinned NumPy
  2.4.6 and SciPy 1.17.1 with the seeds given.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from benchdb.results import across, stats

C45 = [0.763, 0.599, 0.954, 0.628, 0.882, 0.936, 0.661]
C45 += [0.583, 0.775, 1.000, 0.940, 0.619, 0.972, 0.957]
C45_M = [0.768, 0.591, 0.971, 0.661, 0.888, 0.931, 0.668]
C45_M += [0.583, 0.838, 1.000, 0.962, 0.666, 0.981, 0.978]
C45_CF = [0.771, 0.590, 0.968, 0.654, 0.886, 0.916, 0.609]
C45_CF += [0.563, 0.866, 1.000, 0.965, 0.614, 0.9751, 0.946]
C45_M_CF = [0.798, 0.569, 0.967, 0.657, 0.898, 0.931, 0.685]
C45_M_CF += [0.625, 0.875, 1.000, 0.962, 0.669, 0.975, 0.970]
NAMES = ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"]


def test_demsar_table_2_wilcoxon():
    # The differences as the paper lists them (three decimals).
    d = np.round(np.asarray(C45_M) - np.asarray(C45), 3)
    out = across.wilcoxon(d)
    assert (out["r_plus"], out["r_minus"]) == (93.0, 12.0)
    assert out["statistic"] == 12.0
    assert across.signed_rank_critical(14) == 21  # T = 12 <= 21: significant
    assert out["p"] < 0.05


def test_demsar_table_6_friedman_and_nemenyi():
    m = np.array([C45, C45_M, C45_CF, C45_M_CF]).T
    out = across.k_settings(m, NAMES)
    ranks = [round(out["average_ranks"][n], 3) for n in NAMES]
    assert ranks == [3.143, 2.000, 2.893, 1.964]
    assert round(out["friedman"]["chi2"], 2) == 9.28
    assert round(out["friedman"]["f"], 2) == 3.69
    assert out["friedman"]["p"] < 0.05  # F(3, 39) critical value 2.85
    assert round(across.nemenyi_q(4), 3) == 2.569
    assert round(out["critical_difference"], 2) == 1.25
    # At 0.05 even best vs worst (1.179) is within CD: no pair differs.
    assert not any(p["different"] for p in out["pairs"])
    assert out["groups"] == [["C4.5+m+cf", "C4.5+m", "C4.5+cf", "C4.5"]]
    at_10 = across.k_settings(m, NAMES, alpha=0.10)
    assert round(at_10["critical_difference"], 2) == 1.12
    different = {(p["a"], p["b"]) for p in at_10["pairs"] if p["different"]}
    assert different == {("C4.5", "C4.5+m"), ("C4.5", "C4.5+m+cf")}
    # SciPy's test of friedmanchisquare on the same table (tie-corrected).
    assert out["friedman"]["chi2_tie_corrected"] == pytest.approx(10.2283464566929)
    assert out["friedman"]["p_chi2"] == pytest.approx(0.0167215803284414)


def test_scipy_documented_wilcoxon_example():
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    out = across.wilcoxon(d)
    assert (out["statistic"], out["p"]) == (24.0, 0.041259765625)
    assert out["method"] == "exact"
    # Hodges-Lehmann by its definition, and its interval at ranks k, M+1-k.
    walsh = sorted((a + b) / 2 for i, a in enumerate(d) for b in d[i:])
    hl = across.hodges_lehmann(d)
    assert hl["estimate"] == np.median(walsh)
    k = across.signed_rank_critical(15) + 1
    assert (hl["low"], hl["high"]) == (walsh[k - 1], walsh[len(walsh) - k])


def test_scipy_documented_friedman_example():
    x = np.random.default_rng(seed=18).random((6, 10))
    out = across.k_settings(x.T, list("abcdef"))
    assert out["friedman"]["chi2_tie_corrected"] == pytest.approx(11.428571428571416)
    assert out["friedman"]["p_chi2"] == pytest.approx(0.043514520866727614)
    # No ties: Demšar's formula is the same statistic.
    assert out["friedman"]["chi2"] == pytest.approx(11.428571428571416)


def test_signed_rank_critical_values_are_the_printed_table():
    table = {6: 0, 7: 2, 8: 3, 9: 5, 10: 8, 11: 10, 12: 13, 13: 17, 14: 21}
    table |= {15: 25, 16: 29, 17: 34, 18: 40, 19: 46, 20: 52, 25: 89, 30: 137}
    assert {n: across.signed_rank_critical(n) for n in table} == table
    assert across.signed_rank_critical(5) is None  # 2/32 > 0.05: never
    # The exact null distribution sums to one and is symmetric.
    p = across.signed_rank_null(12)
    assert p.sum() == pytest.approx(1.0)
    assert np.allclose(p, p[::-1])


def test_bayesian_signed_rank_is_baycomps():
    x = np.array([15, 16, 17, 24, 11, 12, 13, 14.0])
    y = np.array([10, 13, 15, 24, 15, 82, 83, 84.0])
    # baycomp 1.0.3: SignedRankTest.probs(x, y, rope, prior=..., nsamples=...,
    # random_state=seed); rope 0 gives (p_left, p_right).
    assert across.bayes_signed_rank(y - x, 1, 0.5, 50_000, 42) == (
        0.12592,
        0.0069,
        0.86718,
    )
    assert across.bayes_signed_rank(y - x, 0, 0.5, 50_000, 42) == (
        0.13884,
        0.0,
        0.86116,
    )
    assert across.bayes_signed_rank(y - x, 3, 0.5, 20_000, 7) == (
        0.01335,
        0.2375,
        0.74915,
    )
    assert across.bayes_signed_rank(y - x, 10, 5, 20_000, 3) == (0.0, 0.7307, 0.2693)


def test_too_few_systems_says_how_many_more():
    out = across.two_settings([0.1, 0.12, 0.09, 0.11], True)
    assert out["enough"] is False
    assert out["systems_needed"] == 2
    assert out["wilcoxon"] is None and out["probabilities"] is None
    assert out["text"] == (
        "not enough systems yet: 4 systems measured both, at least 6 needed (2 more)"
    )
    k = across.k_settings(np.ones((5, 3)), ["a", "b", "c"])
    assert k["enough"] is False and k["average_ranks"] is None
    assert k["text"].startswith("not enough systems yet: 5 systems measured all")
    for names in ([], ["a"]):
        empty = across.k_settings([], names)
        assert (empty["systems"], empty["enough"]) == (0, False)
        assert empty["text"] == "fewer than two settings have data"
        assert across.pairwise_probabilities([], names, True) == []


def test_lower_is_better_turns_the_words_round():
    # Latency 20% lower under B on every system: B is better.
    d = np.log(0.8) + np.linspace(-0.01, 0.01, 8)
    out = across.two_settings(d, False)
    assert out["verdict"] == stats.FASTER
    assert out["probabilities"]["b_better"] > 0.99
    assert out["hodges_lehmann"]["ratio"] == pytest.approx(0.8, rel=0.01)
    assert (out["b_wins"], out["a_wins"]) == (8, 0)
    assert out["text"].startswith("B is better (Wilcoxon")


# Generated populations: 12 systems whose speeds differ by a factor of ten,
# four settings: "none", "same" (identical to none), "fast" (+15%) and
# "slow" (-15%), 2% noise per measurement, 100 seeded populations.  Observed
# (and the bounds asserted): Friedman rejects 100/100 (100 required); the
# ranking fast < none, same < slow 100/100 (100); Nemenyi calls none vs same
# different 0/100 (at most 5: its 5% error rate); Wilcoxon none vs same
# rejects 3/100 (at most 10: 5% nominal, with room for 100 draws); the
# Hodges-Lehmann 95% interval covers the true +15% 92/100 (at least 88);
# P(equivalent) > 0.95 for same vs none 100/100 (at least 95) and P(fast
# better) > 0.95 100/100 (100).
SIMULATIONS = 100


def test_generated_populations_come_out_right():
    rng = np.random.default_rng(33)
    names = ["none", "same", "fast", "slow"]
    effects = np.log([1.0, 1.0, 1.15, 0.85])
    rope = across.rope_of(stats.EQUIVALENCE_PERCENT)
    counts = dict.fromkeys(
        ("friedman", "order", "nemenyi_same", "wilcoxon_same", "hl_covers"), 0
    )
    counts |= dict.fromkeys(("equivalent_same", "better_fast"), 0)
    for r in range(SIMULATIONS):
        logs = rng.normal(np.log(5000), 0.6, (12, 1)) + effects
        logs = logs + rng.normal(0, 0.02, (12, 4))
        k = across.k_settings(np.exp(logs), names)
        counts["friedman"] += k["friedman"]["p"] < 0.05
        ar = k["average_ranks"]
        counts["order"] += ar["fast"] < min(ar["none"], ar["same"]) and ar[
            "slow"
        ] > max(ar["none"], ar["same"])
        pairs = {(p["a"], p["b"]): p["different"] for p in k["pairs"]}
        counts["nemenyi_same"] += pairs[("none", "same")]
        same, fast = logs[:, 1] - logs[:, 0], logs[:, 2] - logs[:, 0]
        counts["wilcoxon_same"] += across.wilcoxon(same)["p"] < 0.05
        hl = across.hodges_lehmann(fast)
        counts["hl_covers"] += hl["low"] < np.log(1.15) < hl["high"]
        p_same = across.bayes_signed_rank(same, rope, samples=2000, seed=r)
        counts["equivalent_same"] += p_same[1] > 0.95
        p_fast = across.bayes_signed_rank(fast, rope, samples=2000, seed=r)
        counts["better_fast"] += p_fast[2] > 0.95
    assert counts["friedman"] == SIMULATIONS
    assert counts["order"] == SIMULATIONS
    assert counts["nemenyi_same"] <= 5
    assert counts["wilcoxon_same"] <= 10
    assert counts["hl_covers"] >= 88
    assert counts["equivalent_same"] >= 95
    assert counts["better_fast"] == SIMULATIONS


def test_the_wilcoxon_of_two_settings_matches_scipy_on_log_ratios():
    rng = np.random.default_rng(4)
    a = rng.lognormal(8, 0.5, 20)
    b = a * rng.lognormal(0.05, 0.03, 20)
    d = np.log(b) - np.log(a)
    out = across.two_settings(d, True)
    ref = sps.wilcoxon(d)
    assert out["wilcoxon"]["p"] == pytest.approx(ref.pvalue)
    assert out["systems"] == 20 and out["enough"]
    hl = out["hodges_lehmann"]
    assert hl["low"] < hl["ratio"] < hl["high"]
    assert sum(out["probabilities"].values()) == pytest.approx(1.0)


def _posteriors_before(vectors, rope, prior, samples, seed):
    """across._posteriors as it was before its buffers and partial edge
    averages (8438bd5): the reference the faster one must equal exactly."""
    size = vectors[0].size + 1
    bounds = []
    for d in vectors:
        z = np.concatenate(([0.0], d))
        order = np.argsort(z, kind="stable")
        sums = z[order][:, None] + z[order][None, :]
        n_below = np.count_nonzero(sums < -2 * rope, axis=1)
        low_edge = n_below + np.count_nonzero(sums == -2 * rope, axis=1)
        top = size - np.count_nonzero(sums > 2 * rope, axis=1)
        high_edge = top - np.count_nonzero(sums == 2 * rope, axis=1)
        bounds.append((order, n_below, low_edge, top, high_edge))

    def edge_mass(cum, strict, edge):
        out = np.take(cum, strict, axis=1)
        if np.any(strict != edge):
            out += np.take(cum, edge, axis=1)
            out *= 0.5
        return out

    weights = np.ones(size)
    weights[0] = prior
    rng = np.random.RandomState(seed)
    counts = np.zeros((len(vectors), 3))
    per_chunk = max(1, across._CHUNK // size)
    done = 0
    while done < samples:
        k = min(per_chunk, samples - done)
        drawn = rng.dirichlet(weights, k)
        for counted, (order, n_below, low_edge, top, high_edge) in zip(
            counts, bounds, strict=True
        ):
            w = drawn[:, order]
            cum = np.zeros((k, size + 1))
            np.cumsum(w, axis=1, out=cum[:, 1:])
            lo = (edge_mass(cum, n_below, low_edge) * w).sum(axis=1)
            hi = ((cum[:, -1:] - edge_mass(cum, top, high_edge)) * w).sum(axis=1)
            if rope > 0:
                mass = np.stack((lo, 1.0 - lo - hi, hi), axis=1)
            else:
                mass = np.stack((1.0 - hi, np.zeros(k), hi), axis=1)
            counted += np.bincount(np.argmax(mass, axis=1), minlength=3)
        done += k
    return [tuple(float(x) for x in row / samples) for row in counts]


@pytest.mark.parametrize("n", [1, 3, 12, 300, 1500])
def test_posteriors_equal_their_former_definition_exactly(n, monkeypatch):
    # Several chunks (and a short last one) at every size.
    monkeypatch.setattr(across, "_CHUNK", 40 * (n + 1) + 7)
    rng = np.random.default_rng(n)
    samples = 3000 if n > 300 else 20_000
    for decimals in (1, 2, None):
        vectors = [rng.normal(0.01, 0.05, n) for _ in range(3)]
        if decimals:  # sums on the bounds
            vectors = [np.round(v, decimals) for v in vectors]
        for rope in (0.0, 0.01, 0.05):
            args = (vectors, rope, 0.5, samples, n)
            assert across._posteriors(*args) == _posteriors_before(*args)
