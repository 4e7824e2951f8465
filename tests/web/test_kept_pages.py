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


def _shared() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT address, stamp, octet_length(content) FROM web_keptpage")
        return {address: (stamp, size) for address, stamp, size in cursor.fetchall()}


@pytest.mark.parametrize("url", PAGES)
def test_a_page_one_process_wrote_is_read_by_another(
    client, reference, url, django_assert_num_queries
):
    client.get(url)  # stores the answers it computed: a new stamp
    written = client.get(url)
    shared = _shared()
    (address,) = [a for a in shared if a.endswith("\n" + url)]
    assert shared[address][0] == kept.stamp()
    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM web_keptpage WHERE address = %s", [address])
        (content,) = cursor.fetchone()
    # The page as written, with the placeholder where each visitor's token goes.
    page = written.content.decode()
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if found:
        page = page.replace(found.group(1), kept.PLACEHOLDER)
    assert bytes(content).decode() == page
    # Another process: none of its own, the shared one read, not written.
    kept._PAGES.clear()
    with django_assert_num_queries(2):
        again = client.get(url)
    assert _untokened(again) == _untokened(written)
    assert again.headers["Content-Type"] == written.headers["Content-Type"]
    # And kept in that process from then on.
    with django_assert_num_queries(1):
        client.get(url)


def test_a_new_stamp_drops_the_shared_pages_of_the_old(client, reference):
    # The first visits store the answers they computed (a new stamp each).
    for url in ("/", "/runs/", "/", "/runs/"):
        client.get(url)
    old = kept.stamp()
    assert {stamp for stamp, _ in _shared().values()} == {old}
    assert len(_shared()) == 2
    run = reference[-1]
    Run.objects.filter(pk=run.pk).update(title="A newer title")
    assert "A newer title" in client.get("/").content.decode()
    shared = _shared()
    assert {stamp for stamp, _ in shared.values()} == {kept.stamp()} != {old}
    assert len(shared) == 1


def test_the_shared_pages_keep_within_the_budget(client, reference, settings):
    client.get("/")
    home = len(client.get("/").content)
    # Room for about one home page: the second address is not shared (each
    # process still keeps its own within the same budget).
    settings.BENCHDB_PAGE_MEMO = home + 2000
    client.get("/")
    client.get("/?page=1")
    shared = _shared()
    assert sum(size for _, size in shared.values()) <= settings.BENCHDB_PAGE_MEMO
    assert len(shared) == 1


def test_an_address_with_a_nul_byte_is_written_not_shared(client, reference):
    client.get("/runs/")
    response = client.get("/runs/?q=a%00b", QUERY_STRING="q=a\x00b")
    assert response.status_code in (200, 400)
    assert not any("\x00" in a for a in _shared())


def test_a_refused_store_still_gives_the_page(client, reference, caplog):
    client.get("/")
    before = _shared()
    # PostgreSQL refuses the store (rolled back with the test).
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON web_keptpage "
            "FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse()"
        )
    kept.clear()
    with caplog.at_level("WARNING", logger="benchdb.web.kept"):
        page = client.get("/")
    assert page.status_code == 200 and "benchdb" in page.content.decode().lower()
    assert "could not be shared" in caplog.text
    assert _shared() == before
    # The request's transaction went on: the next page is kept as before.
    assert client.get("/").status_code == 200


def test_a_page_kept_by_other_code_is_written_again(
    client, reference, monkeypatch, django_assert_num_queries
):
    # An upgrade (new templates or code) or other settings: a new
    # fingerprint, so the page the old code shared is not given.
    for _ in range(2):
        client.get("/")
    kept._PAGES.clear()
    with django_assert_num_queries(2):  # the shared page: stamp, read
        client.get("/")
    monkeypatch.setattr(kept, "_files", lambda: "the next release")
    monkeypatch.setattr(kept, "_GENERATION", None)
    kept._PAGES.clear()
    with pytest.raises(pytest.fail.Exception):
        with django_assert_num_queries(2):
            client.get("/")
    assert len({a.split("\n")[0] for a in _shared()}) == 2


def test_a_run_page_is_kept_for_anonymous_visitors_until_the_run_changes(
    client, reference, django_assert_num_queries
):
    run = reference[-1]
    url = run.get_absolute_url()
    client.get(url)  # stores the answers it computed (its rank)
    written = client.get(url)
    assert written.status_code == 200
    with django_assert_num_queries(1):
        again = client.get(url)
    assert _untokened(again) == _untokened(written)
    # Hidden by a moderator: gone at once, not given from the kept page.
    Run.objects.get(pk=run.pk).moderate("hide", "test")
    assert client.get(url).status_code == 410
    Run.objects.get(pk=run.pk).moderate("unhide")
    assert client.get(url).status_code == 200


def test_a_run_page_with_its_owner_key_is_the_owners(reference):
    run = reference[-1]
    key = run.set_owner_key()
    run.save(update_fields=["owner_key_hash"])
    visitor, owner = Client(), Client()
    for _ in range(2):
        visitor.get(run.get_absolute_url())
    assert owner.get(f"{run.get_absolute_url()}?key={key}").status_code == 302
    mine = owner.get(run.get_absolute_url()).content.decode()
    theirs = visitor.get(run.get_absolute_url()).content.decode()
    assert 'name="visibility"' in mine
    assert 'name="visibility"' not in theirs
