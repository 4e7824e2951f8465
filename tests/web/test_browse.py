"""Browse as a results database: headline figures, sorting both ways without
piling up parameters, removable chips, and filters that never vanish."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from benchdb.results.models import Result, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def reference():
    call_command("load_reference")


def _run_order(page: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'name="runs" value="(\d+)"', page)]


def test_headline_column_sorts_both_ways(client, reference):
    # Give two runs the 4K random read test id with known means.
    runs = list(Run.objects.filter(title__contains="CentOS 7").order_by("pk")[:2])
    for run, iops in zip(runs, (5000.0, 9000.0), strict=True):
        result = run.results.first()
        Result.objects.filter(pk=result.pk).update(
            test_id="fio-rand-read-4k-q32t1", iops_mean=iops
        )
    up = client.get("/runs/?ordering=rand4k_iops").content.decode()
    down = client.get("/runs/?ordering=-rand4k_iops").content.decode()
    assert _run_order(up)[:2] == [runs[0].pk, runs[1].pk]
    assert _run_order(down)[:2] == [runs[1].pk, runs[0].pk]
    assert "5,000" in up and "9,000" in up
    # The indicator and the link that turns the order round.
    assert 'aria-sort="ascending"' in up
    assert "?ordering=-rand4k_iops" in up
    assert 'aria-sort="descending"' in down


def test_sort_links_replace_the_ordering(client, reference):
    page = client.get("/runs/?cache_mode=none&ordering=title&page=1").content.decode()
    links = re.findall(r'href="(\?[^"]*)" class="sort', page)
    assert links
    for link in links:
        assert link.count("ordering=") == 1 and "page=" not in link
        assert "cache_mode=none" in link
    assert "?cache_mode=none&amp;ordering=-title" in page  # title: turn it round


def test_chips_remove_one_filter_and_filters_never_vanish(client, reference):
    page = client.get("/runs/?cache_mode=none&storage_backend=zfs").content.decode()
    assert "No run matches" in page
    # Both chips, each removing only itself.
    assert 'href="?storage_backend=zfs"' in page  # the cache_mode chip
    assert 'href="?cache_mode=none"' in page  # the storage chip
    # zfs matches nothing together with none, and is still shown, checked.
    assert 'value="zfs" checked' in page
    assert 'value="none" checked' in page


def test_browse_query_count_is_bounded(
    client, reference, django_assert_max_num_queries
):
    with django_assert_max_num_queries(20):
        client.get("/runs/?ordering=-seq1m_bw")


def test_host_baselines_follow_their_guests_platform(client, reference):
    host = Run.objects.get(pair_id="seed-002-hdd", role="host")
    guest = Run.objects.filter(baseline=host).first()
    assert host.platform == "unknown" and guest.platform != "unknown"
    page = client.get(f"/runs/?platform={guest.platform}").content.decode()
    assert f'name="runs" value="{host.pk}"' in page
    assert f"{guest.get_platform_display()} (host)" in page
    api = client.get(f"/api/v1/runs/?platform={guest.platform}").json()
    assert host.pk in [r["id"] for r in api["results"]]


def test_filtered_pages_read_by_ids_are_the_filtered_list(client, reference):
    """The page's rows are read by id without the filters (IdPaginator.rows_of):
    every page of the API list and of the browse page holds the runs, the
    order and the count of the filtered list itself."""
    from django.db.models import Count
    from django.http import QueryDict

    from benchdb.results import reads

    common = (
        Result.objects.values("test_id").annotate(n=Count("run")).order_by("-n").first()
    )
    queries = [
        "disk_type=hdd",
        "disk_type=hdd&disk_type=nvme-ssd&ordering=-title",
        "platform=proxmox",
        "role=host&ordering=disk_type",
        f"test_id={common['test_id']}&ordering=title",
        "q=seed&ordering=-disk_type",
    ]
    for query in queries:
        expected = list(reads.browse(QueryDict(query)).qs.values_list("pk", flat=True))
        assert len(expected) >= 3, query
        seen, page = [], 1
        while True:
            url = f"/api/v1/runs/?{query}&page_size=2&page={page}"
            body = client.get(url).json()
            assert body["count"] == len(expected), query
            seen += [r["id"] for r in body["results"]]
            if not body["next"]:
                break
            page += 1
        assert seen == expected, query
        shown = client.get(f"/runs/?{query}").context["page"]
        assert [r.pk for r in shown] == expected[:50], query
        assert shown.paginator.count == len(expected), query
