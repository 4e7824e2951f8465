"""A message lost for any reason is recovered: a refresh whose message never
arrived (or whose worker died) is queued again within a minute or two, not
ten; a refresh queued behind a running one is not mistaken for lost; two
refreshes never run at once; a submission left ``queued`` by a broker that
lost its queue is sent again within minutes, not an hour."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from unittest import mock

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from benchdb import embedded
from benchdb.results import answers, refresh, tasks
from benchdb.results.models import Submission

pytestmark = pytest.mark.django_db(transaction=True)


def set_mark(seconds_ago: float | None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO results_dataversion (id, version, removed, refresh_queued) "
            "VALUES (1, 0, 0, NULL) ON CONFLICT (id) DO NOTHING"
        )
        cursor.execute(
            "UPDATE results_dataversion SET refresh_queued = "
            "CASE WHEN %s::float IS NULL THEN NULL "
            "ELSE clock_timestamp() - make_interval(secs => %s::float) END",
            [seconds_ago, seconds_ago],
        )


def lost_after() -> float:
    return refresh._delay() + refresh.LOST_AFTER_S


class RefreshLock:
    """The refresh lock held by another session, as by a running refresh."""

    def __enter__(self):
        self.conn = psycopg.connect(
            embedded.database_url(connection.settings_dict), autocommit=True
        )
        self.conn.execute("SELECT pg_advisory_lock(%s)", [refresh.REFRESH_LOCK])
        return self

    def __exit__(self, *exc):
        self.conn.execute("SELECT pg_advisory_unlock(%s)", [refresh.REFRESH_LOCK])
        self.conn.close()


def test_a_lost_refresh_message_is_queued_again_after_a_minute_not_ten():
    with mock.patch.object(refresh.refresh_summaries, "apply_async") as send:
        assert refresh.schedule() is True
        # Its message was lost: the next write, within the delay plus a
        # minute, still finds it queued...
        set_mark(lost_after() - 5)
        assert refresh.schedule() is False
        # ...and past that, queues it again (it waited ten minutes).
        set_mark(lost_after() + 1)
        assert refresh.schedule() is True
        assert send.call_count == 2


def test_a_refresh_queued_behind_a_running_one_is_not_lost():
    with mock.patch.object(refresh.refresh_summaries, "apply_async") as send:
        set_mark(lost_after() + 30)
        with RefreshLock():
            assert refresh.running()
            assert refresh.schedule() is False
        assert not refresh.running()
        assert refresh.schedule() is True
        assert send.call_count == 1


def stale_answer() -> None:
    """A stored answer older than the data, as after a write whose refresh
    was lost."""
    name = next(iter(answers.CATALOGUE.values())).key
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE results_dataversion SET version = version + 10 WHERE id = 1"
        )
        cursor.execute(
            "INSERT INTO results_answersummary (name, digest, args, answer, "
            "version, computed, runs, seconds, requested) VALUES "
            "(%s, 'x', '[]', '{}', 0, now(), 0, 0, now())",
            [name],
        )


def test_recover_queues_a_refresh_for_stale_answers_when_none_is_queued():
    set_mark(None)
    with mock.patch.object(refresh.refresh_summaries, "apply_async") as send:
        assert refresh.recover() is False  # nothing stale: nothing to do
        stale_answer()
        assert refresh.recover() is True
        assert refresh.recover() is False  # queued now
        # A refresh that started (clearing the mark) and died: beat's
        # requeue_stale queues it again.
        set_mark(None)
        tasks.requeue_stale()
        assert send.call_count == 2
        # In full: stale answers with no refresh queued may come from a write
        # outside the write functions, which logged no change.
        assert send.call_args.kwargs["kwargs"] == {"scheduled": True, "full": True}


def test_two_refreshes_never_run_at_once():
    done = threading.Event()

    def second():
        try:
            refresh.refresh()
        finally:
            connection.close()
            done.set()

    with RefreshLock():
        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        assert not done.wait(2), "a refresh ran beside the running one"
    assert done.wait(120), "the waiting refresh never ran"
    thread.join(10)


def test_a_submission_whose_message_the_broker_lost_is_sent_again_in_minutes():
    # (Never ingested here: the send is what is tested.)
    bundle_id = uuid.uuid4()
    sub = Submission.objects.create(bundle_id=bundle_id, bundle={"id": str(bundle_id)})
    # Sent six minutes ago to a broker restarted since without its queue.
    Submission.objects.filter(pk=sub.pk).update(
        enqueued=timezone.now() - timedelta(minutes=6)
    )
    with mock.patch.object(tasks.ingest, "apply_async") as send:
        assert tasks.requeue_stale() == 1
    assert send.call_args.kwargs["args"] == [sub.pk]
    sub.refresh_from_db()
    assert timezone.now() - sub.enqueued < timedelta(seconds=30)
    # One sent a minute ago is still in the queue: left alone.
    with mock.patch.object(tasks.ingest, "apply_async") as send:
        assert tasks.requeue_stale() == 0
