"""The owner's pages (web/owner.py): My runs, visibility, retag, delete with
confirmation, claim by owner key, the run page's badge and controls, and the
tokens page.  Each action is the API's (results.owning), with the API's
checks and messages."""

from __future__ import annotations

import copy
import gzip
import json
import re
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from benchdb.results.ingest import store_bundle
from benchdb.results.models import ApiToken, Run, hash_secret

pytestmark = pytest.mark.django_db

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def new_run(owner=None, key: str = "", visibility="public", title="") -> Run:
    with gzip.open(BUNDLES / "full-none.json.gz", "rt") as handle:
        doc = copy.deepcopy(json.load(handle))
    doc["bundle_id"] = str(uuid.uuid4())
    doc["tests"] = doc["tests"][:2]
    run = store_bundle(
        doc,
        owner=owner,
        owner_key_hash=hash_secret(key) if key else "",
        visibility=visibility,
    )
    if title:
        run.title = title
        run.save()
    return run


def text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


@pytest.fixture
def ana(client):
    user = User.objects.create_user("ana", password="a-long-Passw0rd!")
    client.force_login(user)
    return user


def test_my_runs_needs_a_sign_in_and_lists_every_own_run_with_its_badge(client):
    assert client.get("/runs/mine/").status_code == 302
    ana = User.objects.create_user("ana", password="x")
    bob = User.objects.create_user("bob", password="x")
    private = new_run(ana, visibility="private", title="mine, private")
    unlisted = new_run(ana, visibility="unlisted", title="mine, unlisted")
    theirs = new_run(bob, visibility="public", title="bob's")
    client.force_login(ana)
    page = client.get("/runs/mine/").content.decode()
    assert 'id="my-runs-link"' in page  # the header links it
    assert f'id="run-{private.pk}"' in page and f'id="run-{unlisted.pk}"' in page
    assert f'id="run-{theirs.pk}"' not in page
    card = page[page.index(f'id="run-{private.pk}"') :]
    assert "owner-private" in card[: card.index("</li>")]
    assert "owner-unlisted" in page


def test_visibility_changes_with_a_post_and_its_csrf_token(ana):
    run = new_run(ana)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ana)
    url = f"/runs/{run.pk}/visibility/"
    assert strict.post(url, {"visibility": "private"}).status_code == 403
    page = strict.get("/runs/mine/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = strict.post(
        url, {"visibility": "private", "csrfmiddlewaretoken": token, "next": "run"}
    )
    assert response.status_code == 302 and response.url == run.get_absolute_url()
    run.refresh_from_db()
    assert run.visibility == "private"
    page = strict.get(run.get_absolute_url()).content.decode()
    assert 'id="owner-bar"' in page and "owner-private" in page
    # Anyone else: not found, not listed.
    assert Client().get(run.get_absolute_url()).status_code == 404


def test_a_bad_visibility_is_refused_with_the_apis_message(client, ana):
    run = new_run(ana)
    response = client.post(f"/runs/{run.pk}/visibility/", {"visibility": "secret"})
    assert response.status_code == 400
    assert "is not a valid choice" in response.content.decode()
    run.refresh_from_db()
    assert run.visibility == "public"


def test_the_owner_bar_is_for_the_owner_only(client, ana):
    run = new_run(ana, visibility="unlisted")
    assert 'id="owner-bar"' in client.get(run.get_absolute_url()).content.decode()
    other = Client()
    other.force_login(User.objects.create_user("bob", password="x"))
    page = other.get(run.get_absolute_url()).content.decode()
    assert 'id="owner-bar"' not in page and "owner-unlisted" not in page
    for url in (f"/runs/{run.pk}/edit/", f"/runs/{run.pk}/delete/"):
        assert other.get(url).status_code == 404
    assert other.post(f"/runs/{run.pk}/delete/").status_code == 404
    assert Run.objects.filter(pk=run.pk).exists()


