"""The run list, run detail and hardware list build their rows directly
(``serializers.FAST_ROWS``) and page by ids first (``reads.IdPaginator``);
the answers must be exactly DRF's own, byte for byte, and the queries a
fixed number."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchdb.api import serializers as s
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Hardware, Run
from benchdb.results.vocab import Visibility
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q1t1"


@pytest.fixture
def shapes(fio, alice):
    """Runs of every shape a row can have: a guest with a listed host
    baseline, one whose baseline is private, an owned run with tags and
    warnings, one without hardware, a hidden and a suspect one."""
    host = store_bundle(make_bundle(fio, role="host", pair_id="p1", speed="slow"))
    guest = store_bundle(
        make_bundle(
            fio,
            tests=(READ, "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync"),
            pair_id="p1",
            tags={"cache_mode": "none", "disk_type": "nvme-ssd", "note": "é ✓"},
        )
    )
    private_host = store_bundle(make_bundle(fio, role="host", pair_id="p2"))
    Run.objects.filter(pk=private_host.pk).update(visibility=Visibility.PRIVATE)
    store_bundle(make_bundle(fio, pair_id="p2", tags={"cache_mode": "writeback"}))
    owned = store_bundle(make_bundle(fio, tags={"disk_type": "hdd"}))
    Run.objects.filter(pk=owned.pk).update(
        owner=alice,
        warnings=[{"code": "x", "message": "a warning", "test_id": READ}],
        suspect=True,
        suspect_reasons=["too fast"],
        iothread=True,
        title="Owned",
    )
    bare = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=bare.pk).update(hardware=None, ran_at=None)
    hidden = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=hidden.pk).update(hidden=True, hidden_reason="spam")
    return {"host": host, "guest": guest, "owned": owned, "bare": bare}


def both(client, url: str) -> tuple[bytes, bytes]:
    """(fast answer, DRF's own answer) of one GET."""
    fast = client.get(url)
    assert fast.status_code == 200, fast.content
    s.FAST_ROWS = False
    try:
        slow = client.get(url)
    finally:
        s.FAST_ROWS = True
    return fast.content, slow.content


def test_list_detail_and_hardware_rows_are_drfs_own(api, alice, shapes):
    urls = [
        "/api/v1/runs/",
        "/api/v1/runs/?page_size=2&page=2",
        "/api/v1/runs/?cache_mode=none&disk_type=nvme-ssd",
        "/api/v1/runs/?ordering=disk_type",
        "/api/v1/hardware/",
        "/api/v1/hardware/?disk_type=hdd",
        *(f"/api/v1/runs/{run.pk}/" for run in shapes.values()),
        f"/api/v1/hardware/{shapes['guest'].hardware_id}/",
    ]
    for url in urls:
        fast, slow = both(api, url)
        assert fast == slow, url
    # The owner sees the private baseline's id and their own runs.
    owner = token_client(alice)
    for url in ("/api/v1/runs/?mine=true", f"/api/v1/runs/{shapes['owned'].pk}/"):
        fast, slow = both(owner, url)
        assert fast == slow, url


def test_pages_by_ids_keep_order_count_and_every_run(api, fio):
    for _ in range(7):
        store_bundle(make_bundle(fio))
    expected = list(
        Run.objects.listed().order_by("-created", "-id").values_list("pk", flat=True)
    )
    seen = []
    for page in range(1, 5):
        body = api.get(f"/api/v1/runs/?page_size=2&page={page}").json()
        assert body["count"] == 7
        seen += [r["id"] for r in body["results"]]
    assert seen == expected


def test_list_hardware_and_detail_queries_are_fixed(api, fio, shapes):
    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(url).status_code == 200
        return len(ctx.captured_queries)

    counts = (
        queries("/api/v1/runs/"),
        queries("/api/v1/hardware/"),
        queries(f"/api/v1/runs/{shapes['guest'].pk}/"),
    )
    for _ in range(3):
        store_bundle(make_bundle(fio, tests=(READ, "fio-rand-write-4k-q1t1")))
    # count, the page's ids, the page's rows; the detail: run, results,
    # repeats, raw formats, baseline results, repeat values.
    assert counts == (3, 3, 6)
    assert (
        queries("/api/v1/runs/"),
        queries("/api/v1/hardware/"),
        queries(f"/api/v1/runs/{shapes['guest'].pk}/"),
    ) == counts
    assert Hardware.objects.count() >= 2


def test_home_system_count_and_hardware_counts_are_the_old_definitions(shapes):
    """The rewritten queries (a distinct count of listed runs' hardware, EXISTS
    and a per-row count) answer what the joins and GROUP BY answered."""
    from django.db.models import Count, Q

    from benchdb.results import reads

    listed = Run.objects.listed()
    Run.objects.filter(pk=shapes["owned"].pk).update(visibility=Visibility.UNLISTED)
    old_systems = Hardware.objects.filter(runs__in=listed).distinct().count()
    assert old_systems >= 2
    assert reads.home_summary()["system_count"] == old_systems
    listed_q = Q(runs__visibility=Visibility.PUBLIC, runs__hidden=False)
    old = (
        Hardware.objects.annotate(run_count=Count("runs", filter=listed_q))
        .filter(run_count__gt=0)
        .order_by("id")
    )
    assert [(h.pk, h.run_count) for h in reads.hardware_list()] == [
        (h.pk, h.run_count) for h in old
    ]
