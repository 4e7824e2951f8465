"""Every browse facet count is the number of runs its filter returns.

A host baseline is filtered under the platform of the guests measured against
it (results/filters.py), so it is counted there too: the count next to a value
must equal the rows ``?<facet>=<value>`` lists, with the other chosen filters.
"""

from __future__ import annotations

import gzip
import json
import uuid

import pytest
from django.core.management import call_command
from django.http import QueryDict

from benchdb.results import reads
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from benchdb.results.vocab import FACETS, HARDWARE_FACETS
from tests.web.test_owner_pages import BUNDLES

pytestmark = pytest.mark.django_db

ALL_FACETS = {**FACETS, **HARDWARE_FACETS}


@pytest.fixture
def reference():
    call_command("load_reference")


def _rows(params: QueryDict, facet: str, value: str) -> int:
    """Runs the browse filter returns for ``facet=value`` with the others."""
    query = params.copy()
    query.setlist(facet, [value])
    return reads.browse(query).qs.count()


@pytest.mark.parametrize(
    "query", ["", "cache_mode=none", "platform=proxmox", "role=host&disk_type=hdd"]
)
def test_every_facet_count_is_the_rows_its_filter_returns(client, reference, query):
    params = QueryDict(query)
    # Precondition: a host baseline whose guests run on another platform.
    assert (
        Run.objects.listed()
        .filter(role="host", guests__isnull=False)
        .exclude(guests__platform="unknown")
        .exists()
    )
    facets = {f["name"]: f for f in reads.facet_counts(params)}
    assert set(facets) == set(ALL_FACETS)
    compared = 0
    for name, choices in ALL_FACETS.items():
        shown = {o["value"]: o["n"] for o in facets[name]["options"]}
        for value in choices.values:
            assert _rows(params, name, value) == shown.get(value, 0), (name, value)
            compared += 1
    assert compared > 30
    # The page shows those counts, and the number of runs they add up to.
    page = client.get(f"/runs/?{query}")
    assert page.context["page"].paginator.count == reads.browse(params).qs.count()
    assert {
        f["name"]: {o["value"]: o["n"] for o in f["options"]}
        for f in page.context["facets"]
    } == {
        name: {o["value"]: o["n"] for o in f["options"]} for name, f in facets.items()
    }


def test_home_platform_counts_are_the_rows_browse_returns(client, reference):
    counts = client.get("/").context["facet_counts"]["platform"]
    assert counts
    for value, _label, n in counts:
        assert reads.browse(QueryDict(f"platform={value}")).qs.count() == n


@pytest.mark.parametrize("every_facet", [False, True])
def test_browse_total_is_the_count_of_its_runs(
    client, reference, every_facet, settings
):
    """The page's total is read from its facet counts
    (``summaries.rows_counted``), or counted when every facet is chosen: the
    runs the filters return, none of them included twice, none missed."""
    settings.BENCHDB_PAGE_MEMO = 0  # the page written, with its context
    run = Run.objects.listed().filter(role="guest").select_related("hardware").first()
    query = QueryDict(mutable=True)
    query.setlist("cache_mode", [run.cache_mode, "unsafe"])
    if every_facet:
        for name in ALL_FACETS:
            path = {"disk_type": "hardware", "raid_level": "hardware"}.get(name)
            value = getattr(run.hardware if path else run, name)
            query.setlist(name, [value] if value else [])
    for q in (query, QueryDict("cache_mode=unsafe&role=host")):
        page = client.get(f"/runs/?{q.urlencode()}").context["page"]
        assert page.paginator.count == reads.browse(q).qs.count()
    assert client.get(f"/runs/?{query.urlencode()}").context["page"].paginator.count


def test_a_facet_filter_is_the_or_of_its_values(client, reference):
    """Several values of a facet (``?cache_mode=none&cache_mode=writeback``,
    one ``IN (...)``): exactly the runs with any of them, the same whether a
    value is repeated, in any order, through the API and the browse page."""
    listed = list(Run.objects.listed().select_related("hardware"))
    checked = 0
    for name, choices in ALL_FACETS.items():
        if name == "platform":  # hosts under their guests' platform: above
            continue
        values = list(choices.values)
        attr = f"hardware.{name}" if name in HARDWARE_FACETS else name

        def of(run, attr=attr):
            obj = run
            for part in attr.split("."):
                obj = getattr(obj, part) if obj is not None else None
            return obj

        present = sorted({of(r) for r in listed} - {None})
        for chosen in (present[:1], present[:2], present[-2:][::-1], values):
            if not chosen:
                continue
            want = {r.pk for r in listed if of(r) in chosen}
            query = QueryDict(mutable=True)
            query.setlist(name, [*chosen, chosen[0]])
            assert set(reads.browse(query).qs.values_list("pk", flat=True)) == want
            answer = client.get(
                "/api/v1/runs/", {name: chosen, "page_size": 500}
            ).json()
            assert answer["count"] == len(want), (name, chosen)
            assert {r["id"] for r in answer["results"]} == want
            checked += 1
    assert checked > 20


def test_a_lone_chosen_facet_counts_every_listed_run_from_the_stored_answer(
    client, reference
):
    """One facet chosen and nothing else: its counts are those of the page
    before anything is chosen (stored, with their freshness on the page);
    with another filter they are counted live, without a freshness note."""
    stored = {
        name: dict(map(tuple, pairs))
        for name, pairs in reads.listed_facet_counts().items()
    }
    for query, name in (("platform=proxmox", "platform"), ("cache_mode=none", None)):
        facets, total, freshness = reads.facets_and_total(QueryDict(query))
        shown = {f["name"]: {o["value"]: o["n"] for o in f["options"]} for f in facets}
        name = name or query.split("=")[0]
        assert shown[name] == {v: n for v, n in stored[name].items() if v is not None}
        assert freshness is not None and freshness["runs"] >= 1
        assert total.runs == reads.browse(QueryDict(query)).qs.count()
        page = client.get(f"/runs/?{query}").content.decode()
        assert 'id="freshness"' in page
    facets, total, freshness = reads.facets_and_total(
        QueryDict("cache_mode=none&role=guest")
    )
    assert freshness is None
    assert (
        'id="freshness"'
        not in client.get("/runs/?cache_mode=none&role=guest").content.decode()
    )


def test_a_count_beside_a_facet_is_what_the_list_shows_after_an_upload(reference):
    """The stored counts are a snapshot: after an upload (before the worker's
    refresh) they are not served, so a facet never says "none 2" beside a
    list of 4."""
    reads.facets_and_total(QueryDict(""))  # stored now
    doc = json.load(gzip.open(BUNDLES / "full-none.json.gz", "rt"))
    doc["bundle_id"] = str(uuid.uuid4())
    store_bundle(doc)
    for query in ("", "cache_mode=none"):
        facets, _total, _fresh = reads.facets_and_total(QueryDict(query))
        for facet in facets:
            if query and not query.startswith(facet["name"] + "="):
                continue  # counted within the choice: another test's matter
            for option in facet["options"]:
                chosen = QueryDict(f"{facet['name']}={option['value']}")
                shown = reads.browse(chosen).qs.count()
                assert option["n"] == shown, (query, facet["name"], option)
