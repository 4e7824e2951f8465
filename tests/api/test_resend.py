"""No finished run is lost to a lost answer or a delete: a resend of an
anonymous upload gets its owner key again, and a deleted run's bundle can
be uploaded again (a real worker ingests each)."""

from __future__ import annotations

import copy

import pytest
from rest_framework.test import APIClient

from benchdb.results.models import Run, Submission
from tests.api.conftest import token_client
from tests.api.factories import make_bundle
from tests.api.test_submissions import wait_status

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_resend_after_a_lost_answer_gets_the_owner_key_again(
    celery_worker_process, fio
):
    bundle = make_bundle(fio)
    first = APIClient().post("/api/v1/submissions/", bundle, format="json")
    assert first.status_code == 202  # ... and the answer is lost on the way
    key = first.json()["owner_key"]

    # The same bundle, its keys in another order, from another connection.
    resent = dict(reversed(list(copy.deepcopy(bundle).items())))
    again = APIClient().post("/api/v1/submissions/", resent, format="json")
    assert again.status_code == 200
    assert again.json()["owner_key"] == key
    status = wait_status(APIClient(), again.json()["status_url"])
    run = Run.objects.get(pk=status["run"])
    assert run.check_owner_key(key)
    # The key opens the run for its holder: it can delete it.
    owner = APIClient()
    owner.credentials(HTTP_X_OWNER_KEY=key)
    assert owner.get(f"/api/v1/runs/{run.pk}/").status_code == 200


def test_a_different_bundle_under_the_same_id_gets_no_key(celery_worker_process, fio):
    bundle = make_bundle(fio)
    first = APIClient().post("/api/v1/submissions/", bundle, format="json")
    assert first.json()["owner_key"]
    # Ingested before the test ends (its tables are flushed then).
    wait_status(APIClient(), first.json()["status_url"])
    forged = copy.deepcopy(bundle)
    forged["tags"] = {**forged.get("tags", {}), "cache_mode": "unsafe"}
    again = APIClient().post("/api/v1/submissions/", forged, format="json")
    assert again.status_code == 200
    assert "owner_key" not in again.json()


def test_a_deleted_runs_bundle_can_be_uploaded_again(celery_worker_process, fio, alice):
    client = token_client(alice)
    bundle = make_bundle(fio)
    first = client.post("/api/v1/submissions/", bundle, format="json")
    run_id = wait_status(client, first.json()["status_url"])["run"]
    assert client.delete(f"/api/v1/runs/{run_id}/").status_code == 204
    assert not Run.objects.filter(pk=run_id).exists()

    again = client.post("/api/v1/submissions/", bundle, format="json")
    assert again.status_code == 202, again.content
    done = wait_status(client, again.json()["status_url"])
    assert done["status"] == "done" and done["run"] not in (None, run_id)
    assert Run.objects.get(pk=done["run"]).owner == alice
    assert Submission.objects.filter(bundle_id=bundle["bundle_id"]).count() == 1
