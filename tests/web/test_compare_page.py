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


def test_compare_page_queries_do_not_grow_with_runs(
    client, full_pair, django_assert_max_num_queries
):
    """The runs' hardware is read once for all (it was a query per run)."""
    more = ",".join(str(store("full-none.json.gz")) for _ in range(4))
    with django_assert_max_num_queries(8):
        assert client.get(f"/compare/?runs={full_pair},{more}").status_code == 200
