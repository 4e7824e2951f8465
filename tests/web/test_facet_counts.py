"""Every browse facet count is the number of runs its filter returns.

A host baseline is filtered under the platform of the guests measured against
it (results/filters.py), so it is counted there too: the count next to a value
must equal the rows ``?<facet>=<value>`` lists, with the other chosen filters.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.http import QueryDict

from benchdb.results import reads
from benchdb.results.models import Run
from benchdb.results.vocab import FACETS, HARDWARE_FACETS

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
    # The page shows those counts.
    page = client.get(f"/runs/?{query}")
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