def test_retag_moves_the_run_and_refuses_what_the_api_refuses(client, ana):
    run = new_run(ana)
    url = f"/runs/{run.pk}/edit/"
    page = client.get(url).content.decode()
    assert "cache_mode=none\n" in page  # the tags as the agent's --tag takes them
    form = {"title": "pve-2", "visibility": "public", "notes": ""}
    response = client.post(
        url, {**form, "tags": "cache_mode=writeback\nstorage_backend=zfs\n"}
    )
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.title, run.cache_mode, run.storage_backend) == (
        "pve-2",
        "writeback",
        "zfs",
    )
    for tags, message in (
        ("cache_mode=fast", "&#x27;fast&#x27; is not one of"),
        ("colour=blue", "unknown tag &#x27;colour&#x27;"),
        ("cache_mode", "line 1: expected key=value"),
        ("cache_mode=none\ncache_mode=none", "line 2: cache_mode is given twice"),
        ("disk_model=a\x00b", "Null characters are not allowed"),
    ):
        response = client.post(url, {**form, "tags": tags})
        assert response.status_code == 400, tags
        assert message in response.content.decode(), (tags, message)
    response = client.post(url, {**form, "title": "a\x00b", "tags": ""})
    assert response.status_code == 400
    run.refresh_from_db()
    assert run.cache_mode == "writeback" and run.title == "pve-2"


def test_markup_in_a_tag_is_stored_as_text_and_escaped(client, ana):
    run = new_run(ana)
    markup = '<img src=x onerror="window.__xss=1">'
    response = client.post(
        f"/runs/{run.pk}/edit/",
        {"title": markup, "visibility": "public", "tags": f"disk_model={markup}"},
    )
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.tags["disk_model"] == markup
    for url in (run.get_absolute_url(), "/runs/mine/", f"/runs/{run.pk}/edit/"):
        page = client.get(url).content.decode()
        assert "<img src=x" not in page, url
        assert "&lt;img src=x" in page, url


def test_a_changed_tag_is_no_longer_read_from_the_host_in_the_api_too(client, ana):
    run = new_run(ana)
    run.tag_sources = {"cache_mode": "host-config", "storage_backend": "host-config"}
    run.save()
    response = client.patch(
        f"/api/v1/runs/{run.pk}/",
        {"tags": {"cache_mode": "writeback", "storage_backend": "file"}},
        content_type="application/json",
    )
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.cache_mode == "writeback"
    assert run.tag_sources == {"storage_backend": "host-config"}


def test_delete_asks_first_then_deletes(client, ana):
    run = new_run(ana, title="to go")
    page = client.get(f"/runs/{run.pk}/delete/").content.decode()
    assert "cannot be undone" in page and 'id="confirm-delete"' in page
    assert Run.objects.filter(pk=run.pk).exists()  # asking deletes nothing
    response = client.post(f"/runs/{run.pk}/delete/")
    assert response.status_code == 302 and response.url == "/runs/mine/"
    assert not Run.objects.filter(pk=run.pk).exists()
    assert "Deleted to go." in client.get("/runs/mine/").content.decode()


def test_an_anonymous_run_is_claimed_by_its_key_or_by_the_session(client, ana):
    key = "bdo_" + "k" * 40
    run = new_run(None, key=key, visibility="private")
    page = client.get("/runs/mine/").content.decode()
    assert f'id="run-{run.pk}"' not in page
    response = client.post("/runs/claim/", {"run": str(run.pk), "key": "bdo_wrong"})
    assert response.status_code == 302
    assert "cannot be claimed" in client.get("/runs/mine/").content.decode()
    # The address the agent printed, as typed: claimed into the account.
    address = f"http://example.org/runs/{run.pk}/"
    client.post("/runs/claim/", {"run": address, "key": key})
    run.refresh_from_db()
    assert run.owner == ana and run.owner_key_hash == ""
    assert f'id="run-{run.pk}"' in client.get("/runs/mine/").content.decode()
    # Opened from /runs/N/?key=: offered on My runs, claimed with one button.
    other_key = "bdo_" + "m" * 40
    other = new_run(None, key=other_key, visibility="private")
    client.get(f"/runs/{other.pk}/?key={other_key}")
    page = client.get("/runs/mine/").content.decode()
    assert 'id="unclaimed"' in page and other.get_absolute_url() in page
    client.post("/runs/claim/", {"run": str(other.pk)})
    other.refresh_from_db()
    assert other.owner == ana
    assert client.post("/runs/claim/", {"run": "¹"}).status_code == 302


