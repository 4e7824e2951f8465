"""The compare page stays small: a large comparison's tables come on demand.

Past ``views.INLINE_TABLE_ROWS`` figures the page carries the charts and a
link per group to its table's page (fetched by charts.js when the group's
table is opened), and the Markdown is its own text URL.  The tables and the
Markdown are the same whether inline or fetched.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import uuid
from html import unescape
from pathlib import Path

import pytest

from benchdb.results import reads
from benchdb.results.ingest import store_bundle
from benchdb.web import present, views

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pages_written(settings):
    """These tests read what the page writes (its context, its queries, a
    patched limit): no page kept as written (benchdb/web/kept.py,
    tests/web/test_kept_pages.py)."""
    settings.BENCHDB_PAGE_MEMO = 0


BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
ROW = re.compile(r"<tr data-test=.*?</tr>", re.S)


def store(name: str) -> int:
    with gzip.open(BUNDLES / name, "rt") as handle:
        bundle = copy.deepcopy(json.load(handle))
    bundle["bundle_id"] = str(uuid.uuid4())
    return store_bundle(bundle).pk


@pytest.fixture
def full_pair():
    return f"{store('full-none.json.gz')},{store('full-writeback.json.gz')}"


def test_large_comparisons_fetch_their_tables(client, full_pair, monkeypatch):
    url = f"/compare/?runs={full_pair}"
    monkeypatch.setattr(views, "INLINE_TABLE_ROWS", 10_000)
    inline = client.get(url).content.decode()
    inline_rows = ROW.findall(inline)
    assert inline_rows and 'class="table-slot"' not in inline

    monkeypatch.setattr(views, "INLINE_TABLE_ROWS", 10)
    page = client.get(url).content.decode()
    assert 'class="delta"' not in page and not ROW.findall(page)
    assert len(page) < len(inline) / 2
    slots = re.findall(r'class="table-slot" data-src="([^"]+)"', page)
    groups = re.findall(r'<details class="group" id="([^"]+)"', page)
    assert len(slots) == len(groups) >= 5
    fetched = []
    for slot, group in zip(slots, groups, strict=True):
        src = unescape(slot)
        assert src.endswith(f"&group={group}")
        answer = client.get(src)
        assert answer.status_code == 200
        assert answer["Content-Security-Policy"].startswith("default-src 'self'")
        body = answer.content.decode()
        assert f'id="{group}-table"' in body and 'class="scroll table-fragment"' in body
        fetched += ROW.findall(body)
    # The same rows, in the same order, as the page would have carried.
    assert fetched == inline_rows


def test_the_markdown_is_its_own_url(client, full_pair):
    page = client.get(f"/compare/?runs={full_pair}").content.decode()
    assert "<textarea" not in page
    [src] = re.findall(r'id="copy-markdown" class="secondary" data-src="([^"]+)"', page)
    assert f'href="{src}"' in page  # a link too, without JavaScript
    answer = client.get(unescape(src))
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    ids = [int(i) for i in full_pair.split(",")]
    runs, _reference, data = reads.comparison(ids, None)
    labels = present.differences(runs)["labels"]
    assert answer.content.decode() == present.markdown(
        present.chart_groups(data, labels)
    )
    lines = answer.content.decode().splitlines()
    assert lines[0].startswith("| test | figure | run |") and len(lines) > 50


def test_table_and_markdown_urls_refuse_bad_input(client, full_pair):
    assert client.get(f"/compare/table/?runs={full_pair}&group=nope").status_code == 404
    assert client.get("/compare/table/?runs=1,x&group=group-dd").status_code == 400
    assert client.get("/compare/table/?runs=999999&group=group-dd").status_code == 404
    assert client.get("/compare/markdown/?runs=x").status_code == 400
    assert client.get("/compare/markdown/?runs=999999").status_code == 404


def test_a_kept_comparisons_rows_are_written_once_per_labels_and_code(
    client, full_pair, monkeypatch
):
    """The inline tables' rows of a comparison the memo keeps are written
    once and kept with it (``views._chart_groups``, ``compare.derived``);
    a run renamed, or another rows template, writes them again."""
    from benchdb.results.models import Run
    from benchdb.web.templatetags import partials

    monkeypatch.setattr(views, "INLINE_TABLE_ROWS", 10_000)
    url = f"/compare/?runs={full_pair}"
    first = client.get(url).context["groups"]
    assert all(g["rows_html"] and g["rows"] == [] for g in first)
    assert client.get(url).context["groups"] is first
    Run.objects.filter(pk=int(full_pair.split(",")[1])).update(title="<i>renamed</i>")
    renamed = client.get(url)
    assert renamed.context["groups"] is not first
    assert "&lt;i&gt;renamed&lt;/i&gt;" in renamed.content.decode()
    assert client.get(url).context["groups"] is renamed.context["groups"]
    monkeypatch.setattr(partials, "code", lambda jinja: "another template")
    assert client.get(url).context["groups"] is not renamed.context["groups"]


def test_compare_page_queries_do_not_grow_with_runs(
    client, full_pair, django_assert_num_queries
):
    """Three queries whatever the number of runs: the runs with their
    hardware (it was a query per run, then three), the ids of the results
    the comparison reads (its key, compare._MEMO), and those results with
    their values and their listed host baselines' (it was two); two when
    asked again, the comparison kept computed."""
    from benchdb.results.models import Run

    more = [store("full-none.json.gz") for _ in range(4)]
    # Two of them guests of a host that is not compared: its figures come
    # in the results' query (the overheads).
    host = store("full-none.json.gz")
    Run.objects.filter(pk=host).update(role="host")
    Run.objects.filter(pk__in=more[:2]).update(baseline_id=host)
    ids = ",".join(str(pk) for pk in more)
    url = f"/compare/?runs={full_pair},{ids}"
    with django_assert_num_queries(3):
        response = client.get(url)
    assert response.status_code == 200
    with django_assert_num_queries(2):
        assert client.get(url).context["data"] is response.context["data"]
    data = response.context["data"]
    with_overhead = {
        e["run"]
        for t in data["tests"]
        for m in t["metrics"]
        for e in m["runs"]
        if e["overhead"] is not None
    }
    assert with_overhead == set(more[:2])


def test_table_rows_are_escaped_and_labelled(client, full_pair):
    """The comparison's tables (templates/web/_compare_table.html): titles
    and labels as text, each cell with its column's header, the verdict
    and figure cells marked for narrow screens."""
    from benchdb.results.models import Result, Run

    ids = [int(i) for i in full_pair.split(",")]
    hostile = "<script>alert('x')</script> & \"quoted\""
    Result.objects.filter(run_id__in=ids).update(title=hostile)
    Run.objects.filter(pk=ids[1]).update(title=hostile, cache_mode="writeback")
    runs, _reference, data = reads.comparison(ids, None)
    groups = present.chart_groups(data, present.differences(runs)["labels"])
    for g in groups:
        url = f"/compare/table/?runs={full_pair}&group={g['slug']}"
        html = client.get(url).content.decode()
        assert "<script>alert" not in html and "&lt;script&gt;" in html
        body = html[html.index("<tbody>") : html.index("</tbody>")]
        assert body.count("<tr ") == len(g["rows"])
        assert body.count('class="verdict" data-label="Verdict"') == len(g["rows"])
        assert body.count('data-label="95% interval"') == len(g["rows"])


@pytest.mark.parametrize("inline_rows", [10, 10_000])
def test_a_large_page_computes_only_what_it_shows(
    client, full_pair, monkeypatch, inline_rows
):
    """Four runs without their tables: the page computes only the charted
    figures (``present.charted_figures``), and is the same page as from every
    figure; with their tables, every figure."""
    from django.shortcuts import render

    from benchdb.results import compare

    monkeypatch.setattr(views, "INLINE_TABLE_ROWS", inline_rows)
    more = [store("full-none.json.gz"), store("full-writeback.json.gz")]
    ids = [int(i) for i in full_pair.split(",")] + more
    response = client.get(f"/compare/?runs={','.join(map(str, ids))}")
    runs, reference, data = reads.comparison(ids, None)
    context = views._presented_comparison(runs, reference, data, ids)
    assert context["tables_inline"] is (inline_rows > 10)
    expected = render(response.wsgi_request, "web/compare.html", context)
    token = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]+"')
    assert token.sub(b"", response.content) == token.sub(b"", expected.content)
    fewer = compare.build_comparison(runs, reference, present.charted_figures)
    shown = sum(len(t["metrics"]) for t in fewer["tests"])
    # 98 of 163 for full runs: the sweep's curves keep every figure.
    assert shown < sum(len(t["metrics"]) for t in data["tests"]) * 0.7
