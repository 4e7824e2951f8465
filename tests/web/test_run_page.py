"""The run page leads with what was measured, how far to trust it, the
overhead against its host, and for a host baseline its guests."""

from __future__ import annotations

import copy
import gzip
import json
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def test_trust_card_shows_the_agents_warnings_first(client):
    with gzip.open(BUNDLES / "full-writeback.json.gz", "rt") as handle:
        bundle = json.load(handle)
    bundle = copy.deepcopy(bundle)
    bundle["bundle_id"] = str(uuid.uuid4())
    run = store_bundle(bundle)
    page = client.get(run.get_absolute_url()).content.decode()
    glance = page.index('class="glance"')
    results = page.index("<h2>Results</h2>")
    assert glance < results
    card = page[glance:results]
    for warning in bundle["warnings"]:
        assert warning["code"] in card
    assert "unstable" in card and "host-read-cache" in card
    # What was measured: the headline figures, in words and units.
    assert "4K random read" in card and "IOPS" in card and "MB/s" in card
    # Every metric in words, never the raw key.
    assert ">iops<" not in page and ">bw_bytes<" not in page
    assert "Operations per second" in page and "Bandwidth" in page


def test_host_baseline_lists_its_guests_and_a_guest_its_overhead(client):
    call_command("load_reference")
    host = Run.objects.get(pair_id="seed-002-hdd", role="host")
    guests = list(Run.objects.filter(baseline=host))
    page = client.get(host.get_absolute_url()).content.decode()
    assert "Guests measured against it" in page
    for guest in guests:
        assert guest.get_absolute_url() in page
    guest = next(g for g in guests if g.storage_backend == "file")
    page = client.get(guest.get_absolute_url()).content.decode()
    card = page[page.index('class="glance"') : page.index("<h2>Results</h2>")]
    assert "Host baseline:" in card and host.get_absolute_url() in card


def test_a_warned_test_carries_its_badge(client):
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        bundle = json.load(handle)
    bundle["bundle_id"] = str(uuid.uuid4())
    run = store_bundle(bundle)
    page = client.get(run.get_absolute_url()).content.decode()
    warned = next(w for w in bundle["warnings"] if w.get("test_id"))
    row = page.split(f'data-test="{warned["test_id"]}"')[1].split("</tr>")[0]
    assert f'<span class="badge warn">{warned["code"]}</span>' in row


def test_a_published_source_without_figures_says_so(client):
    """Seed 000 published charts only: its page says there are no figures
    rather than "0 tests", and does not speak of published figures."""
    call_command("load_reference")
    charts_only = Run.objects.get(suite_id="published-000")
    assert not charts_only.results.exists()
    page = client.get(charts_only.get_absolute_url()).content.decode()
    assert 'id="no-figures"' in page and "0 tests" not in page
    assert "Published figures, copied" not in page
    with_figures = Run.objects.filter(source="published", results__isnull=False)[0]
    page = client.get(with_figures.get_absolute_url()).content.decode()
    assert 'id="no-figures"' not in page and "Published figures, copied" in page
