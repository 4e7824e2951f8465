"""A host run measured inside a VM (agent --allow-virtual-host, bundle
``virtual_host``) is stored as such: its own guests pair with it (their
overhead is against that VM), but no report or population answer takes it
for bare metal, a bare-metal host of the same pair takes its place, and its
disk type is not guessed from a virtual disk's rotational flag (issue 29)."""

from __future__ import annotations

import pytest

from benchdb.results import population, reads
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from benchdb_agent import bundle as agent_bundle
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


def virtual_host(fio, pair_id: str) -> dict:
    doc = make_bundle(fio, role="host", pair_id=pair_id)
    doc["virtual_host"] = True
    target = doc["environment"]["target"]
    target.update({"disk_bus": "virtio-blk", "rotational": True})
    return doc


def test_a_virtual_host_pairs_with_its_guests_but_never_stands_for_bare_metal(
    fio, alice
):
    doc = virtual_host(fio, "nested-1")
    assert agent_bundle.validate(doc) == []
    before = store_bundle(make_bundle(fio, pair_id="nested-1"), owner=alice)
    host = store_bundle(doc, owner=alice)
    after = store_bundle(make_bundle(fio, pair_id="nested-1"), owner=alice)
    assert host.virtual_host is True
    for guest in (before, after):
        guest.refresh_from_db()
        # Paired, whichever came first, with its overhead against that VM...
        assert guest.baseline_id == host.pk
        assert guest.results.exclude(overhead=None).count() > 0
    # ...which no report takes for bare metal.
    assert not reads.overhead_guests().filter(pk__in=[before.pk, after.pk]).exists()
    assert not population.population_runs().filter(pk=host.pk).exists()
    assert reads.overhead_summary_answer() == []
    # A bare-metal host of the same pair takes over both guests.
    real = store_bundle(make_bundle(fio, role="host", pair_id="nested-1"), owner=alice)
    assert real.virtual_host is False
    assert set(
        Run.objects.filter(pk__in=[before.pk, after.pk]).values_list(
            "baseline_id", flat=True
        )
    ) == {real.pk}
    assert set(reads.overhead_guests().values_list("pk", flat=True)) == {
        before.pk,
        after.pk,
    }
    assert reads.overhead_summary_answer() != []


def test_a_virtual_hosts_rotational_flag_is_no_disk_type(fio):
    host = store_bundle(virtual_host(fio, "nested-2"))
    assert host.hardware is None or host.hardware.disk_type == "unknown"
    doc = make_bundle(fio, role="host", pair_id="metal")
    doc["environment"]["target"].update({"disk_bus": "sata", "rotational": True})
    assert store_bundle(doc).hardware.disk_type == "hdd"


def test_only_true_marks_a_virtual_host(fio):
    doc = virtual_host(fio, "nested-3")
    doc["virtual_host"] = "yes"
    assert ("/virtual_host", "must be true or false") in agent_bundle.validate(doc)
