"""The worker's refresh of the stored across-runs answers (``answer_cache``).

The write functions (ingest's store and retag, moderation, claim, an
owner's edit and delete) ``announce`` what they changed: the data version
goes up (with a removal mark when a listed run may have left a population),
and once their transaction commits ``schedule()`` queues one
``refresh_summaries`` task a few seconds later (``SUMMARY_REFRESH_DELAY_S``);
uploads arriving meanwhile find it queued and add nothing, so a burst of
uploads costs one refresh.  It runs on
its own queue (``refresh``, settings.CELERY_TASK_ROUTES) in its own worker
process, one at a time (a PostgreSQL advisory lock, whatever the number of
refresh workers), so ingest never waits behind it.

Nothing lost keeps the answers stale: a queued mark older than the delay
plus ``LOST_AFTER_S`` while no refresh runs stands for a lost message, and
the next write queues again; beat's ``requeue_stale`` (every minute) calls
``recover``, which queues a refresh when stored answers are older than the
data and none is queued or running (a lost message, a refresh cut short by
a dead worker, a write made outside Django).  Beat also runs it every
``SUMMARY_REFRESH_INTERVAL_S`` as a backstop.

The refresh walks the catalogue (``results.answers``): it brings up to the
data every stored answer older than it (most recently asked for first) and
each answer's default arguments, and drops answers nobody asked for in
``answer_cache.KEEP_UNREQUESTED`` and those stored under an older version.
It is incremental: an answer that says what reaches it (``reached``,
``results.changes``) and that no run changed since it was stored reaches
(the change log ``results_changedrun``, written by ``announce``) is stamped
current as it is (``answer_cache.restamp``); the others are computed again,
each in its own snapshot with its compute function, under the answer's lock
(``answer_cache.recompute``: readers meanwhile are served the previous
answer).  ``full`` (what ``recover`` queues) computes every stale answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from benchdb.results import answer_cache, answers

log = logging.getLogger(__name__)


def _delay() -> float:
    return float(getattr(settings, "SUMMARY_REFRESH_DELAY_S", 5))


# A queued refresh not started this long after its delay lost its message,
# unless a refresh is running (one queued behind it waits, it is not lost).
LOST_AFTER_S = 60
# A change is logged at least this long, longer than any computation of a
# stored answer: one that started before it may be stored after it.
CHANGES_KEPT = timedelta(hours=1)
# pg_advisory_lock key held by the refresh that runs ("bdbr").
REFRESH_LOCK = 0x62646272
_RUNNING = (
    "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
    "AND classid = 0 AND objid = %(lock)s AND objsubid = 1 AND database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()))"
)


def running() -> bool:
    """True while a refresh holds its lock (in any process)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_RUNNING}", {"lock": REFRESH_LOCK})
        return cursor.fetchone()[0]


def schedule(full: bool = False) -> bool:
    """Queue one refresh unless one is queued already (coalescing); True if
    this call queued it.  Never raises: ``recover`` and beat's schedule are
    the backstop.  ``full``: a refresh that recomputes every stale answer,
    reached by the logged changes or not (``refresh``)."""
    params = {
        "lock": REFRESH_LOCK,
        "lost": timedelta(seconds=_delay() + LOST_AFTER_S),
    }
    # Queued, and not lost: its mark is recent or a refresh runs ahead of it.
    queued = (
        "{v}refresh_queued IS NOT NULL AND ({v}refresh_queued >= "
        f"clock_timestamp() - %(lost)s OR {_RUNNING})"
    )
    with connection.cursor() as cursor:
        # Most writes find one queued already: a plain read, no row lock.
        cursor.execute(
            "SELECT 1 FROM results_dataversion WHERE id = 1 AND " + queued.format(v=""),
            params,
        )
        if cursor.fetchone() is not None:
            return False
        cursor.execute(
            "INSERT INTO results_dataversion AS v (id, version, removed, "
            "refresh_queued) VALUES (1, 0, 0, clock_timestamp()) "
            "ON CONFLICT (id) DO UPDATE SET refresh_queued = EXCLUDED.refresh_queued "
            f"WHERE NOT ({queued.format(v='v.')}) RETURNING id",
            params,
        )
        if cursor.fetchone() is None:
            return False
    try:
        refresh_summaries.apply_async(
            kwargs={"scheduled": True, **({"full": True} if full else {})},
            countdown=_delay(),
            retry=True,
            retry_policy=settings.PUBLISH_RETRY_POLICY,
        )
    except Exception as exc:  # broker down: recover() and beat will refresh
        log.warning("could not queue the summary refresh: %s", exc)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE results_dataversion SET refresh_queued = NULL")
        return False
    return True


