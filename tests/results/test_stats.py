"""results.stats against SciPy, textbook values and seed 001's worked numbers.

Seed 001 (a wiki page measuring KVM cache modes with dd, five repeats each,
writeback six) is in benchdb/results/reference/seed001.py; its figures are
taken here from the printed bytes and seconds, not from the rounded "MB/s".
"""

from __future__ import annotations

import itertools
import math
import re
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from benchdb.results import stats
from benchdb.results.reference.seed001 import DD_LINES

# Two-sided 95% critical values of Student's t (any statistics table).
T95 = {1: 12.706205, 2: 4.302653, 4: 2.776445, 9: 2.262157, 29: 2.045230, 120: 1.979930}


def seed001() -> dict[str, list[float]]:
    """MB/s per repeat, from "1073741824 bytes … copied, 6.8543 s"."""
    out = {}
    for mode, lines in DD_LINES.items():
        out[mode] = []
        for line in lines:
            nbytes, seconds = re.search(
                r"^(\d+) bytes .* copied, ([0-9.]+) s", line
            ).groups()
            out[mode].append(int(nbytes) / float(seconds) / 1e6)
    return out


@pytest.mark.parametrize(("df", "expected"), sorted(T95.items()))
def test_it_matches_the_t_table(df, expected):
    assert stats.t_quantile(0.95, df) == pytest.approx(expected, abs=1e-5)


def test_the_hand_written_numerics_are_gone():
    for name in ("betainc", "_betacf", "t_sf_two_sided"):
        assert not hasattr(stats, name)


def test_seed_001_means_from_bytes_and_seconds():
    data = seed001()
    means = {mode: round(stats.mean(v), 1) for mode, v in data.items()}
    assert means == {
        "none": 192.2,
        "writethrough": 183.3,
        "writeback": 175.5,
        "directsync": 193.1,
        "unsafe": 1144.9,
    }


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("writethrough", 0.58), ("writeback", 0.19), ("directsync", 0.94)],
)
def test_seed_001_welch_p_against_none(mode, expected):
    data = seed001()
    got = stats.welch(data["none"], data[mode])
    assert round(got["p"], 2) == expected
    ref = sps.ttest_ind(data[mode], data["none"], equal_var=False)
    assert got["p"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert got["t"] == pytest.approx(ref.statistic, rel=1e-12)


def test_seed_001_unsafe_is_far_from_none():
    data = seed001()
    p = stats.welch(data["none"], data["unsafe"])["p"]
    assert round(p, 4) == 0.0001
    assert stats.format_p(p) == "p < 0.001"


def test_seed_001_directsync_vs_writeback_does_not_survive_holm():
    data = seed001()
    raw = stats.welch(data["writeback"], data["directsync"])["p"]
    assert round(raw, 2) == 0.02
    # All ten pairs shown at once (the old report's way).
    pairs = list(itertools.combinations(data, 2))
    adjusted = stats.holm([stats.welch(data[a], data[b])["p"] for a, b in pairs])
    ds_wb = adjusted[pairs.index(("writeback", "directsync"))]
    assert ds_wb >= stats.ALPHA
    # And each mode against writeback as the chosen reference (4 comparisons),
    # on the log scale the comparisons use: still not significant.
    others = ["none", "writethrough", "directsync", "unsafe"]
    results = stats.compare_to_reference(
        data["writeback"], [data[m] for m in others], higher_is_better=True
    )
    ds = results[others.index("directsync")]
    assert ds["p"] < stats.ALPHA  # uncorrected it would look real
    assert ds["p_adjusted"] >= stats.ALPHA
    assert ds["verdict"] == stats.CANNOT_TELL
    assert ds["family_size"] == 4
    unsafe = results[others.index("unsafe")]
    assert unsafe["verdict"] == stats.FASTER
    assert unsafe["p_text"] == "p < 0.001"


def test_seed_001_against_none_as_the_report_shows_it():
    data = seed001()
    others = ["writethrough", "writeback", "directsync", "unsafe"]
    results = stats.compare_to_reference(
        data["none"], [data[m] for m in others], higher_is_better=True
    )
    verdicts = {m: r["verdict"] for m, r in zip(others, results, strict=True)}
    assert verdicts == {
        "writethrough": stats.CANNOT_TELL,
        "writeback": stats.CANNOT_TELL,
        "directsync": stats.CANNOT_TELL,
        "unsafe": stats.FASTER,
    }
    for r in results[:3]:
        assert "too few repeats or too much noise" in r["text"]
        assert r["repeats_needed"] > 5
    assert results[3]["text"].startswith("faster by 4")


def test_holm_matches_the_textbook_procedure():
    p = [0.01, 0.04, 0.03, 0.005, None]
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04
    # made monotone: 0.02, 0.03, 0.06, 0.06.
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02, None])
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0]
    assert stats.holm([]) == []


