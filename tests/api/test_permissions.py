"""Who may read, list, edit, delete, claim and moderate which run."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run, hash_secret, new_secret
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

VISIBILITIES = ("public", "unlisted", "private")


@pytest.fixture
def runs(fio, alice):
    """One run of alice's per visibility."""
    return {
        v: store_bundle(make_bundle(fio), owner=alice, visibility=v)
        for v in VISIBILITIES
    }


@pytest.fixture
def clients(alice, bob, staff):
    return {
        "anonymous": APIClient(),
        "owner": token_client(alice),
        "other": token_client(bob),
        "staff": token_client(staff),
    }


# who -> visibilities whose detail they may read
READ = {
    "anonymous": {"public", "unlisted"},
    "owner": {"public", "unlisted", "private"},
    "other": {"public", "unlisted"},
    "staff": {"public", "unlisted", "private"},
}


@pytest.mark.parametrize("who", list(READ))
@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_it_lets_only_the_right_people_read_a_run(runs, clients, who, visibility):
    response = clients[who].get(f"/api/v1/runs/{runs[visibility].pk}/")
    expected = 200 if visibility in READ[who] else 404
    assert response.status_code == expected
    if expected == 200:
        assert response.json()["visibility"] == visibility


@pytest.mark.parametrize("who", list(READ))
def test_it_lists_only_public_runs_to_everyone(runs, clients, who):
    ids = {r["id"] for r in clients[who].get("/api/v1/runs/").json()["results"]}
    assert ids == {runs["public"].pk}


def test_it_lists_all_of_your_own_runs_with_mine(runs, clients):
    response = clients["owner"].get("/api/v1/runs/?mine=true")
    assert {r["id"] for r in response.json()["results"]} == {
        r.pk for r in runs.values()
    }
    assert clients["anonymous"].get("/api/v1/runs/?mine=true").status_code == 401


@pytest.mark.parametrize("who", list(READ))
@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_it_lets_only_the_owner_edit_a_run(runs, clients, who, visibility):
    run = runs[visibility]
    response = clients[who].patch(
        f"/api/v1/runs/{run.pk}/",
        {"title": "renamed", "tags": {"cache_mode": "writeback"}},
        format="json",
    )
    run.refresh_from_db()
    if who == "owner":
        assert response.status_code == 200, response.content
        assert run.title == "renamed"
        assert run.cache_mode == "writeback"  # tags become columns
        assert response.json()["tags"] == {"cache_mode": "writeback"}
    else:
        # Unreadable runs stay invisible (404); readable ones are refused
        # (401 to a client that did not authenticate at all, else 403).
        refused = 401 if who == "anonymous" else 403
        assert response.status_code == (refused if visibility in READ[who] else 404)
        assert run.title == ""
        assert run.cache_mode != "writeback"


@pytest.mark.parametrize("who", list(READ))
@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_it_lets_only_the_owner_delete_a_run(runs, clients, who, visibility):
    run = runs[visibility]
    response = clients[who].delete(f"/api/v1/runs/{run.pk}/")
    exists = Run.objects.filter(pk=run.pk).exists()
    if who == "owner":
        assert response.status_code == 204
        assert not exists
    else:
        refused = 401 if who == "anonymous" else 403
        assert response.status_code == (refused if visibility in READ[who] else 404)
        assert exists