def recover() -> bool:
    """Queue a refresh if stored answers are older than the data and no
    refresh is queued or running; True if it queued one.  Run by beat's
    ``requeue_stale`` every minute: answers are never left stale by a lost
    message or a refresh that died."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM results_answersummary s, "
            "results_dataversion v WHERE v.id = 1 AND s.version < v.version "
            "AND s.name = ANY(%s))",
            [[answer.key for answer in answers.CATALOGUE.values()]],
        )
        if not cursor.fetchone()[0]:
            return False
    # In full: the stale answers may come from a write made outside the
    # write functions, which logged no change.
    queued = schedule(full=True)
    if queued:
        log.warning(
            "summary refresh queued again: stored answers were stale with no "
            "refresh queued or running (a lost message, a refresh that died, "
            "or a write outside benchdb's write functions)"
        )
    return queued


def announce(removal: bool, run: int | None = None, moved: bool = False) -> None:
    """What a write function (store, moderate, claim, retag, edit, delete)
    calls once it has written, inside its transaction: the data changed.

    Bumps the data version, so every stored answer is served as not current
    until the refresh, which this queues once the transaction commits.
    ``removal``: a listed run may have left a population (hidden, flagged,
    made private, retagged, edited, deleted), so no answer stored before is
    served at all: it is computed again on its next read.  The version row
    stays locked until the commit: write functions announce last.  (The
    database's backstop trigger, migration 0018, bumps the version once more
    at the commit: it is there for writes outside these functions.)
    ``run``: the id of the run it changed, logged with the new version
    (``results_changedrun``): the refresh recomputes only the answers it can
    reach (``results.changes``), and after a removal readers are served the
    previous answers without it while they are computed again
    (``answer_cache.fetch_or_compute``).  None for a change no answer reads
    (a claim: the owner); a removal that cannot name its run logs None, and
    then reaches every answer.  ``moved``: the write may have changed the
    run's facets (an edit, a retag), so which answers it was in cannot be
    told from what it is now: an unnamed change is logged beside it, and
    the refresh computes every stale answer again.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO results_dataversion AS v (id, version, removed, changed) "
            "VALUES (1, 1, %(removed)s, clock_timestamp()) ON CONFLICT (id) DO "
            "UPDATE SET version = v.version + 1, changed = EXCLUDED.changed, "
            "removed = CASE WHEN %(removal)s THEN v.version + 1 ELSE v.removed END "
            "RETURNING version",
            {"removal": removal, "removed": 1 if removal else 0},
        )
        version = cursor.fetchone()[0]
        # What it changed is logged here: the backstop trigger (migration
        # 0022) logs an unnamed change only for transactions not marked so.
        cursor.execute(
            "SELECT set_config('benchdb.announced', txid_current()::text, true)"
        )
        logged = [(run, removal)] if removal or run is not None else []
        if moved:
            logged.append((None, False))
        for run_id, removed in logged:
            cursor.execute(
                "INSERT INTO results_changedrun (version, run_id, removal, at) "
                "VALUES (%s, %s, %s, clock_timestamp())",
                [version, run_id, removed],
            )
    schedule_on_commit()


def schedule_on_commit() -> None:
    """``schedule`` once the transaction commits (once per transaction)."""
    pending = getattr(connection, "run_on_commit", None) or []
    if any(_schedule_quietly in entry for entry in pending):
        return
    transaction.on_commit(_schedule_quietly)


def _schedule_quietly() -> None:
    try:
        schedule()
    except Exception as exc:  # a refresh must never fail the write
        log.warning("could not queue the summary refresh: %s", exc)


def default_answers() -> Iterator[tuple]:
    """(answer, args) the pages show without a choice (each answer's
    ``defaults`` in the catalogue): computed by every refresh, so the first
    reader after an upload finds them.  In catalogue order and one answer at
    a time: the reports' defaults are read from the workloads, which the
    refresh has made current by then."""
    for answer in answers.CATALOGUE.values():
        for args in answer.defaults():
            yield answer, args


def refresh(limit: int | None = None, full: bool = False) -> dict:
    """Bring stale stored answers and the defaults up to the data; returns
    figures, with what it recomputed (``recomputed``: [(name, args)]) and
    how many it stamped current without computing (``restamped``).

    Incremental: an answer that declares what reaches it (``reached`` in
    the catalogue, ``results.changes``) and that none of the runs changed
    since it was stored can reach is stamped current as it is
    (``answer_cache.restamp``); only the others are computed again.
    ``full``: every stale answer is computed again (what ``recover`` queues:
    a write outside the write functions logs no change)."""
    limit = limit or int(getattr(settings, "SUMMARY_REFRESH_MAX", 500))
    with _one_at_a_time():
        return _refresh(limit, full)