def test_format_p_is_one_function_for_every_page():
    assert stats.format_p(0.0) == "p < 0.001"
    assert stats.format_p(0.000999) == "p < 0.001"
    assert stats.format_p(0.001) == "p = 0.001"
    assert stats.format_p(0.0234) == "p = 0.02"
    assert stats.format_p(0.58) == "p = 0.58"
    assert stats.format_p(None) == "p not computed"


def test_summary_interval_is_the_log_scale_t_interval():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]
    s = stats.summarize(values)
    logs = np.log(values)
    half = T95[4] * logs.std(ddof=1) / math.sqrt(5)
    assert s["n"] == 5
    assert s["mean"] == 11.0
    assert s["stdev"] == pytest.approx(math.sqrt(2.5))
    assert s["gmean"] == pytest.approx(sps.gmean(values))
    assert s["ci95_low"] == pytest.approx(math.exp(logs.mean() - half), rel=1e-6)
    assert s["ci95_high"] == pytest.approx(math.exp(logs.mean() + half), rel=1e-6)
    assert s["note"] is None


def test_the_issue_s_impossible_interval_is_gone():
    # Three IOPS repeats with a wild one: the raw t interval goes below zero.
    values = [200.0, 900.0, 3000.0]
    raw_half = T95[2] * statistics.stdev(values) / math.sqrt(3)
    assert statistics.mean(values) - raw_half < 0
    s = stats.summarize(values)
    assert 0 < s["ci95_low"] < s["gmean"] < s["ci95_high"]


@pytest.mark.parametrize("values", [[5.0], [5.0, 7.0]])
def test_no_interval_below_three_repeats(values):
    s = stats.summarize(values)
    assert s["ci95_low"] is None and s["ci95_high"] is None
    assert s["note"] == stats.NOT_ENOUGH
    assert (s["min"], s["max"]) == (min(values), max(values))
    r = stats.ratio(values, [1.0, 2.0, 3.0])
    assert r["low"] is None and r["p"] is None
    v = stats.verdict(r, None, True)
    assert v["verdict"] == stats.CANNOT_TELL
    assert v["text"].startswith("cannot tell: too few repeats")


def test_ratio_interval_is_welch_on_logs():
    a = [19.1, 20.3, 18.7, 19.9, 20.1]
    b = [21.2, 20.4, 22.9, 21.8, 20.9]
    r = stats.ratio(a, b)
    ref = sps.ttest_ind(np.log(b), np.log(a), equal_var=False)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    ci = ref.confidence_interval(0.95)
    assert r["low"] == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert r["high"] == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert r["ratio"] == pytest.approx(sps.gmean(b) / sps.gmean(a))


def test_equivalent_when_the_interval_is_inside_the_margin():
    a = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    b = [100.3, 100.9, 99.4, 100.1, 99.8, 100.6]
    [res] = stats.compare_to_reference(a, [b], higher_is_better=True)
    assert res["verdict"] == stats.EQUIVALENT
    assert res["text"].startswith("no difference larger than 5%")
    # A tighter margin than the interval can show: no longer "equivalent".
    [tight] = stats.compare_to_reference(a, [b], True, margin_percent=0.1)
    assert tight["verdict"] == stats.CANNOT_TELL
    assert tight["repeats_needed"] > len(a)


def test_latency_up_is_slower():
    a = [100.0, 102.0, 98.0, 101.0]
    b = [150.0, 152.0, 149.0, 151.0]
    [res] = stats.compare_to_reference(a, [b], higher_is_better=False)
    assert res["verdict"] == stats.SLOWER
    pct = (sps.gmean(b) / sps.gmean(a) - 1) * 100
    assert res["text"].startswith(f"slower by {pct:.1f}% (CI +")


def test_overhead_is_guest_over_host_with_an_interval():
    host = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    guest = [620.0, 600.0, 640.0, 610.0, 630.0]
    o = stats.overhead(guest, host, higher_is_better=True)
    assert o["ratio"] == pytest.approx(sps.gmean(guest) / sps.gmean(host))
    assert 0 < o["low"] < o["ratio"] < o["high"]
    assert o["slower"] is True
    assert o["text"].startswith("guest 0.62× host (CI 0.")
    short = stats.overhead(guest[:2], host, higher_is_better=True)
    assert short["low"] is None and stats.NOT_ENOUGH in short["text"]


def test_percentiles_are_kept_per_repeat():
    p = stats.percentile_range([900.0, 1200.0, 1000.0])
    assert p == {"n": 3, "values": [900.0, 1200.0, 1000.0], "min": 900.0, "max": 1200.0}


def test_stored_percentiles_keep_the_repeats_and_no_mean():
    s = stats.summarize_metric("clat_p99_ns", [900.0, 1200.0, 1000.0])
    assert s["mean"] is None and s["ci95_low"] is None
    assert (s["min"], s["max"], s["values"]) == (900.0, 1200.0, [900.0, 1200.0, 1000.0])
    assert stats.summarize_metric("iops", [1.0, 2.0, 3.0]) == stats.summarize(
        [1.0, 2.0, 3.0]
    )


