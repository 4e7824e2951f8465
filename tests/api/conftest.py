"""Fixtures for the API tests: real fio outputs, users, tokens, a client."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from benchdb.results.models import ApiToken
from tests.api.factories import FioRuns


@pytest.fixture(scope="session")
def fio(tmp_path_factory):
    return FioRuns(tmp_path_factory.mktemp("fio"))


@pytest.fixture(autouse=True)
def _fresh_throttles():
    # Throttle counters live in the cache; each test starts with none.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def make_user(django_user_model):
    def make(username: str, **extra):
        # No password: hashing one would cost more than the test itself.
        return django_user_model.objects.create_user(username=username, **extra)

    return make


@pytest.fixture
def alice(make_user):
    return make_user("alice")


@pytest.fixture
def bob(make_user):
    return make_user("bob")


@pytest.fixture
def staff(make_user):
    return make_user("moderator", is_staff=True)


def token_client(user) -> APIClient:
    """A client that authenticates with a real token of ``user``."""
    _token, key = ApiToken.issue(user, "tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client