@contextmanager
def _one_at_a_time():
    """Hold the refresh lock: a second refresh waits for the first to end
    (then covers what was written meanwhile) instead of running beside it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [REFRESH_LOCK])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [REFRESH_LOCK])


def _bring_up(answer, name: str, args: tuple, full: bool, out: dict) -> None:
    """Stamp ``answer(*args)`` current if no change reached it, else compute
    it again (noted in ``out``)."""
    if not full and answer.reached is not None:
        stamped = answer_cache.restamp(
            name, args, lambda runs: answer.reached(runs, *args)
        )
        if stamped:
            out["restamped"] += 1
            return
    if answer_cache.recompute(name, answer.live, args):
        out["recomputed"].append((name, answer_cache.encode(list(args))))


def _refresh(limit: int, full: bool) -> dict:
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE results_dataversion SET refresh_queued = NULL")
        # Unasked for a while, or stored by an older version of its answer
        # (never read again: the version is part of the key).
        cursor.execute(
            "DELETE FROM results_answersummary WHERE requested < %s "
            "OR NOT (name = ANY(%s))",
            [
                timezone.now() - answer_cache.KEEP_UNREQUESTED,
                [answer.key for answer in answers.CATALOGUE.values()],
            ],
        )
        dropped = cursor.rowcount
        # Posteriors kept by their inputs (across.bayes_signed_ranks): one
        # unused this long is computed again if ever asked for.
        cursor.execute(
            "DELETE FROM results_posterior WHERE used < %s",
            [timezone.now() - answer_cache.KEEP_UNREQUESTED],
        )
        # Changes no stored answer is older than (readers leave removals out
        # of the answers stored before them, the refresh reads what changed
        # since), once older than any computation (one stored meanwhile may
        # have started before them).
        cursor.execute(
            "DELETE FROM results_changedrun WHERE at < clock_timestamp() - %s "
            "AND version <= (SELECT coalesce(min(s.version), v.version) "
            "FROM results_dataversion v LEFT JOIN results_answersummary s "
            "ON TRUE WHERE v.id = 1 GROUP BY v.version)",
            [CHANGES_KEPT],
        )
    out = {"recomputed": [], "restamped": 0}
    for answer, args in default_answers():
        if not _current(answer.key, args):
            _bring_up(answer, answer.key, args, full, out)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.name, s.args FROM results_answersummary s, "
            "results_dataversion v WHERE v.id = 1 AND s.version < v.version "
            "ORDER BY s.requested DESC LIMIT %s",
            [limit],
        )
        stale = cursor.fetchall()
    skipped = 0
    for name, text in stale:
        answer = answers.by_key(name)
        if answer is None:
            skipped += 1
            continue
        try:
            _bring_up(answer, name, tuple(json.loads(text)), full, out)
        except ValueError as exc:  # filters no longer valid, etc.
            log.info("stored answer %s %s dropped: %s", name, text, exc)
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM results_answersummary WHERE name = %s AND args = %s",
                    [name, text],
                )
            continue
    seconds = time.perf_counter() - start
    done = len(out["recomputed"])
    log.info(
        "summary refresh: %d answers computed, %d stamped current as they were, "
        "in %.2f s (%d dropped)",
        done,
        out["restamped"],
        seconds,
        dropped,
    )
    return {
        "answers": done,
        **out,
        "seconds": seconds,
        "dropped": dropped,
        "skipped": skipped,
    }


def _current(name: str, args: tuple) -> bool:
    found = answer_cache.fetch(name, args)
    return found is not None and found[1].current


def _queued_mark_present() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM results_dataversion "
            "WHERE id = 1 AND refresh_queued IS NOT NULL"
        )
        return cursor.fetchone() is not None


@shared_task
def refresh_summaries(scheduled: bool = False, full: bool = False) -> dict | None:
    """The worker's refresh (queued by ``schedule``, and by beat).

    A refresh ``schedule`` queued runs only while its queued mark stands:
    once another refresh has started (and cleared the mark), the writes it
    was queued for are covered or have queued a refresh of their own, so a
    late or redelivered message does nothing (nor does one that outlived
    its database's tables, as between two tests).  Beat's always runs.
    """
    if scheduled and not _queued_mark_present():
        log.info("summary refresh skipped: another refresh has covered it")
        return None
    return refresh(full=full)
