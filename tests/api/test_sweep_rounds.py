"""An interleaved sweep stored and shown: each guest run's round and place in
the sweep, the order on the sweep page, and each mode paired with the
reference mode round by round.  Bundles carry real fio outputs (factories):
cache=none from the rate-capped job, writeback from the unthrottled one."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from rest_framework.test import APIClient
from scipy import stats as sps

from benchdb.results import across
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Result
from benchdb_agent import vm
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

PLAN = vm.sweep_plan(["none", "writeback"], 3, seed=5)


def _sweep(fio, plan=PLAN, sweep_id="sw-rounds"):
    host = make_bundle(fio, role="host", pair_id="p-r")
    host["sweep_id"] = sweep_id
    store_bundle(host)
    runs = []
    for position, (round_, mode) in enumerate(plan, 1):
        speed = "slow" if mode == "none" else "fast"
        doc = make_bundle(fio, pair_id="p-r", tags={"cache_mode": mode}, speed=speed)
        doc["sweep_id"] = sweep_id
        vm.mark_sweep_run(doc, round_, position)
        runs.append(store_bundle(doc))
    return runs


def test_each_run_keeps_its_round_and_place(fio):
    runs = _sweep(fio)
    assert [(r.sweep_round, r.sweep_position, r.cache_mode) for r in runs] == [
        (round_, i, mode) for i, (round_, mode) in enumerate(PLAN, 1)
    ]


def test_the_sweep_page_shows_the_order_and_pairs_by_round(fio, client):
    runs = _sweep(fio)
    page = client.get("/sweeps/sw-rounds/").content.decode()
    shown = re.findall(
        r'data-position="(\d+)" data-round="(\d+)" data-mode="([a-z]+)"', page
    )
    assert shown == [(str(i), str(r), m) for i, (r, m) in enumerate(PLAN, 1)]
    assert "3 rounds, every mode once per round" in page
    assert 'id="sweep-host-cpu-missing"' in page  # these runs did not measure it
    # The pairs: writeback ÷ none of the same round, from the stored figures.
    figure = {
        (r.sweep_round, r.cache_mode): Result.objects.get(run=r).iops_mean for r in runs
    }
    ratios = [figure[(i, "writeback")] / figure[(i, "none")] for i in (1, 2, 3)]
    row = re.search(r'<tr data-mode="writeback"[^>]*>(.*?)</tr>', page, re.S).group(1)
    for i, ratio in enumerate(ratios, 1):
        assert f"r{i} {ratio:.3f}" in row
    assert f"{math.exp(np.mean(np.log(ratios))):.3f}×" in row


def test_paired_by_round_is_the_t_interval_of_the_log_ratios():
    ref = {1: 100.0, 2: 90.0, 3: 110.0, 4: 95.0}
    other = {1: 120.0, 2: 100.0, 3: 140.0, 5: 1.0}  # round 4 and 5 unpaired
    out = across.paired_by_round(ref, other)
    logs = np.log([1.2, 100 / 90, 140 / 110])
    low, high = sps.t.interval(0.95, 2, loc=logs.mean(), scale=sps.sem(logs))
    assert out["rounds"] == 3
    assert out["ratio"] == pytest.approx(math.exp(logs.mean()))
    assert (out["low"], out["high"]) == pytest.approx((math.exp(low), math.exp(high)))
    assert [r for r, _ in out["per_round"]] == [1, 2, 3]
    two = across.paired_by_round({1: 1.0, 2: 1.0}, {1: 2.0, 2: 2.0})
    assert two["ratio"] == pytest.approx(2.0) and two["low"] is None


@pytest.mark.parametrize("bad", [0, 1001, "2", 1.5])
def test_the_api_refuses_a_bad_round(fio, bad):
    doc = make_bundle(fio)
    doc["sweep_id"] = "sw-x"
    doc["sweep_round"] = bad
    response = APIClient().post("/api/v1/submissions/", doc, format="json")
    assert response.status_code == 400
    assert "/sweep_round" in {e["pointer"] for e in response.json()["errors"]}


def test_the_sweep_page_compares_host_cpu_per_io_by_round(fio, client):
    # writeback's QEMU used twice none's CPU in each round (same I/O).
    plan = vm.sweep_plan(["none", "writeback"], 3, seed=5)
    store_bundle(make_bundle(fio, role="host", pair_id="p-c"))
    for position, (round_, mode) in enumerate(plan, 1):
        user = (2.0 if mode == "writeback" else 1.0) * (1 + round_ / 10)
        env = {"host_cpu": {"user_s": user, "system_s": 0.0, "seconds": 10.0}}
        doc = make_bundle(
            fio, pair_id="p-c", tags={"cache_mode": mode}, environment=env
        )
        doc["sweep_id"] = "sw-cpu"
        vm.mark_sweep_run(doc, round_, position)
        store_bundle(doc)
    page = client.get("/sweeps/sw-cpu/").content.decode()
    row = re.search(
        r'id="sweep-host-cpu">.*?<tr data-mode="writeback">(.*?)</tr>', page, re.S
    ).group(1)
    assert "2.000×" in row  # paired by round: exactly twice, every round
    assert "2.000–2.000×" in row
