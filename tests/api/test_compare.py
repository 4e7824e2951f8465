"""Compare, similar systems and aggregates against figures computed here."""

from __future__ import annotations

import csv
import io
import math
import statistics

import pytest
from scipy import stats as sps

from benchdb.api.renderers import FastJSONRenderer
from benchdb.results import stats
from benchdb.results.ingest import store_bundle
from tests.api.factories import make_bundle, repeat_values

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q1t1"
WRITE = "fio-rand-write-4k-q1t1"
# Two-sided 95% Student's t critical value for 2 degrees of freedom (tables).
T95_DF2 = 4.302653


@pytest.fixture
def trio(fio):
    """fast (3 repeats), slow (3 repeats, rate-capped), single (1 repeat)."""
    bundles = {
        "fast": make_bundle(fio, tests=(READ, WRITE), speed="fast"),
        "slow": make_bundle(fio, tests=(READ, WRITE), speed="slow"),
        "single": make_bundle(fio, tests=(READ,), speed="fast", repeats=1),
    }
    runs = {name: store_bundle(b) for name, b in bundles.items()}
    return bundles, runs


def welch_t_df(a, b):
    """Welch's t and degrees of freedom; None, None when neither varies."""
    va, vb = statistics.variance(a), statistics.variance(b)
    se2 = va / len(a) + vb / len(b)
    if se2 == 0:
        return None, None
    t = (statistics.mean(b) - statistics.mean(a)) / math.sqrt(se2)
    df = se2**2 / (
        (va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1)
    )
    return t, df


def entry(body, test_id, metric, run_id):
    test = next(t for t in body["tests"] if t["test_id"] == test_id)
    m = next(m for m in test["metrics"] if m["metric"] == metric)
    return next(e for e in m["runs"] if e["run"] == run_id)


