"""Submissions go through a real worker: 202, status URL, run, idempotency."""

from __future__ import annotations

import math
import statistics
import threading

import pytest
from django.db import connection

from benchdb.results.models import Measurement, RawOutput, Result, Run, Submission
from tests.api.conftest import token_client
from tests.api.factories import make_bundle, repeat_values
from tests.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def wait_status(client, url: str, timeout: float = 30.0) -> dict:
    def finished():
        body = client.get(url).json()
        return body if body["status"] in ("done", "failed") else None

    return wait_for(finished, timeout=timeout, what=f"{url} to finish")


def test_it_turns_a_bundle_posted_with_a_token_into_a_run(
    celery_worker_process, fio, alice
):
    client = token_client(alice)
    bundle = make_bundle(fio, tests=("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1"))

    response = client.post("/api/v1/submissions/", bundle, format="json")

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["id"] == bundle["bundle_id"]
    # Its state as the answer is written: an idle worker may have taken it
    # between the enqueue and the answer (seen: 'processing').
    assert body["status"] in ("queued", "processing", "done")
    assert body["queued_at"] is not None  # the message reached the broker
    assert body["owner_key"] is None  # a signed-in submitter owns it already
    assert response["Location"] == body["status_url"]
    status = wait_status(client, body["status_url"], timeout=30)
    assert status["status"] == "done", status
    run = Run.objects.get(pk=status["run"])
    assert run.owner == alice
    assert str(run.uuid) == bundle["bundle_id"]
    assert Result.objects.filter(run=run).count() == 2
    assert Measurement.objects.filter(result__run=run).count() == 6
    assert RawOutput.objects.filter(result__run=run).count() == 6

    detail = client.get(status["run_url"]).json()
    test = next(t for t in detail["tests"] if t["test_id"] == "fio-rand-read-4k-q1t1")
    expected = repeat_values(bundle, "fio-rand-read-4k-q1t1", "read", "iops")
    assert test["main_direction"] == "read"
    # The run's figure, as its page shows it: the geometric mean of the repeats.
    assert test["iops_mean"] == pytest.approx(
        statistics.geometric_mean(expected), rel=1e-12
    )
    stat = test["stats"]["read"]["iops"]
    assert stat["n"] == 3
    # Floating point gets a standard deviation within a few ulps of the
    # values, not of the deviation: three equal repeats (a quick fio run can
    # give them) come out as about one ulp, where statistics.stdev's exact
    # fractions give 0 and rel=1e-9 alone would allow nothing.
    assert stat["stdev"] == pytest.approx(
        statistics.stdev(expected), rel=1e-9, abs=4 * math.ulp(max(expected))
    )
    assert [r["repeat"] for r in test["repeats"]] == [0, 1, 2]
    assert test["repeats"][1]["records"][0]["iops"] == pytest.approx(expected[1])


def test_it_answers_a_resent_bundle_with_the_existing_submission(
    celery_worker_process, fio, alice
):
    client = token_client(alice)
    bundle = make_bundle(fio)
    first = client.post("/api/v1/submissions/", bundle, format="json")
    assert first.status_code == 202
    done = wait_status(client, first.json()["status_url"])

    again = client.post("/api/v1/submissions/", bundle, format="json")

    assert again.status_code == 200
    assert again.json()["id"] == bundle["bundle_id"]
    assert again.json()["run"] == done["run"]
    assert "owner_key" not in again.json()
    assert Submission.objects.filter(bundle_id=bundle["bundle_id"]).count() == 1
    assert Run.objects.filter(uuid=bundle["bundle_id"]).count() == 1


