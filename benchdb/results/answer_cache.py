"""Across-runs answers stored in PostgreSQL, served by the data version.

The reports' answers, the overhead summary, aggregates, similar-system
populations and ``/api/v1/population/`` aggregate over every listed run of
a test, or every guest/host pair: their cost grows with the table however
little they show.  Each is declared once in the catalogue
(``results.answers``) with its compute function and version; what it
returns is kept in ``results_answersummary`` (one row per answer, version
and arguments: the answer as JSON, the data version and time of the
snapshot it was computed in, and how many runs were listed then).

- **One definition.**  A stored answer is its compute function's own
  return value, computed in one REPEATABLE READ snapshot; nothing else
  writes the table.
- **One cheap read.**  A request reads the version row and the stored answer
  in one primary-key query (``fetch``).
- **Fresh, and honest about it.**  ``results_dataversion`` is bumped by
  the write functions (``refresh.announce``; a plain trigger, migration
  0018, for writes outside them): ``version`` for any change, ``removed``
  when a run may have left a population (deleted, hidden, unlisted or
  private, flagged, retagged or edited).  A stored answer computed before
  the last removal is never served: it is computed again from the live data
  (and stored).  One computed before mere additions (new uploads) is served
  with its ``Freshness`` (as of when, over how many runs, whether newer data
  exists) until the worker's refresh (``results.refresh``), queued by the
  write, replaces it.
- **Readers never wait for a recomputation.**  One recomputation at a time
  per answer (an advisory lock on its key, held by the reader or the
  refresh that computes it); while it runs, the others are served the answer
  stored before the removal: with the removed runs left out (the answer's
  ``without``, from ``results_changedrun``), or, for an answer that only
  counts and summarises runs, as it was, said to be ``updating``.  An answer
  that names runs and cannot leave the removed ones out is never served
  that way: its reader waits for the recomputation, at most
  ``WAIT_FOR_COMPUTE_S``, then computes it itself.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import OperationalError, connection, transaction
from django.utils import timezone

# A stored answer not asked for in this long is dropped by the refresh
# instead of being computed again.
KEEP_UNREQUESTED = timedelta(days=7)
# ``requested`` is written at most this often per answer (a read path that
# writes on every request would contend on hot rows).
REQUESTED_EVERY = timedelta(hours=1)
# A reader that finds nothing it may serve waits at most this long for the
# recomputation another process is running, then computes the answer itself.
WAIT_FOR_COMPUTE_S = 30.0
_WAIT_STEP_S = 0.05

# Set while a stored answer is being computed: answers it calls are then
# computed in the same snapshot instead of being read or stored on their own.
_computing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "benchdb_answer_computing", default=False
)

# The data version (0 until the first write after a flush of the tables).
VERSION = "coalesce(v.version, 0)"
LISTED_RUNS_SQL = (
    "SELECT count(*) FROM results_run WHERE visibility = 'public' AND NOT hidden"
)


@dataclass(frozen=True)
class Freshness:
    """How fresh a served answer is: the snapshot it was computed in."""

    as_of: datetime
    runs: int
    version: int
    current: bool
    # Served while it is computed again after a removal (``fetch_or_compute``).
    updating: bool = False

    def as_dict(self) -> dict:
        return {
            "as_of": self.as_of,
            "runs": self.runs,
            "data_version": self.version,
            "current": self.current,
            "updating": self.updating,
        }


def data_version() -> int:
    """The data version: one primary-key read of ``results_dataversion``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT version FROM results_dataversion WHERE id = 1")
        row = cursor.fetchone()
    return row[0] if row else 0


def _json_default(value):
    # NumPy scalars (stats) and times: the same numbers, as JSON.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__} in an answer")


def encode(value) -> str:
    return json.dumps(value, default=_json_default, allow_nan=True, sort_keys=True)


def _digest(args: tuple) -> tuple[str, str]:
    text = json.dumps(list(args), default=_json_default, sort_keys=True)
    return text, hashlib.sha256(text.encode()).hexdigest()


def fetch(name: str, args: tuple):
    """(answer, Freshness) stored for ``name(*args)`` if it may be served,
    else None.  One query: the version row and the stored answer."""
    _text, digest = _digest(args)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {VERSION}, coalesce(v.removed, 0), s.answer, s.version, "
            "s.computed, s.runs, s.requested FROM (SELECT 1) AS one "
            "LEFT JOIN results_dataversion v ON v.id = 1 "
            "LEFT JOIN results_answersummary s ON s.name = %s AND s.digest = %s",
            [name, digest],
        )
        row = cursor.fetchone()
        if row[2] is None or row[3] < row[1]:
            return None
        version, _removed, answer, stored, computed, runs, requested = row
        now = timezone.now()
        if requested < now - REQUESTED_EVERY:
            cursor.execute(
                "UPDATE results_answersummary SET requested = %s "
                "WHERE name = %s AND digest = %s",
                [now, name, digest],
            )
    return json.loads(answer), Freshness(computed, runs, stored, stored == version)


