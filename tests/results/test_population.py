"""Across-runs answers on a generated population with known effects.

Thirty systems of widely different speed (log-normal, a factor of ten
between the slowest and the fastest) each measured 4k random reads with
cache=none and cache=writeback; writeback is made 10% faster, with 4% noise
per run.  Guests run against a host baseline at 80% of native speed.  The
answers must find the 10% and the 0.8, with intervals that cover them, and
count the systems; private, hidden and suspect runs must not count.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchdb.results import population, stats
from benchdb.results.models import Hardware, Result, Run

pytestmark = pytest.mark.django_db

TEST = "fio-rand-read-4k-q1t1"
KEY = "benchdb-standard/1|fio-rand-read-4k-q1t1|test"


def _run(hw, value, **fields) -> Run:
    run = Run.objects.create(
        suite_id="benchdb-standard", suite_version="1", hardware=hw, **fields
    )
    Result.objects.create(
        run=run,
        test_id=TEST,
        tool="fio",
        comparability_key=KEY,
        iops_mean=value,
        repeat_count=3,
    )
    return run


def _hardware(i: int, disk_type: str = "sata-ssd") -> Hardware:
    return Hardware.objects.create(
        fingerprint=f"fp-{disk_type}-{i}", disk_type=disk_type
    )


@pytest.fixture
def community():
    """30 systems: none and writeback guests (+10%), a host each (guest 0.8)."""
    rng = np.random.default_rng(7)
    speeds = rng.lognormal(np.log(5000), 0.6, size=30)
    overheads = {"none": [], "writeback": []}
    for i, speed in enumerate(speeds):
        hw = _hardware(i)
        host_value = speed / 0.8 * rng.lognormal(0, 0.04)
        host = _run(hw, host_value, role="host")
        for mode, factor in (("none", 1.0), ("writeback", 1.10)):
            value = speed * factor * rng.lognormal(0, 0.04)
            _run(hw, value, role="guest", cache_mode=mode, baseline=host)
            overheads[mode].append(value / host_value)
    return overheads


def test_writeback_vs_none_finds_the_known_effect(
    community, django_assert_max_num_queries
):
    with django_assert_max_num_queries(12):
        answer = population.answer(
            {"disk_type": "sata-ssd"},
            {"cache_mode": "none"},
            {"cache_mode": "writeback"},
            TEST,
        )
    assert answer["paired"] is True
    assert answer["systems"] == 30
    assert answer["runs_a"] == answer["runs_b"] == 30
    assert answer["low_percent"] < 10.0 < answer["high_percent"]
    assert answer["low_percent"] > 5.0  # far from "no change"
    assert answer["verdict"] == stats.FASTER
    assert answer["text"].startswith("faster by ")
    assert "median over 30 paired systems" in answer["text"]


def test_the_answer_mirrors_when_a_and_b_swap(community):
    runs_none = population.filter_runs({"cache_mode": "none"})
    runs_wb = population.filter_runs({"cache_mode": "writeback"})
    ab = population.compare_sets(runs_none, runs_wb, TEST)
    ba = population.compare_sets(runs_wb, runs_none, TEST)
    assert ba["verdict"] == stats.SLOWER
    assert ab["ratio"] * ba["ratio"] == pytest.approx(1.0)
    assert ab["low"] * ba["high"] == pytest.approx(1.0)
    assert ab["high"] * ba["low"] == pytest.approx(1.0)


def test_the_same_setting_is_equivalent(community):
    # A set against itself: every per-system ratio is exactly 1.
    runs = population.filter_runs({"cache_mode": "none"})
    same = population.compare_sets(runs, runs, TEST)
    assert same["verdict"] == stats.EQUIVALENT
    assert same["text"].startswith("no difference larger than 5%")


def test_distribution_and_overhead_over_the_runs(community):
    runs = population.filter_runs({"cache_mode": "none"})
    answer = population.distribution(runs, TEST, "iops")
    values = np.asarray(
        Result.objects.filter(run__cache_mode="none").values_list(
            "iops_mean", flat=True
        )
    )
    res = answer["results"]
    assert (res["runs"], res["systems"]) == (30, 30)
    assert res["median"] == pytest.approx(np.median(values))
    assert res["q1"] == pytest.approx(np.quantile(values, 0.25))
    assert res["ci95_low"] < res["median"] < res["ci95_high"]
    # The same runs always give the same interval (fixed seed, sorted values).
    assert population.distribution(runs, TEST, "iops")["results"] == res
    over = answer["overhead"]
    assert (over["runs"], over["systems"]) == (30, 30)
    # Guest ÷ host computed in SQL equals the generated ratios.
    expected = stats.median_interval(np.sort(community["none"]))
    assert over["median"] == pytest.approx(expected["median"], rel=1e-12)
    assert over["ci95_low"] == pytest.approx(expected["ci95_low"], rel=1e-12)
    assert over["ci95_low"] < over["median"] < over["ci95_high"]
    # The true overhead is 0.8; this draw of 30 systems came out at 0.83
    # (its own geometric mean is 0.824), and the interval says "about 0.8".
    assert 0.75 < over["ci95_low"] and over["ci95_high"] < 0.9
    assert over["percent"] == pytest.approx((over["median"] - 1) * 100)


def test_the_median_interval_covers_the_truth_about_95_percent_of_the_time():
    # 400 generated populations of 30 systems with a true median ratio of 0.8.
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(400):
        x = 0.8 * rng.lognormal(0, 0.06, size=30)
        m = stats.median_interval(x, resamples=500)
        hits += m["ci95_low"] <= 0.8 <= m["ci95_high"]
    assert 0.88 <= hits / 400 <= 0.99


def test_private_hidden_and_suspect_runs_do_not_count(community):
    hw = _hardware(99)
    for fields in (
        {"visibility": "private"},
        {"hidden": True, "hidden_reason": "spam"},
        {"suspect": True},
    ):
        _run(hw, 1e6, role="guest", cache_mode="writeback", **fields)
        _run(hw, 1.0, role="guest", cache_mode="none", **fields)
    answer = population.answer(
        {}, {"cache_mode": "none"}, {"cache_mode": "writeback"}, TEST
    )
    assert answer["systems"] == 30
    assert answer["runs_a"] == answer["runs_b"] == 30


def test_unpaired_sets_fall_back_to_medians_and_say_so():
    rng = np.random.default_rng(3)
    for i in range(12):
        _run(_hardware(i, "nvme-ssd"), 2e5 * rng.lognormal(0, 0.05), cache_mode="none")
        _run(_hardware(i, "hdd"), 2e2 * rng.lognormal(0, 0.05), cache_mode="none")
    answer = population.answer(
        {"cache_mode": "none"}, {"disk_type": "hdd"}, {"disk_type": "nvme-ssd"}, TEST
    )
    assert answer["paired"] is False and answer["systems"] == 0
    assert answer["verdict"] == stats.FASTER
    assert 900 < answer["effect_percent"] < 1100 * 100
    assert "unpaired: 12 vs 12 runs" in answer["text"]


def test_too_few_runs_cannot_tell():
    hw = _hardware(1)
    _run(hw, 100.0, cache_mode="none")
    _run(hw, 110.0, cache_mode="writeback")
    answer = population.answer(
        {}, {"cache_mode": "none"}, {"cache_mode": "writeback"}, TEST
    )
    assert answer["verdict"] == stats.CANNOT_TELL
    assert answer["low_percent"] is None
    assert answer["text"].startswith("cannot tell: too few runs")


def test_bad_filters_are_named():
    with pytest.raises(ValueError, match="cache_mode"):
        population.filter_runs({"cache_mode": "turbo"})


# The API --------------------------------------------------------------------


def test_the_api_answers_a_vs_b(client, community):
    response = client.get(
        "/api/v1/population/compare/",
        {
            "test_id": TEST,
            "metric": "iops",
            "a": "cache_mode=none",
            "b": "cache_mode=writeback",
            "disk_type": "sata-ssd",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    direct = population.answer(
        {"disk_type": "sata-ssd"},
        {"cache_mode": "none"},
        {"cache_mode": "writeback"},
        TEST,
    )
    assert body["verdict"] == "faster" and body["paired_systems"] == 30
    assert body["percent_low"] == pytest.approx(direct["low_percent"])
    assert body["text"] == direct["text"]
    assert body["comparability_key"] == KEY


def test_the_api_gives_the_distribution(client, community):
    response = client.get(
        "/api/v1/population/", {"test_id": TEST, "cache_mode": "writeback"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["results"]["runs"] == 30 and body["overhead"]["systems"] == 30
    assert body["higher_is_better"] is True


@pytest.mark.parametrize(
    "query",
    [
        {"test_id": TEST, "a": "cache_mode=turbo", "b": "cache_mode=none"},
        {"test_id": TEST, "a": "cache_mode=none"},
        {"test_id": TEST, "a": "test_id=x", "b": "cache_mode=none"},
        {"a": "cache_mode=none", "b": "cache_mode=writeback"},
    ],
)
def test_the_api_refuses_bad_comparisons(client, db, query):
    response = client.get("/api/v1/population/compare/", query)
    assert response.status_code == 400
    assert response.json()["errors"]


def test_answers_by_facet_widen_the_intervals_for_the_family(community):
    [wb] = population.answers_by(
        "cache_mode", "none", ["none", "writeback"], {"disk_type": "sata-ssd"}, TEST
    )
    single = population.answer(
        {"disk_type": "sata-ssd"},
        {"cache_mode": "none"},
        {"cache_mode": "writeback"},
        TEST,
    )
    # One comparison: the same answer as answer().
    assert wb["value"] == "writeback" and wb["text"] == single["text"]
    two = population.answers_by(
        "cache_mode", "none", ["writeback", "writethrough"], {}, TEST
    )
    assert two[0]["detail"]["confidence"] == pytest.approx(0.975)
    assert two[0]["low_percent"] <= wb["low_percent"]
    assert two[0]["high_percent"] >= wb["high_percent"]
    assert "97.5% CI" in two[0]["text"]
    assert two[1]["verdict"] == stats.CANNOT_TELL  # no writethrough runs


@pytest.mark.parametrize("margin", [5, 7])
def test_the_equivalence_margin_is_a_setting(settings, community, margin):
    settings.BENCHDB_EQUIVALENCE_PERCENT = margin
    runs = population.filter_runs({"cache_mode": "none"})
    same = population.compare_sets(runs, runs, TEST)
    assert same["equivalence_percent"] == margin
    assert same["text"].startswith(f"no difference larger than {margin}%")


def test_many_runs_are_summarised_in_sql(community, monkeypatch):
    # Past the bootstrap limit nothing per run leaves PostgreSQL: quartiles by
    # percentile_cont, the median's interval by percentile_disc at its ranks.
    monkeypatch.setattr(stats, "BOOTSTRAP_MAX_VALUES", 10)
    runs = population.filter_runs({"cache_mode": "none"})
    answer = population.distribution(runs, TEST, "iops")
    values = np.sort(
        Result.objects.filter(run__cache_mode="none").values_list(
            "iops_mean", flat=True
        )
    )
    res = answer["results"]
    assert res["interval_method"] == "order statistics"
    assert (res["runs"], res["systems"]) == (30, 30)
    assert res["median"] == pytest.approx(np.median(values))
    assert res["q1"] == pytest.approx(np.quantile(values, 0.25))
    assert (res["ci95_low"], res["ci95_high"]) == pytest.approx(
        stats.median_order_interval(values)
    )
    over = answer["overhead"]
    ratios = np.sort(community["none"])
    assert over["interval_method"] == "order statistics"
    assert over["median"] == pytest.approx(np.median(ratios))
    assert (over["ci95_low"], over["ci95_high"]) == pytest.approx(
        stats.median_order_interval(ratios)
    )


def test_overheads_of_two_settings_compare_paired_per_system(community):
    # Both modes' guests share each system's host: writeback's guest ÷ host is
    # 10% above none's, as the figures are.
    runs_none = population.filter_runs({"cache_mode": "none"})
    runs_wb = population.filter_runs({"cache_mode": "writeback"})
    answer = population.compare_sets(runs_none, runs_wb, TEST, of="overhead")
    assert answer["of"] == "overhead" and answer["paired_systems"] == 30
    assert answer["low"] < 1.10 < answer["high"]
    assert answer["verdict"] == stats.FASTER
    assert answer["a"]["median"] == pytest.approx(np.median(community["none"]))
    with pytest.raises(ValueError, match="overhead"):
        population.compare_sets(runs_none, runs_wb, TEST, of="speed")
