"""Stored answers under pressure (results/answer_cache.py, results/refresh.py).

Real PostgreSQL, two connections: a recomputation holds an answer's lock in
one thread (the refresh's ``answer_cache.recompute``, held open until the
test lets it finish), a reader asks for the answer in another.

- The reader does not wait for the recomputation: it returns within a
  bound, with the answer stored before the removal.
- A hidden run is never named in what it gets: the answer that names runs
  (the cache-mode groups' page) is served with the removed run left out.
- An answer that only counts runs is served as it was, said to be updating
  (page and API), until the recomputation has stored the new one.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection, connections

from benchdb.results import answer_cache, answers, reads, refresh, summaries
from benchdb.results.models import ChangedRun, Run
from tests.results.test_answer_store import counted_guest, generate, same

# What a reader may take while another process recomputes its answer: a few
# queries (on a shared, loaded machine), never the recomputation (held open
# until the test ends it, up to a minute).
READER_BOUND_S = 2.0


@pytest.fixture(autouse=True)
def no_worker_refresh():
    """The refreshes here are the test's own: none is queued for a worker
    (the suite's worker would run it a few seconds after a write)."""
    with mock.patch.object(refresh.refresh_summaries, "apply_async"):
        yield


@contextmanager
def recomputing(answer, args):
    """The refresh recomputes ``answer(*args)`` in another thread (its own
    connection), holding the answer's lock until the block ends."""
    started, finish, errors = threading.Event(), threading.Event(), []

    def slow(*a):
        started.set()
        finish.wait(timeout=60)
        return answer.live(*a)

    def run():
        try:
            answer_cache.recompute(answer.key, slow, args)
        except Exception as exc:  # reported below
            errors.append(exc)
            started.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(timeout=30)
    try:
        yield
    finally:
        finish.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert not thread.is_alive()


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def page_ids(answer) -> set[int]:
    pages, _total = answer
    return {rid for by_mode in pages for rid in by_mode.values()}


@pytest.mark.django_db(transaction=True)
def test_a_reader_never_waits_for_a_recomputation_nor_sees_a_hidden_run(client):
    generate(systems=12)
    page = answers.cache_mode_group_page
    before, fresh = page.with_freshness(1)
    assert fresh.current and not fresh.updating
    # A run the stored page names, hidden (committed).
    hidden = sorted(page_ids(before))[0]
    Run.objects.get(pk=hidden).moderate("hide", "test")
    with recomputing(page, (1,)):
        (served, found), seconds = timed(page.with_freshness, 1)
        assert seconds < READER_BOUND_S
        assert hidden not in page_ids(served)
        assert found.updating and not found.current
        assert found.version == fresh.version and found.as_of == fresh.as_of
        # Everything else the stored page named is still there.
        assert served == summaries.cache_mode_pages_without(before, {hidden})
        # The report and its page name no hidden run either, and say so.
        report = reads.cache_mode_report(None)
        shown = {r.pk for g in report["groups"] for r in g["runs"]}
        assert shown and hidden not in shown
        response = client.get("/reports/cache-modes/")
        assert response.status_code == 200
        assert response.context["freshness"]["updating"] is True
        assert f"/runs/{hidden}/" not in response.content.decode()
    # Once recomputed: current, the live answer.
    after, found = page.with_freshness(1)
    assert found.current and not found.updating
    assert same(after, page.live(1))
    assert hidden not in page_ids(after)


@pytest.mark.django_db(transaction=True)
def test_an_answer_that_only_counts_is_served_as_it_was_and_says_updating(client):
    generate(systems=12)
    w = answers.workloads("overhead")[0]
    overhead = answers.overhead_answer
    before, fresh = overhead.with_freshness({}, w)
    body = client.get(f"/api/v1/aggregates/?test_id={w['test_id']}").json()
    assert body["freshness"]["updating"] is False
    guest = counted_guest(w["test_id"])
    Run.objects.get(pk=guest.pk).moderate("hide", "test")
    with recomputing(overhead, ({}, w)):
        (served, found), seconds = timed(overhead.with_freshness, {}, w)
        assert seconds < READER_BOUND_S
        assert same(served, before)
        assert found.updating and not found.current and found.as_of == fresh.as_of
    after, found = overhead.with_freshness({}, w)
    assert found.current and after["runs"] == before["runs"] - 1
    # The API says it too: the aggregates' answer while it is recomputed.
    (args,) = [
        a
        for (name, a) in _stored()
        if name == answers.aggregates.key and a[1] == w["test_id"]
    ]
    Run.objects.get(pk=guest.pk).moderate("unhide")
    other = Run.objects.listed().filter(role="guest").exclude(pk=guest.pk).first()
    Run.objects.get(pk=other.pk).moderate("hide", "test")
    with recomputing(answers.aggregates, tuple(args)):
        response, seconds = timed(
            client.get, f"/api/v1/aggregates/?test_id={w['test_id']}"
        )
        assert seconds < READER_BOUND_S
        assert response.json()["freshness"]["updating"] is True
        assert response.json()["freshness"]["current"] is False


def _stored() -> list[tuple[str, list]]:
    import json

    with connection.cursor() as cursor:
        cursor.execute("SELECT name, args FROM results_answersummary")
        return [(name, json.loads(text)) for name, text in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_an_answer_that_names_runs_is_not_served_after_an_unnamed_removal():
    """A removal that named no run (``announce(removal=True)`` alone): the
    page cannot leave it out, so it is not served from before; the reader
    waits at most ``WAIT_FOR_COMPUTE_S``, then computes it itself."""
    generate(systems=12)
    page = answers.cache_mode_group_page
    before, _ = page.with_freshness(1)
    hidden = sorted(page_ids(before))[0]
    from django.db import transaction

    with transaction.atomic():
        Run.objects.filter(pk=hidden).update(hidden=True, hidden_reason="test")
        refresh.announce(removal=True)
    with mock.patch.object(answer_cache, "WAIT_FOR_COMPUTE_S", 0.3):
        with recomputing(page, (1,)):
            (served, found), seconds = timed(page.with_freshness, 1)
    assert 0.3 <= seconds < 0.3 + 5
    assert hidden not in page_ids(served)
    assert found.current and not found.updating


def test_the_groups_page_leaves_removed_runs_out():
    pages = [{"none": 1, "writeback": 2}, {"none": 3, "unsafe": 4, "writeback": 5}]
    assert summaries.cache_mode_pages_without([pages, 40], {2, 4}) == [
        [{"none": 3, "writeback": 5}],
        39,
    ]
    assert summaries.cache_mode_pages_without([pages, 40], set()) == [pages, 40]


@pytest.mark.django_db(transaction=True)
def test_the_refresh_keeps_removals_while_an_answer_older_may_be_served():
    generate(systems=6)
    answers.cache_mode_group_page.with_freshness(1)
    run = Run.objects.listed().filter(role="guest").first()
    Run.objects.get(pk=run.pk).moderate("hide", "test")
    (removal,) = ChangedRun.objects.filter(removal=True)
    assert removal.run_id == run.pk
    old = removal.at - refresh.CHANGES_KEPT - timedelta(minutes=1)
    # Old enough, but answers stored before it are there when the refresh
    # starts (it recomputes them after).
    ChangedRun.objects.update(at=old)
    refresh.refresh()
    assert list(ChangedRun.objects.filter(removal=True)) == [removal]
    # Every answer is newer now, but the removal is recent: kept.
    ChangedRun.objects.update(at=removal.at)
    refresh.refresh()
    assert list(ChangedRun.objects.filter(removal=True)) == [removal]
    ChangedRun.objects.update(at=old)
    refresh.refresh()
    assert ChangedRun.objects.count() == 0
