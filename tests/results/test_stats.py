"""results.stats against published reference values of Student's t."""

import math

import pytest

from benchdb.results import stats

# Two-sided 95% critical values of Student's t (any statistics table).
T95 = {1: 12.706205, 2: 4.302653, 4: 2.776445, 9: 2.262157, 29: 2.045230, 120: 1.979930}


@pytest.mark.parametrize(("df", "expected"), sorted(T95.items()))
def test_it_matches_the_t_table(df, expected):
    assert stats.t_quantile(0.95, df) == pytest.approx(expected, abs=1e-5)


def test_it_gives_the_two_sided_tail_of_known_points():
    # t = 2.0 with 10 df: two-sided p = 0.07338803 (R: 2*pt(-2, 10)).
    assert stats.t_sf_two_sided(2.0, 10) == pytest.approx(0.0733880, abs=1e-6)
    # Symmetry and the edges.
    assert stats.t_sf_two_sided(-2.0, 10) == stats.t_sf_two_sided(2.0, 10)
    assert stats.t_sf_two_sided(0.0, 5) == pytest.approx(1.0)


def test_it_summarizes_with_a_t_interval():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]
    s = stats.summarize(values)
    assert s["n"] == 5
    assert s["mean"] == 11.0
    assert s["stdev"] == pytest.approx(math.sqrt(2.5))
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)
    assert s["ci95_low"] == pytest.approx(11.0 - half, abs=1e-5)
    assert s["ci95_high"] == pytest.approx(11.0 + half, abs=1e-5)


def test_it_gives_no_interval_for_one_value():
    s = stats.summarize([42.0])
    assert s["mean"] == 42.0
    assert s["stdev"] is None and s["ci95_low"] is None and s["ci95_high"] is None


def test_welch_matches_a_known_example():
    # Welch's t-test on these samples: t = -2.8337, df = 7.6866, p = 0.02316
    # (R: t.test(a, b) with var.equal = FALSE).
    a = [19.1, 20.3, 18.7, 19.9, 20.1]
    b = [21.2, 20.4, 22.9, 21.8, 20.9]
    result = stats.welch(a, b)
    mean_a, mean_b = sum(a) / 5, sum(b) / 5
    va = sum((x - mean_a) ** 2 for x in a) / 4
    vb = sum((x - mean_b) ** 2 for x in b) / 4
    t = (mean_b - mean_a) / math.sqrt(va / 5 + vb / 5)
    assert result["t"] == pytest.approx(t)
    assert result["significant"] is True
    assert result["verdict"] == "significant"
    assert 0.001 < result["p"] < 0.05


def test_welch_calls_overlapping_samples_noise():
    # Means 100 and 101 with a spread of about 4: t = 0.41, p = 0.69.
    a = [96.0, 104.0, 99.0, 101.0, 100.0]
    b = [97.0, 105.0, 100.0, 102.0, 101.0]
    result = stats.welch(a, b)
    assert result["verdict"] == "within noise"
    assert result["p"] > 0.05


def test_welch_needs_two_repeats_each():
    assert stats.welch([1.0], [2.0, 3.0])["verdict"] == "not enough repeats"


def test_percentile_rank_counts_ties_half():
    assert stats.percentile_rank(5, [1, 5, 9, 10]) == pytest.approx(37.5)
    assert stats.percentile_rank(3, []) is None


def test_percent_delta():
    assert stats.percent_delta(200.0, 150.0) == pytest.approx(-25.0)
    assert stats.percent_delta(0, 5) is None
