"""Guest and host runs pair by pair id: either order, concurrently, same owner."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.api.factories import make_bundle


@pytest.mark.django_db(transaction=True)
def test_it_pairs_two_halves_stored_at_the_same_moment(fio, alice):
    host_bundle = make_bundle(fio, role="host", pair_id="race-1")
    guest_bundle = make_bundle(fio, pair_id="race-1")
    # Nothing else shared: no lookup row (CPU model) may serialize the two.
    guest_bundle["environment"]["cpu"]["model"] = "Guest vCPU"
    host_stored = threading.Event()
    errors = []

    def store_host():
        try:
            with transaction.atomic():
                store_bundle(host_bundle, owner=alice)
                host_stored.set()
                # Still uncommitted: the guest's transaction cannot see it yet.
                time.sleep(1.0)
        except Exception as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    def store_guest():
        try:
            host_stored.wait(10)
            with transaction.atomic():
                store_bundle(guest_bundle, owner=alice)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=store_host),
        threading.Thread(target=store_guest),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    guest = Run.objects.get(uuid=guest_bundle["bundle_id"])
    host = Run.objects.get(uuid=host_bundle["bundle_id"])
    assert guest.baseline_id == host.pk


@pytest.mark.django_db
def test_it_does_not_pair_runs_of_different_owners(fio, alice, bob):
    guest = store_bundle(make_bundle(fio, pair_id="mine"), owner=alice)
    store_bundle(make_bundle(fio, role="host", pair_id="mine"), owner=bob)
    guest.refresh_from_db()
    assert guest.baseline_id is None
    own_host = store_bundle(make_bundle(fio, role="host", pair_id="mine"), owner=alice)
    guest.refresh_from_db()
    assert guest.baseline_id == own_host.pk
