"""The agent's tables print the statistic benchdb's pages show, and say so:
the end-of-run table and vm's overhead table give each test's geometric mean
of the repeats (``stats.summarize``), never the arithmetic mean, under a
header and a legend that name it (issue 30: the table said 23,623 IOPS, an
arithmetic mean, where the run page said 22,040)."""

from __future__ import annotations

import copy
import gzip
import json
import math
import re
from pathlib import Path

from benchdb_agent import runner, stats, suite, vm

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def bundle(name: str) -> dict:
    with gzip.open(BUNDLES / name, "rt") as handle:
        return copy.deepcopy(json.load(handle))


def spread(doc: dict, test_id: str, values: tuple) -> dict:
    """``doc`` with the test's repeats measuring ``values`` IOPS, whose
    arithmetic and geometric means differ in the printed digits."""
    test = next(t for t in doc["tests"] if t["test_id"] == test_id)
    test["repeats"] = test["repeats"][: len(values)]
    for rep, iops in zip(test["repeats"], values, strict=True):
        rep["records"][0]["iops"] = iops
    return doc


VALUES = (18_000.0, 21_000.0, 26_000.0, 31_000.0)
GMEAN = stats.human(math.exp(sum(map(math.log, VALUES)) / len(VALUES)), "iops")
AMEAN = stats.human(sum(VALUES) / len(VALUES), "iops")


def test_the_end_of_run_table_prints_and_names_the_geometric_mean():
    doc = spread(bundle("full-none.json.gz"), "fio-rand-read-4k-q32t1", VALUES)
    table = runner.summary_table(doc)
    header, *lines = table.splitlines()
    assert re.split(r"\s{2,}", header.strip())[1] == "geomean"
    row = next(line for line in lines if line.startswith("Random read 4 KiB Q32T1"))
    assert GMEAN in row and AMEAN not in row, (GMEAN, AMEAN, row)
    assert GMEAN != AMEAN
    assert "geomean: the geometric mean of the repeats" in table


def test_vms_overhead_table_prints_and_names_the_geometric_mean():
    host = spread(bundle("full-none.json.gz"), "fio-rand-read-4k-q32t1", VALUES)
    guest = bundle("full-writeback.json.gz")
    table = vm.overhead_table(host, [("writeback", guest)], "full")
    header, *lines = table.splitlines()
    assert "host geomean" in header and "guest geomean" in header
    row = next(line for line in lines if "fio-rand-read-4k-q32t1" in line)
    assert GMEAN in row and AMEAN not in row, row
    # The guest's figure is its own geometric mean too.
    test = next(t for t in guest["tests"] if t["test_id"] == "fio-rand-read-4k-q32t1")
    metric = {t["test_id"]: t["metric"] for t in suite.tests_for("full")}[
        test["test_id"]
    ]
    figure = stats.summarize(runner.repeat_series(test)[metric])["gmean"]
    assert stats.human(figure, metric) in row
    assert lines[-1] == runner.STATISTIC_LEGEND
