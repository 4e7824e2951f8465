"""Nothing counts every run of a list on a request: the API's run list and
the browse page count up to a cap (``BENCHDB_COUNT_CAP``, lowered here),
then say "more than" it with PostgreSQL's estimate."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchdb.results.ingest import store_bundle
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

CAP = 3


@pytest.fixture
def runs(fio):
    """Six listed guest runs and a host: more than the cap of 3."""
    store_bundle(make_bundle(fio, role="host"))
    return [
        store_bundle(make_bundle(fio, tags={"cache_mode": "none"})) for _ in range(6)
    ]


def counts(queries) -> list[str]:
    """The queries counting the list's runs (``count(*)``; the platform
    menu's count of hosts' guests, ``COUNT(DISTINCT``, reads the hosts'
    guests through their baseline index, not the list; the kept pages'
    stamp, ``web/kept.py``'s, which also reads ``web_keptpage``, counts the
    stored answers, not runs)."""
    return [
        q["sql"]
        for q in queries
        if re.search(r"\bcount\(\*\)", q["sql"], re.I)
        and "web_keptpage" not in q["sql"]
    ]


def test_the_api_counts_up_to_the_cap_then_estimates(api, runs, settings):
    settings.BENCHDB_COUNT_CAP = CAP
    url = "/api/v1/runs/?role=guest&page_size=2"
    with CaptureQueriesContext(connection) as queries:
        body = api.get(url).json()
    assert body["count"] is None and body["count_capped"] is True
    assert body["count_estimate"] > CAP
    [count] = counts(queries)
    assert re.search(rf"LIMIT {CAP + 1}\)", count), count
    # Past the cap the pages still chain to the last run, and no further.
    seen, next_url = [r["id"] for r in body["results"]], body["next"]
    while next_url:
        page = api.get(next_url).json()
        seen += [r["id"] for r in page["results"]]
        next_url = page["next"]
    assert sorted(seen) == sorted(r.pk for r in runs)
    assert api.get(url + "&page=4").status_code == 404
    # Below the cap the count is exact, and is its own estimate.
    settings.BENCHDB_COUNT_CAP = 100
    body = api.get(url).json()
    assert (body["count"], body["count_capped"], body["count_estimate"]) == (
        6,
        False,
        6,
    )


def test_the_browse_page_says_more_than_the_cap(client, runs, settings):
    settings.BENCHDB_COUNT_CAP = CAP
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/runs/?role=guest&cache_mode=none")
    text = page.content.decode()
    assert page.status_code == 200
    assert re.search(r"More than 3 runs \(about \d", text), text
    assert 'class="n">4+</span>' in text  # the cap's runs, a lower bound
    assert "page 1 of" not in text  # the last page is not known
    found = counts(queries)
    assert found and all(f"LIMIT {CAP + 1}" in sql for sql in found), found
    # Below the cap: the exact number, and the facets' exact counts.
    settings.BENCHDB_COUNT_CAP = 100
    text = client.get("/runs/?role=guest&cache_mode=none").content.decode()
    assert "6 runs." in text and "+</span>" not in text and "page 1 of 1" in text
