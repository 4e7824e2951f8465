"""Pages kept as written for anonymous visitors (benchdb/web/kept.py): given
again in one query while nothing they show changed, written again at once
when a run or a stored answer changes, never kept for a signed-in visitor,
and the comparison's form carries each visitor's own CSRF token."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client, override_settings

from benchdb.results.models import Hardware, Run
from benchdb.results.vocab import DiskType
from benchdb.web import kept

pytestmark = pytest.mark.django_db

PAGES = ["/", "/runs/", "/reports/overhead/", "/reports/cache-modes/"]


@pytest.fixture
def reference():
    call_command("load_reference")
    return list(Run.objects.listed().order_by("id"))


@pytest.mark.parametrize("url", PAGES)
def test_a_page_asked_again_is_given_again_in_one_query(
    client, reference, url, django_assert_num_queries
):
    # The first visit stores the answers it computed: a new stamp.
    client.get(url)
    with override_settings(BENCHDB_PAGE_MEMO=0):
        written = client.get(url)
    assert written.status_code == 200
    client.get(url)
    with django_assert_num_queries(1):
        again = client.get(url)
    # The page written, but for the visitor's CSRF token (a new mask each
    # time), with the same headers.
    assert _untokened(again) == _untokened(written)
    assert again.headers["Vary"] == written.headers["Vary"]
    assert again.headers["Content-Type"] == written.headers["Content-Type"]


def test_a_run_written_is_on_the_next_page_at_once(client, reference):
    run = reference[-1]
    assert run.title in client.get("/").content.decode()
    assert run.title in client.get("/runs/").content.decode()
    Run.objects.filter(pk=run.pk).update(title="A title written just now")
    assert "A title written just now" in client.get("/").content.decode()
    assert "A title written just now" in client.get("/runs/").content.decode()


def test_hardware_edited_outside_ingest_is_on_the_next_page_at_once(client, reference):
    # The admin (or psql) edits a hardware row: migration 0030's trigger
    # bumps the data version as a run's edit does, so the kept browse page is
    # written again with the new disk type, and the stored answers are no
    # longer served as current.
    run = next(r for r in reference if r.hardware_id)
    hardware = Hardware.objects.get(pk=run.hardware_id)
    now = hardware.disk_type
    other = next(c for c, _ in DiskType.choices if c != now)
    label = DiskType(other).label
    client.get("/runs/")
    first = client.get("/runs/").content.decode()
    before = kept.stamp()
    Hardware.objects.filter(pk=hardware.pk).update(disk_type=other)
    assert kept.stamp() != before
    page = client.get("/runs/").content.decode()
    assert page != first
    row = re.search(
        rf"<tr[^>]*>(?:(?!</tr>).)*?/runs/{run.pk}/(?:(?!</tr>).)*</tr>", page, re.S
    )
    assert row and label in row.group(0)


def test_a_stored_answer_written_again_is_a_new_stamp(client, reference):
    client.get("/reports/overhead/")
    before = kept.stamp()
    with transaction.atomic(), connection.cursor() as cursor:
        # A savepoint: a transaction of its own, as a refresh's store is.
        cursor.execute("UPDATE results_answersummary SET runs = runs + 1")
    assert kept.stamp() != before
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(runs) FROM results_answersummary")
        (runs,) = cursor.fetchone()
    # The freshness line quotes the stored answer's runs: read again.
    assert (
        f"over the {runs} listed runs"
        in client.get("/reports/overhead/").content.decode()
    )


def test_a_signed_in_visitor_sees_their_own_page(client, reference):
    client.get("/")
    client.get("/")
    User.objects.create_user("kim", password="a long enough password")
    client.login(username="kim", password="a long enough password")
    page = client.get("/").content.decode()
    assert "Sign out kim" in page


def _untokened(response) -> str:
    page = response.content.decode()
    assert kept.PLACEHOLDER not in page
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", page)


def _token(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def test_a_kept_comparison_carries_each_visitors_csrf_token(
    reference, django_assert_num_queries
):
    same = [r for r in reference if "CentOS 7" in r.title][:2]
    ids = ",".join(str(r.pk) for r in same)
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    one = first.get(f"/compare/?runs={ids}").content.decode()
    with django_assert_num_queries(1):  # kept
        two = second.get(f"/compare/?runs={ids}").content.decode()
    assert kept.PLACEHOLDER not in one and kept.PLACEHOLDER not in two
    assert _token(one) != _token(two)
    saved = second.post(
        "/compare/save/",
        {"runs": ids, "title": "kept", "csrfmiddlewaretoken": _token(two)},
    )
    assert saved.status_code == 302, saved.content[:300]


def test_none_kept_with_no_budget(
    client, reference, settings, django_assert_num_queries
):
    settings.BENCHDB_PAGE_MEMO = 0
    client.get("/")
    client.get("/")
    with pytest.raises(pytest.fail.Exception):
        with django_assert_num_queries(1):
            client.get("/")
