"""The agent's end-of-run table and the run page show the same figure and the
same interval for every test (issue 29): both are the geometric mean of the
repeats with its log-scale 95% interval, defined once in
``benchdb_agent.stats``; and so does the stored figure a list, a rank or a
report reads of the run (issue 30)."""

from __future__ import annotations

import copy
import gzip
import html
import json
import re
import uuid
from pathlib import Path

import pytest

from benchdb.results import stats
from benchdb.results.ingest import store_bundle
from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.web import present
from benchdb.web.templatetags.benchdb_format import metric_words
from benchdb_agent import runner, suite

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
ROW = re.compile(
    r'<tr data-test="(?P<test>[^"]+)"[^>]*>\s*<td[^>]*>.*?</td>'
    r"\s*<td[^>]*>(?P<words>[^<]*)</td>"
    r"\s*<td[^>]*>(?P<centre>[^<]*)</td>\s*<td[^>]*>(?P<interval>.*?)</td>",
    re.S,
)


def page_figures(client, run) -> dict:
    """(test id, metric words) -> (figure, interval) as the run page prints
    them, in the agent's ASCII ("us", "-")."""
    page = client.get(run.get_absolute_url()).content.decode()
    out = {}
    for m in ROW.finditer(page):
        interval = html.unescape(re.sub(r"<small>.*?</small>", "", m["interval"]))
        out[(m["test"], html.unescape(m["words"]))] = tuple(
            html.unescape(text).replace("µs", "us").replace(" – ", " - ").strip()
            for text in (m["centre"], interval)
        )
    return out


def table_rows(doc: dict) -> dict:
    """title -> the end-of-run table's cells (columns split on 2+ spaces)."""
    lines = runner.summary_table(doc).splitlines()
    out = {}
    for test, line in zip(doc["tests"], lines[1 : len(doc["tests"]) + 1], strict=True):
        assert line.startswith(test["title"] + " ")
        out[test["test_id"]] = re.split(r"\s{2,}", line.strip())
    return out


def assert_same(client, doc) -> int:
    run = store_bundle(doc)
    page = page_figures(client, run)
    table = table_rows(doc)
    metric_of = {t["test_id"]: t["metric"] for t in suite.tests_for("full")}
    stored = {r.test_id: r for r in run.results.all()}
    compared = 0
    for test in doc["tests"]:
        metric = metric_of[test["test_id"]]
        figure, interval = page[(test["test_id"], metric_words(metric))]
        cells = table[test["test_id"]]
        assert cells[1] == figure, (test["test_id"], cells, figure)
        # The stored figure lists, ranks, reports and exports read (issue 30).
        column = getattr(stored[test["test_id"]], METRIC_COLUMNS[metric])
        assert runner.stats.human(column, metric) == figure, (test, column)
        assert cells[2].replace(" (min-max)", "") == interval, (cells, interval)
        compared += 1
    return compared


@pytest.mark.parametrize("name", ["full-writeback.json.gz", "full-none.json.gz"])
def test_the_table_shows_what_the_run_page_shows_for_every_test(client, name):
    with gzip.open(BUNDLES / name, "rt") as handle:
        doc = json.load(handle)
    doc = copy.deepcopy(doc)
    doc["bundle_id"] = str(uuid.uuid4())
    assert assert_same(client, doc) >= 20


Q1 = "fio-rand-read-4k-q1t1"


def three_repeats(iops: tuple) -> dict:
    """The full sample's bundle with its Q1T1 test cut to three repeats that
    measured ``iops`` (the table reads the records)."""
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = json.load(handle)
    test = next(t for t in doc["tests"] if t["test_id"] == Q1)
    test["repeats"] = test["repeats"][:3]
    for rep, value in zip(test["repeats"], iops, strict=True):
        rep["records"][0]["iops"] = value
    return doc


def test_a_stalled_repeat_is_not_averaged_into_an_impossible_figure():
    """Two repeats at 100 IOPS and one at 4,000 (a cache answered): the
    arithmetic mean (1,400) is what no repeat measured and disagrees with the
    page; the table prints the geometric mean (342), and its interval (2 to
    67,877 IOPS) is too wide to mean anything: said so, never as bounds."""
    doc = three_repeats((100.0, 100.0, 4000.0))
    cells = table_rows(doc)[Q1]
    assert cells[1] == "342 IOPS"
    figure = runner.stats.summarize([100.0, 100.0, 4000.0])
    low, high = figure["ci95_low"], figure["ci95_high"]
    assert runner.stats.too_wide(low, high)
    assert cells[2] == "too noisy to estimate (3 repeats)"
    assert f"{high:,.0f} IOPS" not in runner.summary_table(doc)
    assert "1,400" not in runner.summary_table(doc)


def test_a_repeat_that_measured_zero_prints_the_run_pages_arithmetic_mean():
    """No geometric mean where a repeat measured zero: the table prints the
    run page's figure, the arithmetic mean said so (``stats.centre``)."""
    doc = three_repeats((0.0, 100.0, 200.0))
    page = present.result_cells(
        {
            "summary": stats.summarize([0.0, 100.0, 200.0]),
            "metric": "iops",
            "overhead": None,
        }
    )["centre"]
    assert table_rows(doc)[Q1][1] == page == "100 IOPS (arithmetic mean)"


def test_a_real_run_prints_the_figures_its_run_page_shows(client, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    doc = runner.run_suite(
        str(target),
        "quick",
        only=["fio-rand-read-4k-q1t1", "ioping-read-4k", "dd-write-1m-fdatasync"],
        size=16 * 2**20,
        runtime=1,
        ioping_count=5,
        progress_stream=open("/dev/null", "w"),  # noqa: SIM115
    )
    assert assert_same(client, doc) == 3