def test_repeats_needed_is_the_first_n_that_decides():
    sd = 0.05
    n = stats.repeats_needed(sd, sd, 5.0)
    target = math.log(1.05) / 2

    def half(k):
        return stats.t_quantile(0.95, 2 * (k - 1)) * math.sqrt(2 * sd**2 / k)

    assert half(n) < target <= half(n - 1)


def test_median_interval_is_a_reproducible_bootstrap():
    rng = np.random.default_rng(1)
    x = rng.lognormal(0, 0.3, size=40)
    a = stats.median_interval(x)
    b = stats.median_interval(list(x))
    assert a == b
    assert a["median"] == pytest.approx(np.median(x))
    assert a["ci95_low"] < a["median"] < a["ci95_high"]
    res = sps.bootstrap(
        (x,), np.median, method="percentile", n_resamples=4000, random_state=3
    )
    assert a["ci95_low"] == pytest.approx(res.confidence_interval.low, rel=0.05)
    assert a["ci95_high"] == pytest.approx(res.confidence_interval.high, rel=0.05)


def test_order_statistic_interval_of_the_median():
    # n = 10: B ~ Bin(10, 1/2), P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2), so
    # the interval is [x(2), x(9)] with coverage 1 - 22/1024 = 97.9%.
    x = [float(v) for v in range(1, 11)]
    assert stats.median_order_interval(x) == (2.0, 9.0)
    assert 1 - 2 * sps.binom.cdf(1, 10, 0.5) >= 0.95
    # Five values can never give 95% (1 - 2/32 = 93.75%): no interval.
    assert stats.median_order_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (None, None)
    assert stats.median_order_interval([1.0] * 6) == (1.0, 1.0)


def test_many_values_use_order_statistics():
    x = np.random.default_rng(2).lognormal(0, 0.2, size=stats.BOOTSTRAP_MAX_VALUES + 1)
    m = stats.median_interval(x)
    assert m["interval_method"] == "order statistics"
    assert (m["ci95_low"], m["ci95_high"]) == stats.median_order_interval(np.sort(x))
    assert stats.median_interval(x[:50])["interval_method"] == "bootstrap"


def test_percentile_rank_counts_ties_half():
    assert stats.percentile_rank(5, [1, 5, 9, 10]) == pytest.approx(37.5)
    assert stats.percentile_rank(3, []) is None


def test_percent_delta():
    assert stats.percent_delta(200.0, 150.0) == pytest.approx(-25.0)
    assert stats.percent_delta(0, 5) is None


# Property tests ---------------------------------------------------------------

positive = st.floats(min_value=1e-3, max_value=1e9, allow_nan=False)
samples = st.lists(positive, min_size=3, max_size=12)


@settings(max_examples=200, deadline=None)
@given(samples)
def test_intervals_of_positive_data_never_cross_zero(values):
    s = stats.summarize(values)
    assert s["ci95_low"] > 0
    assert s["ci95_low"] <= s["gmean"] * (1 + 1e-12)
    assert s["gmean"] <= s["ci95_high"] * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(samples, st.integers(min_value=2, max_value=4))
def test_more_repeats_of_the_same_data_never_widen_the_interval(values, k):
    # "More repeats of the same data": every value measured k times.  The
    # spread stays the same, n grows, so the interval may only narrow.
    once = stats.summarize(values)
    more = stats.summarize(values * k)
    width = math.log(once["ci95_high"]) - math.log(once["ci95_low"])
    wider = math.log(more["ci95_high"]) - math.log(more["ci95_low"])
    assert wider <= width + 1e-9


@settings(max_examples=200, deadline=None)
@given(samples, samples, st.sampled_from([True, False, None]))
def test_verdicts_are_symmetric(a, b, higher):
    [ab] = stats.compare_to_reference(a, [b], higher)
    [ba] = stats.compare_to_reference(b, [a], higher)
    mirror = {
        stats.FASTER: stats.SLOWER,
        stats.SLOWER: stats.FASTER,
        stats.EQUIVALENT: stats.EQUIVALENT,
        stats.CANNOT_TELL: stats.CANNOT_TELL,
    }
    assert ba["verdict"] == mirror[ab["verdict"]]
    assert ab["p"] == pytest.approx(ba["p"], rel=1e-9, abs=1e-300)
    assert ab["ratio"] * ba["ratio"] == pytest.approx(1.0, rel=1e-9)
    assert ab["low"] * ba["high"] == pytest.approx(1.0, rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=-3, max_value=3), min_size=3, max_size=40))
def test_median_intervals_mirror_under_negation(logs):
    # Across-runs answers take the median of per-system log ratios: swapping
    # A and B negates them, and the interval must mirror exactly.
    a = stats.median_interval(logs)
    b = stats.median_interval([-v for v in logs])
    assert b["median"] == pytest.approx(-a["median"], abs=1e-12)
    assert b["ci95_low"] == pytest.approx(-a["ci95_high"], abs=1e-12)
    assert b["ci95_high"] == pytest.approx(-a["ci95_low"], abs=1e-12)
