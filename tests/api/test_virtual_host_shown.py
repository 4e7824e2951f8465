"""A host run made inside a VM (``Run.virtual_host``) says so wherever the
run is read: its API row (list and detail) and its page, and the page of a
guest paired with it (issue 29)."""

from __future__ import annotations

import pytest

from benchdb.results.ingest import store_bundle
from tests.api.factories import make_bundle
from tests.api.test_virtual_host import virtual_host

pytestmark = pytest.mark.django_db

LINE = "host run made inside a VM: not a bare-metal baseline"


def test_the_api_and_the_pages_say_a_host_run_was_made_inside_a_vm(fio, api, client):
    host = store_bundle(virtual_host(fio, "nested-2"))
    guest = store_bundle(make_bundle(fio, pair_id="nested-2"))
    bare = store_bundle(make_bundle(fio, role="host", pair_id="bare-2"))
    listed = {r["id"]: r for r in api.get("/api/v1/runs/").json()["results"]}
    assert listed[host.pk]["virtual_host"] is True
    assert listed[guest.pk]["virtual_host"] is False
    assert listed[bare.pk]["virtual_host"] is False
    assert api.get(f"/api/v1/runs/{host.pk}/").json()["virtual_host"] is True
    assert api.get(f"/api/v1/runs/{bare.pk}/").json()["virtual_host"] is False

    page = client.get(host.get_absolute_url()).content.decode()
    assert 'id="virtual-host"' in page and LINE in page
    assert 'id="virtual-host-note"' in page
    bare_page = client.get(bare.get_absolute_url()).content.decode()
    assert LINE not in bare_page and 'id="virtual-host-note"' not in bare_page
    guest.refresh_from_db()
    assert guest.baseline_id == host.pk
    guest_page = client.get(guest.get_absolute_url()).content.decode()
    assert 'id="baseline-virtual-host"' in guest_page