def fetch_or_compute(name: str, fn, args: tuple, without=None):
    """(answer, Freshness): the stored answer if it may be served, else
    computed and stored by one process at a time (single-flight), and the
    others never wait for it when an answer stored before may be served.

    After a removal no answer stored before it may be served as it was, and
    every reader would compute it live at once (2.7 to 4.3 s per report at a
    million results, 272 s for the cache-mode answer, on every web worker).
    The first reader (or the refresh, ``recompute``) computes it under a
    session advisory lock on the answer's key.  Whoever finds that lock held
    is served the answer stored before (``_previous``): with the removed runs
    left out by ``without(answer, run_ids)``, or, with no ``without`` (an
    answer that only counts and summarises runs), as it was, marked
    ``updating``.  If nothing may be served (none stored yet; or ``without``
    cannot leave a removed run out) the reader waits for the lock, at most
    ``WAIT_FOR_COMPUTE_S``, and reads what was stored, or computes it."""
    found = fetch(name, args)
    if found is not None:
        return found
    lock = _lock_key(name, args)
    if not _try_lock(lock):
        previous = _previous(name, args, without)
        if previous is not None:
            return previous
        if not _wait_lock(lock, WAIT_FOR_COMPUTE_S):
            # Waited long enough: compute it beside the one computing it.
            return fetch(name, args) or compute_and_store(name, fn, args)
    try:
        found = fetch(name, args)
        if found is None:
            found = compute_and_store(name, fn, args)
        return found
    finally:
        _unlock(lock)


def recompute(name: str, fn, args: tuple) -> bool:
    """The refresh's recomputation of one answer, under the same lock as a
    reader's (readers meanwhile are served the previous answer, see
    ``fetch_or_compute``); nothing is computed if a reader's recomputation
    made it current meanwhile.  True if it computed."""
    lock = _lock_key(name, args)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [lock])
    try:
        found = fetch(name, args)
        if found is not None and found[1].current:
            return False
        compute_and_store(name, fn, args)
        return True
    finally:
        _unlock(lock)


def restamp(name: str, args: tuple, reached) -> bool | None:
    """The refresh's way past a recomputation: a stored answer older than
    the data that none of the runs changed since can reach is current as it
    is.  In one snapshot: the runs changed since its version (the change log,
    ``results_changedrun``), ``reached(run_ids)`` (False: none of them can
    change it), then the answer stamped with that snapshot's data version,
    time and listed runs.  True if stamped; False if it must be computed
    again; None if nothing is stored (or it is current already).  Under the
    answer's lock, as ``recompute``."""
    lock = _lock_key(name, args)
    _text, digest = _digest(args)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [lock])
    try:
        with _one_snapshot():
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT s.version, {VERSION}, ARRAY(SELECT r.run_id "
                    "FROM results_changedrun r WHERE r.version > s.version) "
                    "FROM results_answersummary s LEFT JOIN results_dataversion v "
                    "ON v.id = 1 WHERE s.name = %s AND s.digest = %s",
                    [name, digest],
                )
                row = cursor.fetchone()
                if row is None or row[0] >= row[1]:
                    return None
                stored, version, changed = row
                if None in changed or reached(sorted(set(changed))):
                    return False
                try:
                    with transaction.atomic():
                        cursor.execute(
                            "UPDATE results_answersummary SET version = %s, "
                            "computed = clock_timestamp(), "
                            f"runs = ({LISTED_RUNS_SQL}) "
                            "WHERE name = %s AND digest = %s AND version = %s",
                            [version, name, digest, stored],
                        )
                        return cursor.rowcount == 1
                except OperationalError:
                    # Stored meanwhile by a reader that waited past
                    # WAIT_FOR_COMPUTE_S (REPEATABLE READ: a serialization
                    # failure): computed again instead.
                    return False
    finally:
        _unlock(lock)


def _lock_key(name: str, args: tuple) -> int:
    """A bigint key of the answer's own (the refresh's lock is one number,
    REFRESH_LOCK, a collision with which would only make one wait)."""
    _text, digest = _digest(args)
    key = hashlib.sha256(f"{name}|{digest}".encode()).digest()[:8]
    return int.from_bytes(key, signed=True)


def _try_lock(lock: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock])
        return cursor.fetchone()[0]


def _wait_lock(lock: int, seconds: float) -> bool:
    """Take the lock, waiting at most ``seconds``; True if taken."""
    deadline = time.monotonic() + seconds
    while not _try_lock(lock):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_WAIT_STEP_S)
    return True


