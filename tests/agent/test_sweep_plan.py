"""vm --cache-modes runs the modes in randomized interleaved rounds: every
mode once per round, each round in a fresh random order, repeatable from its
seed, and each guest run records its round and place (a bundle field the
contract accepts and bounds)."""

from __future__ import annotations

from collections import Counter

from benchdb_agent import contract, vm

MODES = list(vm.CACHE_MODES)


def test_every_mode_once_per_round():
    plan = vm.sweep_plan(MODES, 3, seed=7)
    assert len(plan) == 15
    assert [r for r, _m in plan] == [1] * 5 + [2] * 5 + [3] * 5
    for round_ in (1, 2, 3):
        assert sorted(m for r, m in plan if r == round_) == sorted(MODES)


def test_the_same_seed_gives_the_same_order_and_rounds_differ():
    assert vm.sweep_plan(MODES, 3, 11) == vm.sweep_plan(MODES, 3, 11)
    orders = {tuple(m for _r, m in vm.sweep_plan(MODES, 1, s)) for s in range(50)}
    assert len(orders) > 30  # not one fixed order
    plan = vm.sweep_plan(MODES, 3, 11)
    rounds = [tuple(m for r, m in plan if r == i) for i in (1, 2, 3)]
    assert len(set(rounds)) > 1  # a fresh order per round


def test_each_mode_leads_a_round_about_equally_often():
    # 1000 seeds, 5 modes: each should lead ~200 times (binomial sd ~12.6).
    first = Counter(vm.sweep_plan(MODES, 1, s)[0][1] for s in range(1000))
    assert set(first) == set(MODES)
    assert all(150 < n < 250 for n in first.values()), first


def test_a_fresh_seed_unless_one_is_given():
    class Args:
        sweep_seed = None

    seeds = {vm.sweep_seed(Args()) for _ in range(5)}
    assert len(seeds) > 1
    Args.sweep_seed = 42
    assert vm.sweep_seed(Args()) == 42


def test_a_guest_run_records_its_round_and_place():
    doc = {}
    vm.mark_sweep_run(doc, 2, 7)
    assert doc == {"sweep_round": 2, "sweep_position": 7}
    schema = contract.json_schema()["properties"]
    assert schema["sweep_round"]["minimum"] == schema["sweep_position"]["minimum"] == 1