def test_it_compares_means_intervals_deltas_and_significance(
    api, trio, django_assert_num_queries
):
    bundles, runs = trio
    fast, slow = runs["fast"], runs["slow"]
    url = f"/api/v1/compare/?runs={fast.pk},{slow.pk}"
    # The runs, the ids of the results it reads (what a comparison is kept
    # computed by, compare._MEMO), then those results with values (and
    # listed baselines').  Asked again: the runs and the ids, the answer kept.
    with django_assert_num_queries(3):
        response = api.get(url)
    assert response.status_code == 200, response.content
    with django_assert_num_queries(2):
        assert api.get(url).content == response.content
    # Written by orjson (tests/api/test_json_renderer.py: DRF's JSON value).
    assert isinstance(response.accepted_renderer, FastJSONRenderer)
    body = response.json()
    assert body["reference"] == fast.pk
    assert [t["test_id"] for t in body["tests"]] == [READ, WRITE]
    assert {t["main_metric"] for t in body["tests"]} == {"iops"}

    a = repeat_values(bundles["fast"], READ, "read", "iops")
    b = repeat_values(bundles["slow"], READ, "read", "iops")
    ref = entry(body, READ, "iops", fast.pk)
    other = entry(body, READ, "iops", slow.pk)
    assert ref["n"] == other["n"] == 3
    assert ref["mean"] == pytest.approx(statistics.mean(a), rel=1e-12)
    assert other["stdev"] == pytest.approx(statistics.stdev(b), rel=1e-9)
    # The interval is for the geometric mean, on the log scale (never < 0).
    logs = [math.log(v) for v in b]
    half = T95_DF2 * statistics.stdev(logs) / math.sqrt(3)
    centre = statistics.mean(logs)
    assert other["gmean"] == pytest.approx(math.exp(centre), rel=1e-9)
    assert other["ci95_low"] == pytest.approx(math.exp(centre - half), rel=1e-6)
    assert other["ci95_high"] == pytest.approx(math.exp(centre + half), rel=1e-6)
    assert 0 < other["ci95_low"] <= other["gmean"] <= other["ci95_high"]
    # The effect: ratio of geometric means, Welch's t-test on the logs (SciPy),
    # Holm over the one comparison shown (so unchanged).
    ratio = sps.gmean(b) / sps.gmean(a)
    assert other["ratio"] == pytest.approx(ratio, rel=1e-9)
    assert other["delta_percent"] == pytest.approx((ratio - 1) * 100, rel=1e-9)
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    if statistics.variance(la) + statistics.variance(lb) == 0:
        # fio reports IOPS over a whole-millisecond runtime, so short repeats
        # can agree exactly: no spread at all, and different means.
        expected_p = 0.0 if ratio != 1 else 1.0
    else:
        welch = sps.ttest_ind(lb, la, equal_var=False)
        expected_p = welch.pvalue
        ci = welch.confidence_interval(0.95)
        assert other["ratio_low"] == pytest.approx(math.exp(ci.low), rel=1e-6)
        assert other["ratio_high"] == pytest.approx(math.exp(ci.high), rel=1e-6)
    assert other["p_value"] == pytest.approx(expected_p, rel=1e-9, abs=1e-300)
    assert other["p_adjusted"] == other["p_value"]
    assert other["p_text"] == stats.format_p(expected_p)
    # The slow run is capped at 300 IOPS, the fast one is not; on a loaded
    # disk the uncapped repeats can be noisy enough to hide that, and then
    # the verdict must say it cannot tell rather than claim a difference.
    if expected_p < 0.05:
        assert ratio < 1
        assert other["verdict"] == "slower"
        assert other["verdict_text"].startswith("slower by ")
        assert other["better"] is False
    else:
        lo, hi = stats.equivalence_band(stats.EQUIVALENCE_PERCENT)
        inside = lo <= other["ratio_low"] and other["ratio_high"] <= hi
        assert other["verdict"] == ("equivalent" if inside else "cannot tell")
        assert other["better"] is None
    assert ref["ratio"] is None and ref["verdict"] is None
    # The capped run really is capped (fio honours rate_iops).
    assert max(b) <= 300 * 1.05

    # Latency: lower is better, so more latency is "slower".
    lat = entry(body, READ, "lat_mean_ns", slow.pk)
    la = repeat_values(bundles["fast"], READ, "read", "lat_mean_ns")
    lb = repeat_values(bundles["slow"], READ, "read", "lat_mean_ns")
    assert lat["mean"] == pytest.approx(statistics.mean(lb), rel=1e-12)
    lat_ratio = sps.gmean(lb) / sps.gmean(la)
    assert lat["delta_percent"] == pytest.approx((lat_ratio - 1) * 100)
    if lat["verdict"] in ("faster", "slower"):
        assert lat["verdict"] == ("slower" if lat_ratio > 1 else "faster")
        assert lat["better"] is bool(lat_ratio < 1)
    else:
        assert lat["better"] is None
    # p99 latency is never averaged: each repeat's value and the range.
    test = next(t for t in body["tests"] if t["test_id"] == READ)
    p99 = next(m for m in test["metrics"] if m["metric"] == "clat_p99_ns")
    assert p99["kind"] == "percentile"
    for e in p99["runs"]:
        assert e["mean"] is None and e["verdict"] is None
        assert e["min"] == min(e["values"]) and e["max"] == max(e["values"])
    assert body["interval_explanation"] == stats.INTERVAL_EXPLANATION


def test_it_reads_only_what_it_labels_untitled_runs_with(
    api, trio, django_assert_num_queries
):
    """reads.comparison reads the runs' COMPARED_RUN_FIELDS only: an
    untitled guest's label (Run.__str__ names it by its role, cache mode,
    bus and image format) and its host baseline's overhead come without a
    further query, and are what the fully read runs give."""
    from benchdb.results.compare import _run_label
    from benchdb.results.models import Run

    _bundles, runs = trio
    fast, slow = runs["fast"], runs["slow"]
    Run.objects.filter(pk=fast.pk).update(title="", role="host")
    Run.objects.filter(pk=slow.pk).update(
        title="", role="guest", baseline=fast, cache_mode="writeback"
    )
    with django_assert_num_queries(3):  # runs, their results' ids, results
        response = api.get(f"/api/v1/compare/?runs={slow.pk},{fast.pk}")
    body = response.json()
    full = [Run.objects.get(pk=pk) for pk in (slow.pk, fast.pk)]
    assert body["runs"] == [_run_label(r) for r in full]
    assert "cache writeback" in body["runs"][0]["title"]
    assert entry(body, READ, "iops", slow.pk)["overhead"]["ratio"] is not None
    assert entry(body, READ, "iops", fast.pk)["overhead"] is None


