"""The uploader of a private anonymous run opens its page in a browser from
the address the agent prints (``/runs/N/?key=OWNER_KEY``)."""

from __future__ import annotations

import pytest
from django.test import Client

from benchdb.api.permissions import bundle_owner_key
from benchdb.results.ingest import store_bundle
from benchdb.results.models import hash_secret
from benchdb_agent import upload
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_run(fio):
    bundle = make_bundle(fio)
    key = bundle_owner_key(bundle)
    run = store_bundle(bundle, owner_key_hash=hash_secret(key), visibility="private")
    return run, key


def test_the_printed_address_opens_a_private_anonymous_run(private_run):
    run, key = private_run
    printed = upload.run_page("http://testserver", {"run": run.pk}, key)
    url = printed.removeprefix("http://testserver")
    assert url == f"/runs/{run.pk}/?key={key}"
    browser = Client()
    assert browser.get(f"/runs/{run.pk}/").status_code == 404  # private
    answer = browser.get(url)
    # The key leaves the address bar at once.
    assert answer.status_code == 302 and answer["Location"] == f"/runs/{run.pk}/"
    page = browser.get(answer["Location"])
    assert page.status_code == 200 and run.title in page.content.decode()
    # Raw outputs open too; another browser still sees nothing.
    result = run.results.first()
    raw = browser.get(f"/runs/{run.pk}/raw/{result.pk}/0/")
    assert raw.status_code == 200
    assert Client().get(f"/runs/{run.pk}/").status_code == 404


def test_a_wrong_key_opens_nothing(private_run):
    run, key = private_run
    browser = Client()
    answer = browser.get(f"/runs/{run.pk}/?key={key}x")
    assert answer.status_code == 302
    assert browser.get(answer["Location"]).status_code == 404
