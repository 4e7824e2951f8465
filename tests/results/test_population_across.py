"""Across-systems answers read from the database: a generated community with
a known ranking of cache modes, some systems that measured only some modes,
runs without a hardware description, and a mode nobody measured.

Twelve systems (speeds a factor of ten apart) measured none, writethrough
(identical to none), writeback (+12%) and directsync (-12%) with 2% noise;
two more measured only none and writeback; two runs have no hardware row;
nobody measured unsafe.  The answers must rank writeback first and
directsync last, call none vs writethrough practically equivalent, count the
12 systems and 48 runs they rest on, and say what they left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchdb.results import across, population, stats
from benchdb.results.models import Hardware
from tests.results.test_population import TEST, _run

pytestmark = pytest.mark.django_db

MODES = ["none", "writethrough", "writeback", "directsync", "unsafe"]
EFFECT = {"none": 1.0, "writethrough": 1.0, "writeback": 1.12, "directsync": 0.88}


@pytest.fixture
def community():
    rng = np.random.default_rng(11)
    for i, speed in enumerate(rng.lognormal(np.log(5000), 0.6, size=14)):
        hw = Hardware.objects.create(fingerprint=f"fp-{i}", disk_type="sata-ssd")
        modes = EFFECT if i < 12 else ("none", "writeback")
        for mode in modes:
            value = speed * EFFECT[mode] * rng.lognormal(0, 0.02)
            _run(hw, value, role="guest", cache_mode=mode)
    _run(None, 4000.0, role="guest", cache_mode="none")
    _run(None, 4500.0, role="guest", cache_mode="writeback")


def test_cache_modes_are_ranked_over_the_systems_that_measured_all(community):
    out = population.rank_settings("cache_mode", MODES, {"role": "guest"}, TEST)
    assert out["systems"] == 12
    assert out["runs"] == 48
    assert out["settings"] == ["none", "writethrough", "writeback", "directsync"]
    assert out["without_data"] == ["unsafe"]
    ranks = out["average_ranks"]
    assert ranks["writeback"] == 1.0 and ranks["directsync"] == 4.0
    assert out["friedman"]["p"] < 0.001
    different = {(p["a"], p["b"]) for p in out["pairs"] if p["different"]}
    assert ("none", "writethrough") not in different
    assert ("writeback", "directsync") in different
    # The CD diagram's bars: none and writethrough cannot be told apart.
    assert any({"none", "writethrough"} <= set(g) for g in out["groups"])
    probs = {(p["a"], p["b"]): p for p in out["probabilities"]}
    assert probs[("none", "writethrough")]["equivalent"] > 0.95
    assert probs[("none", "writeback")]["b_better"] > 0.95
    assert probs[("writeback", "directsync")]["a_better"] > 0.95
    # Left out, and why: two systems measured only none and writeback; one
    # run of each of those modes has no hardware row.
    assert out["left_out"]["none"] == {
        "systems_not_measuring_all": 2,
        "their_runs": 2,
        "runs_without_system": 1,
    }
    assert out["left_out"]["writethrough"]["systems_not_measuring_all"] == 0
    assert out["left_out"]["writeback"]["runs_without_system"] == 1


def test_two_modes_get_wilcoxon_hodges_lehmann_and_probabilities(community):
    answer = population.answer(
        {"role": "guest"}, {"cache_mode": "none"}, {"cache_mode": "writeback"}, TEST
    )
    full = answer["detail"]
    acr = full["across"]
    assert acr["systems"] == 14  # every system that measured both
    assert acr["runs"] == 28
    assert acr["wilcoxon"]["p"] < 0.001
    hl = acr["hodges_lehmann"]
    assert hl["low"] < 1.12 < hl["high"]
    assert hl["ratio"] == pytest.approx(1.12, rel=0.02)
    assert acr["probabilities"]["b_better"] > 0.95
    assert acr["verdict"] == stats.FASTER
    assert acr["text"].startswith("B is better (Wilcoxon p < 0.001 over 14 systems")
    # Beside today's median ratio, which the answer still gives.
    assert full["ratio"] == pytest.approx(1.12, rel=0.03)
    assert full["left_out"]["a"] == {
        "systems_not_measuring_all": 0,
        "their_runs": 0,
        "runs_without_system": 1,
    }


def test_an_identical_mode_is_practically_equivalent(community):
    answer = population.answer(
        {"role": "guest"}, {"cache_mode": "none"}, {"cache_mode": "writethrough"}, TEST
    )
    acr = answer["detail"]["across"]
    assert acr["systems"] == 12
    assert acr["probabilities"]["equivalent"] > 0.95
    assert acr["verdict"] == stats.EQUIVALENT
    left = answer["detail"]["left_out"]["a"]
    assert left["systems_not_measuring_all"] == 2  # they measured no writethrough


def test_too_few_systems_say_how_many_more(community):
    few = population.filter_runs({"role": "guest"}).filter(
        hardware__fingerprint__in=["fp-0", "fp-1", "fp-2", "fp-3"]
    )
    out = population.compare_sets(
        few.filter(cache_mode="none"), few.filter(cache_mode="writeback"), TEST
    )
    assert out["across"]["enough"] is False
    assert out["across"]["systems_needed"] == across.MIN_SYSTEMS - 4
    assert out["across"]["text"].startswith("not enough systems yet: 4 systems")
    ranked = population.rank_settings(
        "cache_mode",
        MODES,
        {"role": "guest", "hardware": Hardware.objects.get(fingerprint="fp-0").pk},
        TEST,
    )
    assert ranked["average_ranks"] is None
    assert ranked["systems_needed"] == across.MIN_SYSTEMS - 1
    assert ranked["text"].startswith("not enough systems yet: 1 system measured all")


def test_the_api_ranks_the_modes(client, community):
    response = client.get(
        "/api/v1/population/rank/",
        {
            "test_id": TEST,
            "facet": "cache_mode",
            "values": ",".join(MODES),
            "role": "guest",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    direct = population.rank_settings("cache_mode", MODES, {"role": "guest"}, TEST)
    assert body["average_ranks"] == pytest.approx(direct["average_ranks"])
    assert (body["systems"], body["runs"]) == (12, 48)
    assert body["without_data"] == ["unsafe"]
    assert body["left_out"]["none"]["systems_not_measuring_all"] == 2
    assert body["text"] == direct["text"]
    assert len(body["probabilities"]) == 6


def test_the_api_compare_carries_the_across_systems_answer(client, community):
    response = client.get(
        "/api/v1/population/compare/",
        {
            "test_id": TEST,
            "a": "cache_mode=none",
            "b": "cache_mode=writeback",
            "role": "guest",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["across"]["systems"] == 14
    assert body["across"]["probabilities"]["b_better"] > 0.95
    assert body["left_out"]["b"]["runs_without_system"] == 1


@pytest.mark.parametrize(
    "values, message",
    [
        ("none,bogus", "not a cache_mode: bogus"),
        ("none", "at least two different values"),
        ("none,none", "at least two different values"),
    ],
)
def test_the_api_refuses_bad_rankings(client, db, values, message):
    response = client.get(
        "/api/v1/population/rank/",
        {"test_id": TEST, "facet": "cache_mode", "values": values},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