def test_it_says_not_enough_repeats_for_a_single_run(api, trio):
    _bundles, runs = trio
    body = api.get(
        f"/api/v1/compare/?runs={runs['fast'].pk},{runs['single'].pk}"
    ).json()
    assert [t["test_id"] for t in body["tests"]] == [READ]
    assert body["not_shared"] == [WRITE]
    single = entry(body, READ, "iops", runs["single"].pk)
    assert single["n"] == 1
    assert single["ci95_low"] is None
    assert single["note"] == stats.NOT_ENOUGH
    assert single["min"] == single["max"] == single["values"][0]
    assert single["verdict"] == "cannot tell"
    assert single["verdict_text"].startswith("cannot tell: too few repeats")
    assert single["ratio_low"] is None and single["p_value"] is None
    assert single["delta_percent"] is not None


def test_it_takes_another_reference(api, trio):
    _bundles, runs = trio
    fast, slow = runs["fast"], runs["slow"]
    body = api.get(f"/api/v1/compare/?runs={fast.pk},{slow.pk}&reference={slow.pk}")
    body = body.json()
    assert body["reference"] == slow.pk
    fast_entry = entry(body, READ, "iops", fast.pk)
    # The mirror of fast-against-slow: faster <-> slower, the rest unchanged.
    mirror = api.get(f"/api/v1/compare/?runs={fast.pk},{slow.pk}").json()
    slow_entry = entry(mirror, READ, "iops", slow.pk)
    flip = {"faster": "slower", "slower": "faster"}
    assert slow_entry["verdict"] == flip.get(
        fast_entry["verdict"], fast_entry["verdict"]
    )
    if fast_entry["verdict"] == "faster":
        assert fast_entry["better"] is True and slow_entry["better"] is False
    assert fast_entry["ratio"] * slow_entry["ratio"] == pytest.approx(1.0)
    assert fast_entry["p_value"] == pytest.approx(slow_entry["p_value"])
    assert entry(body, READ, "iops", slow.pk)["delta_percent"] is None


