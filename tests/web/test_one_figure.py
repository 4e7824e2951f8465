"""One figure is one number (issue 30): the run's figure is the geometric
mean of its repeats (``stats.centre``) on the run page, in lists, in the
stored columns the reports, ranks and exports read, and in the API, so seed
001's cache=writethrough against cache=none is the same percentage on the
cache-mode report, the compare page, the compare API and the population
API."""

from __future__ import annotations

import gzip
import importlib
import json
import re
import statistics
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from benchdb.results import stats
from benchdb.results.ingest import store_bundle
from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.results.models import Run
from benchdb.results.reference import seed001

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def seed001_run(mode: str) -> Run:
    return Run.objects.get(
        source="published", cache_mode=mode, results__test_id=seed001.TEST_ID
    )


def test_seed_001_writethrough_against_none_is_one_number_everywhere(client):
    call_command("load_reference")
    none, through = seed001_run("none"), seed001_run("writethrough")

    body = client.get(
        f"/api/v1/compare/?runs={none.pk},{through.pk}&reference={none.pk}"
    ).json()
    test = next(t for t in body["tests"] if t["test_id"] == seed001.TEST_ID)
    figure = next(m for m in test["metrics"] if m["metric"] == "bw_bytes")
    compared = next(e for e in figure["runs"] if e["run"] == through.pk)

    population = client.get(
        "/api/v1/population/compare/",
        {
            "test_id": seed001.TEST_ID,
            "metric": "bw_bytes",
            "a": "cache_mode=none",
            "b": "cache_mode=writethrough",
        },
    ).json()

    # The ratio of the two runs' geometric means (-4.9%), where the stored
    # arithmetic means once gave the report -4.7%.
    rates = {
        r: [m.bw_bytes for m in r.results.get().measurements.all()]
        for r in (none, through)
    }
    geometric = statistics.geometric_mean(rates[through]) / statistics.geometric_mean(
        rates[none]
    )
    arithmetic = statistics.mean(rates[through]) / statistics.mean(rates[none])
    assert f"{(arithmetic - 1) * 100:+.1f}" != f"{(geometric - 1) * 100:+.1f}"
    delta = compared["delta_percent"]
    assert delta == pytest.approx((geometric - 1) * 100, rel=1e-9)
    assert population["percent"] == pytest.approx(delta, rel=1e-9)

    printed = f"{delta:+.1f}%"
    report = client.get(
        f"/reports/cache-modes/?workload={seed001.TEST_ID}"
    ).content.decode()
    row = report.split('data-mode="writethrough"')[1].split("</tr>")[0]
    assert f"<strong>{printed}</strong>" in row, row
    page = client.get(
        f"/compare/?runs={none.pk},{through.pk}&ref={none.pk}"
    ).content.decode()
    cells = re.search(
        rf'<tr data-test="{seed001.TEST_ID}" data-metric="bw_bytes" '
        rf'data-run="{through.pk}".*?</tr>',
        page,
        re.S,
    )
    assert cells and printed.replace("-", "−") in cells[0].replace("-", "−"), cells


def test_a_runs_list_headline_is_its_run_page_figure(client):
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = json.load(handle)
    doc["bundle_id"] = str(uuid.uuid4())
    run = store_bundle(doc)
    read = "fio-rand-read-4k-q32t1"

    page = client.get(run.get_absolute_url()).content.decode()
    shown = re.search(
        rf'<tr data-test="{read}" data-mean="([^"]*)" '
        r'data-gmean="([^"]*)"',
        page,
    )
    arithmetic, geometric = float(shown[1]), float(shown[2])
    assert arithmetic != geometric  # the repeats differ: the two means do

    browse = client.get("/runs/").content.decode()
    cell = re.search(r'data-label="4K random read, IOPS" data-value="([^"]*)"', browse)
    assert float(cell[1]) == geometric
    listed = client.get("/api/v1/runs/").json()["results"]
    detail = client.get(f"/api/v1/runs/{run.pk}/").json()
    test = next(t for t in detail["tests"] if t["test_id"] == read)
    assert test["iops_mean"] == geometric == test["stats"]["read"]["iops"]["gmean"]
    assert [r["id"] for r in listed] == [run.pk]


def test_the_migration_rewrites_stored_figures_as_ingest_writes_them():
    migration = importlib.import_module(
        "benchdb.results.migrations.0023_result_figure_is_the_pages"
    )
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = json.load(handle)
    doc["bundle_id"] = str(uuid.uuid4())
    run = store_bundle(doc)
    ingested = sorted(run.results.values_list("test_id", *METRIC_COLUMNS.values()))

    def run_sql(figure: str) -> list:
        with connection.cursor() as cursor:
            cursor.execute(migration.RECOMPUTE.format(figure=figure, fallback="mean"))
        return sorted(run.results.values_list("test_id", *METRIC_COLUMNS.values()))

    backwards = run_sql("mean")  # what the columns held before
    assert backwards != ingested
    for result in run.results.all():
        summary = result.stats["directions"][result.stats["main_direction"]]
        assert result.iops_mean == (summary.get("iops") or {}).get("mean")
    assert run_sql("gmean") == ingested


def test_each_page_says_once_which_statistic_its_figures_are(client):
    call_command("load_reference")
    none, back = seed001_run("none"), seed001_run("writeback")
    legend = re.compile(r'<p class="legend-note" id="figure-legend">([^<]*)')

    run_page = client.get(none.get_absolute_url()).content.decode()
    said = legend.search(run_page)[1]
    assert said.startswith("Figures: geometric mean of 5 repeats, 95% interval. ")
    assert said.count("geometric mean of") == 1
    compare = client.get(
        f"/compare/?runs={none.pk},{back.pk}&ref={none.pk}"
    ).content.decode()
    said = legend.search(compare)[1]
    assert said.startswith("Figures: geometric mean of 5–6 repeats, 95% interval. ")
    assert said.count("geometric mean of") == 1

    assert stats.figure_legend([1, 1]) == (
        "Figures: geometric mean of 1 repeat, min–max (too few repeats for a 95% "
        "interval)."
    )
    assert stats.figure_legend([2, 10, 0]) == (
        "Figures: geometric mean of 2–10 repeats, 95% interval (min–max where "
        "fewer than 3)."
    )
    assert stats.figure_legend([]) == ""
