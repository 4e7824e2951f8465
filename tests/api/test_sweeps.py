"""A cache-mode sweep is stored with its id and opens as one comparison."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlparse

import pytest
from rest_framework.test import APIClient

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


def _sweep(fio, sweep_id="sw-1"):
    host = make_bundle(fio, role="host", pair_id="p-sw")
    host["sweep_id"] = sweep_id
    stored = [store_bundle(host)]
    for mode in ("none", "writeback"):
        guest = make_bundle(fio, pair_id="p-sw", tags={"cache_mode": mode})
        guest["sweep_id"] = sweep_id
        guest["tag_sources"] = {"cache_mode": "host-config"}
        stored.append(store_bundle(guest))
    return stored


def test_it_stores_the_sweep_id_and_where_tags_came_from(fio):
    host, none, writeback = _sweep(fio)
    assert {r.sweep_id for r in Run.objects.all()} == {"sw-1"}
    none.refresh_from_db()
    assert none.tag_sources == {"cache_mode": "host-config"}
    assert none.baseline_id == host.pk
    client = APIClient()
    listed = client.get("/api/v1/runs/", {"sweep_id": "sw-1"}).json()["results"]
    assert sorted(r["id"] for r in listed) == sorted([host.pk, none.pk, writeback.pk])
    detail = client.get(f"/api/v1/runs/{none.pk}/").json()
    assert detail["sweep_id"] == "sw-1"
    assert detail["tag_sources"] == {"cache_mode": "host-config"}


def test_the_sweep_page_links_the_compare_page_against_the_host(fio, client):
    host, none, writeback = _sweep(fio)
    response = client.get("/sweeps/sw-1/")
    assert response.status_code == 200
    link = re.search(
        r'id="compare-link" href="([^"]+)"|href="([^"]+)" id="compare-link"',
        response.content.decode(),
    )
    target = urlparse(html.unescape(next(g for g in link.groups() if g)))
    assert target.path == "/compare/"
    query = parse_qs(target.query)
    assert query["ref"] == [str(host.pk)]
    assert query["runs"] == [f"{host.pk},{none.pk},{writeback.pk}"]
    assert client.get(target.path + "?" + target.query).status_code == 200
    # Without rounds recorded, the page says the modes were not interleaved.
    assert 'id="not-interleaved"' in response.content.decode()
    assert client.get("/sweeps/nope/").status_code == 404


def test_it_refuses_a_bad_sweep_id_or_tag_source(fio):
    client = APIClient()
    bundle = make_bundle(fio)
    bundle["sweep_id"] = "no spaces allowed"
    bundle["tag_sources"] = {"cache_mode": "guessed"}
    response = client.post("/api/v1/submissions/", bundle, format="json")
    assert response.status_code == 400
    pointers = {e["pointer"] for e in response.json()["errors"]}
    assert {"/sweep_id", "/tag_sources/cache_mode"} <= pointers


def test_the_run_page_links_its_sweep_and_says_which_tags_were_read(fio, client):
    host, none, writeback = _sweep(fio)
    page = client.get(f"/runs/{none.pk}/").content.decode()
    assert 'href="/sweeps/sw-1/"' in page
    assert "not typed: <code>cache_mode</code>" in page