def test_an_anonymous_owner_manages_the_run_opened_with_its_key(client):
    key = "bdo_" + "q" * 40
    run = new_run(None, key=key, visibility="private")
    client.get(f"/runs/{run.pk}/?key={key}")
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="owner-bar"' in page and 'id="my-runs-link"' not in page
    response = client.post(f"/runs/{run.pk}/visibility/", {"visibility": "unlisted"})
    assert response.status_code == 302 and response.url == run.get_absolute_url()
    run.refresh_from_db()
    assert run.visibility == "unlisted"


def test_the_tokens_page_shows_a_new_token_in_the_commands(client):
    assert client.get("/tokens/").status_code == 302  # sign in first
    User.objects.create_user("ana", password="x")
    client.login(username="ana", password="x")
    page = client.get("/tokens/").content.decode()
    assert "No tokens yet." in page and "--token YOUR_TOKEN" in text(page)
    assert client.post("/tokens/", {"name": "pve-node-2"}).url == "/tokens/"
    page = client.get("/tokens/").content.decode()
    secret = re.search(r'id="new-token">[^<]*<code>(bdt_[^<]+)</code>', page).group(1)
    assert ApiToken.objects.get(name="pve-node-2").prefix == secret[:10]
    command = re.search(r'<pre class="cmd" id="agent-command">(.*?)</pre>', page, re.S)
    assert f"--token {secret}" in text(command.group(1))
    assert f"--token {secret}" in text(page[page.index('id="host-command"') :])
    assert 'data-copy="#agent-command"' in page and "js/copy.js" in page
    assert secret not in client.get("/tokens/").content.decode()  # shown once
    for name, message in (("", "Give the token a name"), ("a\x00b", "NUL")):
        response = client.post("/tokens/", {"name": name}, follow=True)
        assert response.status_code == 200 and message in response.content.decode()
    assert ApiToken.objects.count() == 1


def test_the_post_only_addresses_opened_lead_to_their_forms(client, ana):
    """No blank 405 page: each action's address, opened, shows its form."""
    run = new_run(ana)
    token, _secret = ApiToken.issue(ana, "pve")
    for url, form in (
        (f"/runs/{run.pk}/visibility/", f"/runs/{run.pk}/edit/"),
        ("/runs/claim/", "/runs/mine/"),
        (f"/tokens/{token.pk}/revoke/", "/tokens/"),
    ):
        response = client.get(url)
        assert response.status_code == 302 and response.url == form, url
        assert client.get(form).status_code == 200
    token.refresh_from_db()
    assert token.revoked is None


def test_my_runs_reads_a_bounded_number_of_queries(
    client, ana, django_assert_max_num_queries
):
    for i in range(6):
        new_run(ana, visibility=("public", "unlisted", "private")[i % 3])
    client.get("/runs/mine/")  # the session's and user's first reads
    with django_assert_max_num_queries(6):
        page = client.get("/runs/mine/").content.decode()
    assert page.count('class="my-run"') == 6


def test_a_token_created_on_submit_is_filled_into_its_commands(client, ana):
    response = client.post("/tokens/", {"name": "pve-node-3", "next": "submit"})
    assert response.status_code == 302 and response.url == "/submit/"
    page = client.get("/submit/").content.decode()
    secret = re.search(r'id="new-token">[^<]*<code>(bdt_[^<]+)</code>', page).group(1)
    for command in ("agent-command", "host-command"):
        block = re.search(rf'id="{command}">(.*?)</pre>', page, re.S).group(1)
        assert f"--token {secret}" in text(block), command
    assert "js/copy.js" in page