def _unlock(lock: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _previous(name: str, args: tuple, without):
    """(answer, Freshness) stored before the last removal, for a reader
    while it is computed again: the runs removed since left out by
    ``without``; as it was, ``updating``, for an answer without one.  None
    if there is none, or if ``without`` cannot leave every removed run out
    (a removal that named no run, or ``without`` returned None)."""
    _text, digest = _digest(args)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.answer, s.version, s.computed, s.runs, "
            "ARRAY(SELECT r.run_id FROM results_changedrun r "
            "WHERE r.removal AND r.version > s.version) "
            "FROM results_answersummary s WHERE s.name = %s AND s.digest = %s",
            [name, digest],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    text, version, computed, runs, removed = row
    answer = json.loads(text)
    if without is not None:
        if None in removed:
            return None
        answer = without(answer, set(removed))
        if answer is None:
            return None
    return answer, Freshness(computed, runs, version, False, updating=True)


def compute_and_store(name: str, fn, args: tuple):
    """Compute ``fn(*args)`` in one snapshot with its data version and run
    count, store it (unless a newer one is stored already) and return
    (answer, Freshness)."""
    text, digest = _digest(args)
    token = _computing.set(True)
    try:
        with _one_snapshot():
            version, computed, runs, answer, seconds = _compute(fn, args)
    finally:
        _computing.reset(token)
    stored = encode(answer)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO results_answersummary (name, digest, args, answer, "
            "version, computed, runs, seconds, requested) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (name, digest) DO UPDATE SET answer = EXCLUDED.answer, "
            "version = EXCLUDED.version, computed = EXCLUDED.computed, "
            "runs = EXCLUDED.runs, seconds = EXCLUDED.seconds, "
            "requested = GREATEST(results_answersummary.requested, "
            "EXCLUDED.requested) "
            "WHERE results_answersummary.version <= EXCLUDED.version",
            [name, digest, text, stored, version, computed, runs, seconds, computed],
        )
    # What is served is what was stored: the JSON round trip, always.
    return json.loads(stored), Freshness(computed, runs, version, True)


@contextmanager
def _one_snapshot():
    """One REPEATABLE READ transaction; inside one already (a test,
    ATOMIC_REQUESTS), its snapshot."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _compute(fn, args: tuple) -> tuple:
    """(data version, time, listed runs, answer, seconds) in one snapshot."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {VERSION}, clock_timestamp(), ({LISTED_RUNS_SQL}) "
            "FROM (SELECT 1) AS one LEFT JOIN results_dataversion v ON v.id = 1"
        )
        version, computed, runs = cursor.fetchone()
    start = time.perf_counter()
    answer = fn(*args)
    return version, computed, runs, answer, time.perf_counter() - start


def computing() -> bool:
    """True while a stored answer is being computed (``compute_and_store``):
    answers it reads are then computed in its snapshot, not read or stored."""
    return _computing.get()


def posteriors(keys: list[str]) -> dict[str, tuple[float, float, float]]:
    """The Bayesian signed-rank posteriors kept under those keys (a hash of
    their inputs, ``across.bayes_signed_ranks``; ``results_posterior``).

    Those read are marked used (at most every ``REQUESTED_EVERY``): the
    refresh drops a posterior unused for ``KEEP_UNREQUESTED``, not one that
    every refresh reads (a pair an upload leaves alone), which would be
    drawn again."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, probs, used < now() - %s FROM results_posterior "
            "WHERE key = ANY(%s)",
            [REQUESTED_EVERY, keys],
        )
        rows = cursor.fetchall()
    old = [key for key, _probs, unused in rows if unused]
    if old:
        # Best effort, as ``keep_posteriors``: a row another process wrote
        # since this snapshot began is a serialization failure; it stays.
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE results_posterior SET used = now() WHERE key = ANY(%s)",
                    [old],
                )
        except OperationalError:
            pass
    return {key: tuple(probs) for key, probs, _unused in rows}


def keep_posteriors(found: dict[str, tuple[float, float, float]]) -> None:
    """Keep posteriors by their keys, for the next computation that needs
    them.  Best effort: in a REPEATABLE READ snapshot a row another process
    stored meanwhile is a serialization failure, and then it is not kept."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            for key, probs in found.items():
                cursor.execute(
                    "INSERT INTO results_posterior (key, probs) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO NOTHING",
                    [key, list(probs)],
                )
    except OperationalError:
        pass


def query_dict(items: list):
    """Run filters as a stored answer's arguments (``population.filter_items``)
    back into a QueryDict."""
    from django.http import QueryDict

    out = QueryDict(mutable=True)
    for name, values in items:
        out.setlist(name, [str(v) for v in values])
    return out


def freshness_of(*found) -> dict | None:
    """The oldest of several answers' freshness (``Freshness`` or its
    ``as_dict``), for a page or a response; None if all were computed inside
    another answer."""
    known = [f.as_dict() if isinstance(f, Freshness) else f for f in found if f]
    if not known:
        return None
    oldest = min(known, key=lambda f: (f["data_version"], f["as_of"]))
    return {
        **oldest,
        "current": all(f["current"] for f in known),
        "updating": any(f.get("updating") for f in known),
    }