def test_it_exports_a_comparison_as_csv(api, trio):
    _bundles, runs = trio
    ids = f"{runs['fast'].pk},{runs['slow'].pk}"
    body = api.get(f"/api/v1/compare/?runs={ids}").json()
    response = api.get(f"/api/v1/compare/?runs={ids}&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = sum(len(m["runs"]) for t in body["tests"] for m in t["metrics"])
    assert len(rows) == expected
    row = next(
        r
        for r in rows
        if r["test_id"] == READ
        and r["metric"] == "iops"
        and r["run"] == str(runs["slow"].pk)
    )
    slow = entry(body, READ, "iops", runs["slow"].pk)
    assert float(row["mean"]) == pytest.approx(slow["mean"])
    assert row["verdict"] == slow["verdict"]


@pytest.mark.parametrize(
    ("query", "pointer"),
    [
        ("", "/runs"),
        ("?runs=abc", "/runs"),
        ("?runs=1,,x", "/runs"),
        ("?runs=%C2%B9", "/runs"),  # "¹" passes str.isdigit(), not int()
        ("?runs=999999", "/runs"),
        ("?runs=" + ",".join(str(i) for i in range(1, 30)), "/runs"),
    ],
)
def test_it_refuses_bad_compare_queries(api, db, query, pointer):
    response = api.get(f"/api/v1/compare/{query}")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == pointer


def test_it_does_not_compare_someone_elses_private_run(api, fio, alice):
    run = store_bundle(make_bundle(fio), owner=alice, visibility="private")
    response = api.get(f"/api/v1/compare/?runs={run.pk}")
    assert response.status_code == 400


def test_it_saves_a_comparison_as_a_share_link(api, trio):
    _bundles, runs = trio
    ids = [runs["fast"].pk, runs["slow"].pk]
    response = api.post(
        "/api/v1/comparisons/", {"runs": ids, "title": "cap"}, format="json"
    )
    assert response.status_code == 201, response.content
    saved = response.json()
    assert saved["share_url"].endswith(f"/c/{saved['slug']}")
    again = api.get(f"/api/v1/comparisons/{saved['slug']}/").json()
    assert again["run_ids"] == ids
    live = api.get(f"/api/v1/compare/?runs={ids[0]},{ids[1]}").json()
    assert again["comparison"] == live


def test_it_ranks_a_run_among_similar_systems(api, trio):
    bundles, runs = trio
    means = {
        # Each run's figure: the geometric mean of its repeats, as on its page.
        name: statistics.geometric_mean(
            repeat_values(bundles[name], READ, "read", "iops")
        )
        for name in bundles
    }
    response = api.get(f"/api/v1/runs/{runs['slow'].pk}/similar/?test_id={READ}")
    assert response.status_code == 200, response.content
    body = response.json()
    comparable = sorted(means.values())
    # Ranked among the other two, never against itself (issue #30).
    others = sorted(v for name, v in means.items() if name != "slow")
    assert body["population"] == pytest.approx(others)
    assert body["ranked_among"] == 2
    below = sum(1 for v in others if v < means["slow"])
    equal = sum(1 for v in others if v == means["slow"])
    assert body["percentile"] == pytest.approx((below + equal / 2) / 2 * 100)
    # The distribution describes every comparable run, the ranked one too.
    assert body["distribution"]["count"] == 3
    assert body["distribution"]["median"] == pytest.approx(
        statistics.median(comparable)
    )
    fast = api.get(f"/api/v1/runs/{runs['fast'].pk}/similar/?test_id={READ}").json()
    assert fast["ranked_among"] == 2
    assert fast["population"] == pytest.approx(
        sorted(v for name, v in means.items() if name != "fast")
    )


def test_it_aggregates_in_postgresql_by_a_facet(api, fio):
    values = {"none": [], "writeback": []}
    for i, mode in enumerate(["none", "none", "none", "writeback", "writeback"]):
        bundle = make_bundle(
            fio,
            tests=(READ,),
            speed="slow" if i % 2 else "fast",
            tags={"cache_mode": mode},
        )
        store_bundle(bundle)
        values[mode].append(
            statistics.geometric_mean(repeat_values(bundle, READ, "read", "iops"))
        )
    response = api.get(
        f"/api/v1/aggregates/?test_id={READ}&metric=iops&group_by=cache_mode"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [g["value"] for g in body["groups"]] == ["none", "writeback"]
    for group in body["groups"]:
        vals = sorted(values[group["value"]])
        q1, median, q3 = statistics.quantiles(vals, n=4, method="inclusive")
        assert group["count"] == len(vals)
        assert group["min"] == pytest.approx(vals[0])
        assert group["max"] == pytest.approx(vals[-1])
        assert group["median"] == pytest.approx(median)
        assert group["q1"] == pytest.approx(q1)
        assert group["q3"] == pytest.approx(q3)
    everything = sorted(values["none"] + values["writeback"])
    assert body["overall"]["median"] == pytest.approx(statistics.median(everything))
    # Run filters narrow the population.
    narrowed = api.get(
        f"/api/v1/aggregates/?test_id={READ}&metric=iops&cache_mode=writeback"
    ).json()
    assert narrowed["overall"]["count"] == 2


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?test_id=x&metric=speed",
        "?test_id=x&group_by=colour",
        "?test_id=x&cache_mode=turbo",
    ],
)
def test_it_refuses_bad_aggregate_queries(api, db, query):
    response = api.get(f"/api/v1/aggregates/{query}")
    assert response.status_code == 400
    assert response.json()["errors"]


def test_it_keeps_suspect_runs_out_of_distributions(api, fio):
    honest = store_bundle(make_bundle(fio, tests=(READ,), speed="slow"))
    # Declared writethrough, but the guest sees a volatile write cache: the
    # figures are not what the tags say they are.
    cached = store_bundle(
        make_bundle(fio, tests=(READ,), tags={"cache_mode": "writethrough"})
    )
    cached.refresh_from_db()
    assert cached.suspect
    assert "contradicts the guest's write_cache" in cached.suspect_reasons[0]
    url = f"/api/v1/aggregates/?test_id={READ}&metric=iops"
    assert api.get(url).json()["overall"]["count"] == 1
    assert api.get(url + "&suspect=true").json()["overall"]["count"] == 1
    assert api.get(url + "&suspect=false").json()["overall"]["count"] == 1
    similar = api.get(f"/api/v1/runs/{honest.pk}/similar/?test_id={READ}").json()
    assert similar["distribution"]["count"] == 1
    # Ranked among the others: none (the suspect run is not one of them).
    assert similar["population"] == [] and similar["ranked_among"] == 0
    assert similar["percentile"] is None
    # The suspect run itself still answers where it would stand, among the
    # others only.
    ranked = api.get(f"/api/v1/runs/{cached.pk}/similar/?test_id={READ}").json()
    assert ranked["value"] is not None
    assert ranked["population"] == [similar["value"]]
    assert ranked["ranked_among"] == 1
