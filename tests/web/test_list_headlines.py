"""Lists show a headline figure for every run that has the headline test,
whatever its origin (issue 30): an imported tool output is the suite's test
its workload is, and a published source's test is matched by its workload
(pattern, block size, queue depth, jobs), not by the source's own name."""

from __future__ import annotations

import copy
import re
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchdb.results import reads
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from benchdb.results.reference import seed003
from benchdb_agent import bundle, imports

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def imported_run(name: str):
    text, parsed = imports.read_output((SAMPLES / name).read_bytes(), name)
    doc = imports.build([(name, text, parsed)], tags={"platform": "proxmox"})
    assert bundle.validate(doc) == []
    return store_bundle(doc)


def published_q32t1_run():
    """Seed 003's printed randread lines, as a source that ran them at
    iodepth 32 with one job would publish them: its own test id, the
    workload in its options."""
    doc = copy.deepcopy(seed003.bundles()[0])
    doc["bundle_id"] = str(uuid.uuid4())
    test = next(t for t in doc["tests"] if t["options"]["rw"] == "randread")
    test["options"].update(iodepth="32", numjobs="1")
    test["test_id"] = "source-randread-qd32"
    test["comparability_key"] = "published-003|source-randread-qd32"
    doc["tests"] = [test]
    doc["title"] = "Published randread QD32"
    return store_bundle(doc)


def rows_by_id(client, query: str = "") -> dict:
    response = client.get(f"/runs/?{query}")
    assert response.status_code == 200
    return {row["id"]: row for row in response.context["rows"]}


def test_imported_and_published_runs_show_their_headline_figures(client):
    call_command("load_reference")
    cdm = imported_run("crystaldiskmark/cdm-8.0.1-wd-blue.txt")
    fioplot = imported_run("fio/fioplot-3.1-randread-32-1.json")
    published = published_q32t1_run()
    rows = rows_by_id(client)
    # CrystalDiskMark's RND4K Q32T1 and SEQ1M Q8T1 are the suite's tests.
    assert rows[cdm.pk]["rand4k_text"] == "65,773"
    assert rows[cdm.pk]["seq1m_text"] != "—"
    # A fio JSON of randread 4k at iodepth 32, one job.
    fioplot_iops = fioplot.results.get(test_id="fio-rand-read-4k-q32t1").iops_mean
    assert float(rows[fioplot.pk]["rand4k_iops"]) == fioplot_iops
    # The published figure (IOPS=17.0k) under its own test id.
    assert rows[published.pk]["rand4k_text"] == "17,000"
    assert rows[published.pk]["seq1m_text"] == "—"  # it has no such test
    # Seed 003's own randread ran at iodepth 16 with 8 jobs: not the test.
    seed = Run.objects.exclude(pk=published.pk).get(suite_id="published-003")
    assert rows[seed.pk]["rand4k_text"] == "—"

    # Sorted by the figure, every run that has it comes first, in order.
    page = client.get("/runs/?ordering=-rand4k_iops").context["page"]
    figures = [r.rand4k_iops for r in page]
    shown = [f for f in figures if f is not None]
    assert figures[: len(shown)] == shown == sorted(shown, reverse=True)
    assert {cdm.pk, fioplot.pk, published.pk} <= {
        r.pk for r in page if r.rand4k_iops is not None
    }


def test_the_home_pages_latest_runs_show_the_same_figures(client):
    cdm = imported_run("crystaldiskmark/cdm-8.0.1-wd-blue.txt")
    published = published_q32t1_run()
    latest = {r.pk: r for r in client.get("/").context["latest"]}
    assert latest[cdm.pk].rand4k_iops == 65772.9
    assert latest[published.pk].rand4k_iops == 17000
    assert latest[published.pk].seq1m_bw is None
    page = client.get("/").content.decode()
    assert '<td class="num figure" data-headline="rand4k_iops">65,773 IOPS</td>' in page
    assert '<td class="num figure" data-headline="rand4k_iops">17,000 IOPS</td>' in page


def test_a_published_runs_page_shows_the_headline_the_list_shows(client):
    run = published_q32t1_run()
    headlines = client.get(run.get_absolute_url()).context["headlines"]
    assert [h["label"] for h in headlines] == ["4K random read"]
    assert headlines[0]["mean"] == pytest.approx(17000)


def test_a_published_result_of_another_workload_is_not_the_headline():
    call_command("load_reference")
    matches = reads.headline_results()
    qs = reads.with_headlines(reads.browse({}).qs, matches)
    published = qs.filter(source="published")
    assert published.exists()
    assert not published.exclude(rand4k_iops=None).exists()
    run = published_q32t1_run()
    assert reads.with_headlines(reads.browse({}).qs).get(pk=run.pk).rand4k_iops


def test_home_and_browse_read_only_the_columns_their_rows_show(client):
    """``reads.PAGE_ROW_COLUMNS`` holds what a row shows: no column or
    related row is read back run by run."""
    call_command("load_reference")
    imported_run("crystaldiskmark/cdm-8.0.1-wd-blue.txt")
    published_q32t1_run()
    for url in ("/", "/runs/", "/runs/?role=host", "/runs/?ordering=-rand4k_iops"):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        one_row = re.compile(r'WHERE "results_\w+"\."id" = \d+ LIMIT 21')
        assert not [q["sql"] for q in captured if one_row.search(q["sql"])], url
