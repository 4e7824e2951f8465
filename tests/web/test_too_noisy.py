"""An interval too wide to mean anything is said in words, everywhere, by one
rule (``stats.too_wide``); a run that loses flushed data is never "better"."""

from __future__ import annotations

from benchdb.results import reports, stats
from benchdb.web import present
from benchdb.web.templatetags import benchdb_format as fmt


def test_the_rule():
    assert not stats.too_wide(None, 10.0)
    assert not stats.too_wide(100.0, 1000.0)  # a factor 10: still an estimate
    assert stats.too_wide(100.0, 1000.1)
    assert stats.too_wide(0.0, 117_599.0)  # "0 IOPS – 117,599 IOPS"
    assert stats.too_wide(-1.0, 5.0)
    # "CI −98.5%…+238298.8%" as a ratio's percent changes.
    assert stats.too_wide_percent(-98.5, 238298.8)
    assert not stats.too_wide_percent(-4.1, 2.0)
    assert stats.too_noisy_text(3) == "too noisy to estimate (3 repeats)"
    assert stats.too_noisy_text(1, "system") == "too noisy to estimate (1 system)"


def test_pages_say_it_instead_of_the_bounds():
    wide = stats.summarize([1.0, 100.0, 10_000.0])
    assert fmt.too_noisy(wide)
    assert fmt.interval_text(wide, "iops") == "too noisy to estimate (3 repeats)"
    narrow = stats.summarize([100.0, 101.0, 99.0])
    low, high = narrow["ci95_low"], narrow["ci95_high"]
    assert fmt.interval_text(narrow, "iops") == f"{low:,.0f} IOPS – {high:,.0f} IOPS"
    assert fmt.interval_text({"min": 1.0, "max": 2.0}, "iops") == (
        "1 IOPS – 2 IOPS (min–max)"
    )
    assert (
        fmt.percent_interval(
            {"low_percent": -98.5, "high_percent": 238298.8, "systems": 2}
        )
        == "too noisy to estimate (2 systems)"
    )
    assert fmt.percent_interval({"low_percent": -4.1, "high_percent": 2.0}) == (
        "-4.1% … +2.0%"
    )
    # A verdict's text never prints such an interval either.
    r = stats.ratio([1.0, 100.0, 10_000.0], [2.0, 150.0, 9_000.0])
    v = stats.verdict(r, 0.9, True)
    assert "too noisy to estimate (3 repeats)" in v["text"] and "CI" not in v["text"]


def test_unsafe_is_never_better():
    assert fmt.loses_data("unsafe")
    assert not any(
        fmt.loses_data(m) for m in ("none", "writeback", "writethrough", "directsync")
    )
    faster = {"verdict": "faster", "better": True}
    assert present.mark(faster, False) == "▲ better"
    unsafe = present.mark(faster, False, unsafe=True)
    assert reports.UNSAFE_FASTER in unsafe  # one wording, the reports' too
    assert "better" not in unsafe and "▲" not in unsafe


def test_overheads_say_it_instead_of_the_bounds():
    """A guest ÷ host interval too wide to mean anything: the run page's and
    the run-by-run table's text (``stats.overhead_of``), the browse list's
    cell and the overhead report's answer say so, with their repeats."""
    wide = stats.overhead([1.0, 100.0, 10_000.0], [2.0, 150.0, 9_000.0], True)
    assert wide["text"] == "guest ÷ host too noisy to estimate (3 repeats)"
    assert present.overhead_cell(wide) == "too noisy to estimate (3 repeats)"
    narrow = stats.overhead([90.0, 91.0, 89.0], [100.0, 101.0, 99.0], True)
    assert "CI 0.8" in narrow["text"]
    assert present.overhead_cell(narrow).startswith("-10.0% (")

    over = {"runs": 4, "systems": 2, "median": 0.6, "percent": -40.0}
    answer = reports._overhead_verdict(
        {**over, "ci95_low": 0.015, "ci95_high": 2383.99}, "iops"
    )
    assert answer["too_noisy"]
    assert "too noisy to estimate (4 pairs)" in answer["text"]
    assert "CI" not in answer["text"]
    steady = reports._overhead_verdict(
        {**over, "ci95_low": 0.55, "ci95_high": 0.65}, "iops"
    )
    assert not steady["too_noisy"] and "95% CI 0.55–0.65× host" in steady["text"]
    assert fmt.too_noisy_text_filter(4, "pair") == "too noisy to estimate (4 pairs)"


def test_the_overhead_reports_chart_draws_no_whisker_where_too_noisy():
    over = {"runs": 4, "systems": 2, "median": 0.6, "percent": -40.0}
    wide = reports._overhead_verdict(
        {**over, "ci95_low": 0.015, "ci95_high": 2383.99}, "iops"
    )
    steady = reports._overhead_verdict(
        {**over, "ci95_low": 0.55, "ci95_high": 0.65}, "iops"
    )
    workload = {"title": "Random read 4 KiB Q32T1"}
    (chart,) = present.overhead_chart(
        workload, wide, [{**steady, "label": "LVM", "value": "lvm"}]
    )
    (dataset,) = chart["bars"][0]["datasets"]
    assert dataset["noisy"] == [True, False]
    assert dataset["low"] == [None, 0.55] and dataset["high"] == [None, 0.65]


def test_a_sweeps_ratios_by_round_say_it_too():
    assert fmt.rounds_interval({"rounds": 3, "low": 0.9124, "high": 1.0341}) == (
        "0.912–1.034×"
    )
    assert fmt.rounds_interval({"rounds": 3, "low": 0.05, "high": 4.0}) == (
        "too noisy to estimate (3 rounds)"
    )
    assert fmt.rounds_interval({"rounds": 2, "low": None, "high": None}) == "—"
