"""An upload through the real worker reaches the stored across-runs answers:
the ingest task queues one refresh (results/refresh.py), the worker runs it
a few seconds later, and the API's answer says it is current again."""

from __future__ import annotations

import pytest

from tests.api.conftest import token_client
from tests.api.factories import make_bundle
from tests.api.test_submissions import wait_status
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TEST = "fio-rand-read-4k-q1t1"
URL = f"/api/v1/population/?test_id={TEST}&metric=iops"


def test_an_upload_is_added_to_stored_answers_by_the_workers_refresh(
    celery_worker_process, fio, alice
):
    client = token_client(alice)
    first = client.post(
        "/api/v1/submissions/", make_bundle(fio, tests=(TEST,)), format="json"
    )
    assert wait_status(client, first.json()["status_url"])["status"] == "done"
    before = client.get(URL).json()
    assert before["results"]["runs"] == 1
    assert before["freshness"]["current"] is True

    second = client.post(
        "/api/v1/submissions/", make_bundle(fio, tests=(TEST,)), format="json"
    )
    assert wait_status(client, second.json()["status_url"])["status"] == "done"

    def refreshed():
        body = client.get(URL).json()
        if body["freshness"]["current"]:
            return body
        # Meanwhile: the stored answer, saying it is older than the data.
        assert body["results"]["runs"] == 1
        assert body["freshness"]["as_of"] == before["freshness"]["as_of"]
        return None

    after = wait_for(refreshed, timeout=60, interval=0.5, what="the refresh")
    assert after["results"]["runs"] == 2
    assert after["freshness"]["runs"] == before["freshness"]["runs"] + 1
