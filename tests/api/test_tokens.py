"""API tokens: created by command or API, stored hashed, listed, revoked."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from benchdb.results.models import ApiToken, hash_secret

pytestmark = pytest.mark.django_db


def test_the_command_prints_a_token_that_authenticates(alice):
    out = StringIO()
    call_command("create_api_token", "alice", "--name", "laptop", stdout=out)
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop"
    assert token.key_hash == hash_secret(key)
    assert key not in token.key_hash and token.prefix == key[:10]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/v1/tokens/")
    assert response.status_code == 200
    assert [t["name"] for t in response.json()["results"]] == ["laptop"]
    token.refresh_from_db()
    assert token.last_used is not None


def test_the_command_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_api_token", "nobody", stdout=StringIO())
    assert ApiToken.objects.count() == 0


def test_a_signed_in_user_creates_lists_and_revokes_tokens(alice, bob):
    client = APIClient()
    client.force_login(alice)
    created = client.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert created.status_code == 201
    key = created.json()["key"]
    assert key.startswith("bdt_")
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["ci"]
    assert "key" not in listed[0]

    # Someone else cannot see or revoke it.
    other = APIClient()
    other.force_login(bob)
    assert other.get("/api/v1/tokens/").json()["results"] == []
    assert other.delete(f"/api/v1/tokens/{listed[0]['id']}/").status_code == 404

    assert client.delete(f"/api/v1/tokens/{listed[0]['id']}/").status_code == 204
    token_client = APIClient()
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert token_client.get("/api/v1/tokens/").status_code == 401
    assert ApiToken.objects.get().revoked is not None


def test_tokens_need_a_signed_in_user(api, db):
    assert api.get("/api/v1/tokens/").status_code == 401
    assert api.post("/api/v1/tokens/", {"name": "x"}, format="json").status_code == 401


@pytest.mark.parametrize("header", ["Token", "Token a b", "Token bdt_unknown"])
def test_it_refuses_malformed_and_unknown_tokens(api, db, header):
    api.credentials(HTTP_AUTHORIZATION=header)
    response = api.get("/api/v1/runs/")
    assert response.status_code == 401
    assert response.json()["errors"][0]["pointer"] is None