def test_it_makes_one_run_of_the_same_bundle_sent_twice_at_once(
    celery_worker_process, fio, alice
):
    bundle = make_bundle(fio)
    barrier = threading.Barrier(2)
    answers = []
    clients = [token_client(alice), token_client(alice)]

    def send(client):
        barrier.wait()
        answers.append(client.post("/api/v1/submissions/", bundle, format="json"))
        connection.close()

    threads = [threading.Thread(target=send, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert sorted(a.status_code for a in answers) == [200, 202]
    assert {a.json()["id"] for a in answers} == {bundle["bundle_id"]}
    wait_for(
        lambda: Submission.objects.filter(
            bundle_id=bundle["bundle_id"], status="done"
        ).exists(),
        timeout=30,
        what="the submission to be ingested",
    )
    assert Submission.objects.filter(bundle_id=bundle["bundle_id"]).count() == 1
    assert Run.objects.filter(uuid=bundle["bundle_id"]).count() == 1


def test_it_gives_an_anonymous_submitter_an_owner_key_once(
    celery_worker_process, fio, api
):
    bundle = make_bundle(fio)
    response = api.post("/api/v1/submissions/", bundle, format="json")
    assert response.status_code == 202
    key = response.json()["owner_key"]
    assert key and key.startswith("bdo_")
    status = wait_status(api, response.json()["status_url"])
    run = Run.objects.get(pk=status["run"])
    assert run.owner is None
    assert run.check_owner_key(key)
    assert key not in run.owner_key_hash  # only the hash is stored
    # The key is never shown again.
    again = api.get(response.json()["status_url"]).json()
    assert "owner_key" not in again


def test_it_reports_a_failure_with_pointers_on_the_status_url(
    celery_worker_process, fio, alice, settings
):
    """A bundle whose raw output the worker cannot parse fails cleanly.

    The API parses raws too, so the broken raw is written straight into the
    stored submission, as a bundle from an older server might be.
    """
    from benchdb.results.tasks import ingest

    bundle = make_bundle(fio)
    bundle["tests"][0]["repeats"][1]["raw"] = {
        "format": "fio-json",
        "encoding": "plain",
        "data": "this is not fio output",
    }
    sub = Submission.objects.create(bundle_id=bundle["bundle_id"], bundle=bundle)
    runs_before = Run.objects.count()
    ingest.delay(sub.pk)

    client = token_client(alice)
    status = wait_status(client, f"/api/v1/submissions/{sub.bundle_id}/")
    assert status["status"] == "failed"
    assert status["errors"][0]["pointer"] == "/tests/0/repeats/1/raw"
    assert Run.objects.count() == runs_before
    # A bad bundle is not a transient error: no second attempt.
    assert Submission.objects.get(pk=sub.pk).attempts == 1


def test_it_answers_404_for_an_unknown_submission(api, db):
    assert api.get("/api/v1/submissions/not-a-uuid/").status_code == 404
    unknown = "/api/v1/submissions/00000000-0000-4000-8000-000000000000/"
    response = api.get(unknown)
    assert response.status_code == 404
    assert response.json()["errors"][0]["pointer"] is None


def test_it_stores_one_run_when_the_task_is_delivered_twice(
    celery_worker_process, fio, api
):
    """Late acknowledgement means a message may come twice; the row lock and
    the status make the second delivery a no-op."""
    from benchdb.results.tasks import ingest

    bundle = make_bundle(fio)
    sub = Submission.objects.create(bundle_id=bundle["bundle_id"], bundle=bundle)
    messages = [ingest.delay(sub.pk).id, ingest.delay(sub.pk).id]
    status = wait_status(api, f"/api/v1/submissions/{sub.bundle_id}/")
    assert status["status"] == "done"
    # Let the second message be consumed too before counting.
    wait_for(
        lambda: all(
            f"[{m}] succeeded" in celery_worker_process.log_path.read_text()
            for m in messages
        ),
        timeout=30,
        what="both deliveries to be processed",
    )
    assert Run.objects.filter(uuid=bundle["bundle_id"]).count() == 1
    sub.refresh_from_db()
    assert sub.attempts == 1


def test_only_the_processing_mark_skips_its_wal_flush(fio, monkeypatch):
    """The mark's commit is asynchronous (SET LOCAL in its own transaction);
    the transaction that stores the run, and the connection after the task,
    keep synchronous commits: an accepted run is on disk before its ack."""
    from django.test.utils import CaptureQueriesContext

    from benchdb.results import tasks

    def setting() -> str:
        with connection.cursor() as cur:
            cur.execute("SHOW synchronous_commit")
            return cur.fetchone()[0]

    before = setting()
    assert before != "off"
    seen = []
    store = tasks.store_bundle

    def spy(*args, **kwargs):
        seen.append(setting())
        return store(*args, **kwargs)

    monkeypatch.setattr(tasks, "store_bundle", spy)
    bundle = make_bundle(fio, tests=("fio-rand-read-4k-q1t1",))
    sub = Submission.objects.create(bundle_id=bundle["bundle_id"], bundle=bundle)
    with CaptureQueriesContext(connection) as queries:
        tasks.ingest.run(sub.pk)
    sub.refresh_from_db()
    assert sub.status == "done", sub.errors
    sql = [q["sql"] for q in queries]
    assert sql.count("SET LOCAL synchronous_commit = off") == 1
    first_update = next(i for i, s in enumerate(sql) if s.startswith("UPDATE"))
    assert sql.index("SET LOCAL synchronous_commit = off") < first_update
    assert seen == [before]  # the run's transaction: flushed at commit
    assert setting() == before
