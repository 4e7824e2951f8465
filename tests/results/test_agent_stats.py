"""The agent's statistic (``benchdb_agent.stats``, standard library) is the
server's (``benchdb.results.stats``, SciPy) for any repeats: the same
geometric mean, the same log-scale 95% interval, the same note."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from benchdb.results import stats
from benchdb_agent import stats as agent_stats

positive = st.floats(min_value=1e-3, max_value=1e12, allow_nan=False)
value = st.one_of(positive, st.just(0.0))


@settings(max_examples=400, deadline=None)
@given(st.lists(value, min_size=1, max_size=40))
def test_the_agent_summarizes_as_the_server_does(values):
    ours, theirs = agent_stats.summarize(values), stats.summarize(values)
    for key in ("n", "min", "max", "mean", "note"):
        assert ours[key] == theirs[key]
    # One definition of the point estimate: equal to the last bit.
    assert ours["gmean"] == theirs["gmean"]
    for key in ("ci95_low", "ci95_high"):
        if theirs[key] is None:
            assert ours[key] is None
        else:
            assert ours[key] == pytest.approx(theirs[key], rel=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 30, 49, 99, 1000])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_the_stdlib_t_quantile_is_scipys(df, confidence):
    expected = float(special.stdtrit(df, 0.5 + confidence / 2))
    assert agent_stats.t_quantile(confidence, df) == pytest.approx(expected, rel=1e-9)


def test_a_zero_repeat_gives_no_log_figure_on_either_side():
    ours, theirs = agent_stats.summarize([0.0, 5.0, 6.0]), stats.summarize([0, 5, 6])
    assert ours["gmean"] is None is theirs["gmean"]
    assert ours["note"] == theirs["note"]


def test_the_page_formats_as_the_table_does():
    from benchdb.web.templatetags.benchdb_format import human

    for metric in ("iops", "bw_bytes", "lat_mean_ns", "runtime_s", "io_bytes"):
        for v in (0.5, 12.345, 9_999.5, 1.5e6, math.pi * 1e9):
            page = human(v, metric)
            assert page.replace("µs", "us") == agent_stats.human(v, metric)
