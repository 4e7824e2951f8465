"""Each tool process's wall time is in the bundle, so the agent's own cost is
known (bench --agent-overhead); dd's file is kept from one repeat to the next
(issue 29)."""

from __future__ import annotations

import copy
import io
import os
import re

import pytest

from benchdb_agent import bundle, contract, runner


class Watch(io.StringIO):
    """A progress stream that notes, at each step, whether dd's file is
    there (the step is printed just before the tool starts)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.seen = []

    def write(self, text: str) -> int:
        step = re.search(r"dd-write\S+ (warm-up|repeat \d+)", text)
        if step:
            self.seen.append((step.group(1), os.path.exists(self.path)))
        return super().write(text)


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    target = tmp_path_factory.mktemp("target")
    watch = Watch(str(target / f"benchdb-dd.{os.getpid()}.bin"))
    doc = runner.run_suite(
        str(target),
        "quick",
        only=["fio-rand-read-4k-q1t1", "dd-write-1m-fdatasync"],
        size=16 * 2**20,
        runtime=1,
        repeats=3,
        max_repeats=3,
        progress_stream=watch,
    )
    return target, doc, watch


def test_every_tool_process_has_its_wall_time(timed):
    _target, doc, _watch = timed
    assert bundle.validate(doc) == []
    timing = doc["timing"]
    in_tests = 0.0
    for test in doc["tests"]:
        assert test["warmup_wall_s"] > 0
        in_tests += test["warmup_wall_s"]
        for rep in test["repeats"]:
            in_tests += rep["tool_wall_s"]
            if test["tool"] == "fio":
                # fio measured for 1 s (--runtime=1): its process took longer.
                (rec,) = rep["records"]
                assert rep["tool_wall_s"] >= rec["runtime_s"] >= 0.9
    assert doc["preconditioning"]["wall_s"] > 0
    in_tests += doc["preconditioning"]["wall_s"]
    # The rest of the tool time: the dd probe and the version probes.
    assert in_tests < timing["tool_s"] < timing["run_s"]
    assert timing["tool_processes"] >= 2 * (1 + 3) + 1 + 2


def test_dd_keeps_its_file_between_repeats_and_removes_it_at_the_end(timed):
    target, _doc, watch = timed
    steps = dict(watch.seen)
    assert steps["warm-up"] is False
    for i in (1, 2, 3):
        assert steps[f"repeat {i}"] is True
    assert list(target.iterdir()) == []


def test_older_bundles_without_timings_stay_valid(timed):
    _target, doc, _watch = timed
    old = copy.deepcopy(doc)
    del old["timing"], old["preconditioning"]["wall_s"]
    for test in old["tests"]:
        del test["warmup_wall_s"]
        for rep in test["repeats"]:
            del rep["tool_wall_s"]
    assert contract.check(old).errors == []


@pytest.mark.parametrize("bad", [-1, "2 s", 10**9, True])
def test_a_timing_that_is_not_seconds_is_refused(timed, bad):
    _target, doc, _watch = timed
    wrong = copy.deepcopy(doc)
    wrong["tests"][0]["repeats"][0]["tool_wall_s"] = bad
    wrong["timing"]["tool_s"] = bad
    pointers = {e["pointer"] for e in contract.check(wrong).errors}
    assert pointers == {"/tests/0/repeats/0/tool_wall_s", "/timing/tool_s"}