def test_it_refuses_tags_outside_the_vocabulary_on_edit(runs, clients):
    run = runs["public"]
    response = clients["owner"].patch(
        f"/api/v1/runs/{run.pk}/", {"tags": {"cache_mode": "turbo"}}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/tags/cache_mode"


@pytest.fixture
def anonymous_run(fio):
    key = new_secret("bdo")
    run = store_bundle(
        make_bundle(fio), owner_key_hash=hash_secret(key), visibility="private"
    )
    return run, key


def test_it_lets_the_owner_key_read_edit_and_unlist_an_anonymous_run(
    anonymous_run, api
):
    run, key = anonymous_run
    url = f"/api/v1/runs/{run.pk}/"
    assert api.get(url).status_code == 404
    assert api.get(url, HTTP_X_OWNER_KEY="bdo_wrong").status_code == 404
    assert api.get(url, HTTP_X_OWNER_KEY=key).status_code == 200
    response = api.patch(
        url, {"visibility": "unlisted"}, format="json", HTTP_X_OWNER_KEY=key
    )
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.visibility == "unlisted"
    assert api.patch(url, {"title": "x"}, format="json").status_code == 401


def test_it_lets_the_owner_key_delete_an_anonymous_run(anonymous_run, api):
    run, key = anonymous_run
    assert (
        api.delete(f"/api/v1/runs/{run.pk}/", HTTP_X_OWNER_KEY=key).status_code == 204
    )
    assert not Run.objects.filter(pk=run.pk).exists()


def test_it_claims_an_anonymous_run_into_an_account(anonymous_run, alice, bob):
    run, key = anonymous_run
    url = f"/api/v1/runs/{run.pk}/claim/"
    assert APIClient().post(url, HTTP_X_OWNER_KEY=key).status_code == 401
    assert token_client(bob).post(url, HTTP_X_OWNER_KEY="bdo_nope").status_code == 404
    response = token_client(alice).post(url, HTTP_X_OWNER_KEY=key)
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.owner == alice
    # The key has done its job and stops working.
    assert not run.check_owner_key(key)
    again = token_client(bob).post(url, HTTP_X_OWNER_KEY=key)
    assert again.status_code == 404


@pytest.mark.parametrize("who", ["anonymous", "owner", "other"])
def test_it_lets_only_staff_moderate(runs, clients, who):
    run = runs["public"]
    response = clients[who].post(
        f"/api/v1/runs/{run.pk}/moderate/",
        {"action": "hide", "reason": "spam"},
        format="json",
    )
    assert response.status_code in (401, 403)
    run.refresh_from_db()
    assert not run.hidden


def test_it_hides_a_run_from_lists_and_aggregates_but_says_why(runs, clients):
    run = runs["public"]
    test_id = "fio-rand-read-4k-q1t1"
    agg_url = f"/api/v1/aggregates/?test_id={test_id}&metric=iops"
    assert clients["anonymous"].get(agg_url).json()["overall"]["count"] == 1

    response = clients["staff"].post(
        f"/api/v1/runs/{run.pk}/moderate/",
        {"action": "hide", "reason": "numbers from a RAM disk"},
        format="json",
    )
    assert response.status_code == 200
    assert clients["anonymous"].get("/api/v1/runs/").json()["results"] == []
    assert clients["anonymous"].get(agg_url).json()["overall"]["count"] == 0
    # Anyone but its owner and staff: 410 with the reason, as on its page.
    gone = clients["anonymous"].get(f"/api/v1/runs/{run.pk}/")
    assert gone.status_code == 410
    assert gone.json()["hidden_reason"] == "numbers from a RAM disk"
    for who in ("owner", "staff"):
        detail = clients[who].get(f"/api/v1/runs/{run.pk}/").json()
        assert detail["hidden"] is True
        assert detail["hidden_reason"] == "numbers from a RAM disk"


def test_it_needs_a_reason_to_hide_or_flag(runs, clients):
    response = clients["staff"].post(
        f"/api/v1/runs/{runs['public'].pk}/moderate/", {"action": "flag"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/reason"


def test_it_flags_a_run_suspect_with_the_reason(runs, clients):
    run = runs["public"]
    clients["staff"].post(
        f"/api/v1/runs/{run.pk}/moderate/",
        {"action": "flag", "reason": "cached read"},
        format="json",
    )
    run.refresh_from_db()
    assert run.suspect
    assert run.suspect_reasons[-1] == "flagged by staff: cached read"
