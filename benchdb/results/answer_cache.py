"""Community answers cached by what they depend on.

The reports' across-runs answers (``web.answers``) and the overhead summary
(``summaries.overhead_summary``) aggregate over every listed run of a test,
or every guest/host pair: their cost grows with the table however little
they show.  They are kept in Django's cache (``CACHES``: per process by
default, Redis with ``CACHE_URL``) under a key made of their arguments and
``data_version()``, read from PostgreSQL on each request, so a new, deleted,
hidden or flagged run is visible at once in every process.
"""

from __future__ import annotations

import functools
import hashlib

from django.core.cache import cache
from django.db import connection

# How long a cached community answer may live at most (seconds); a new or
# moderated run makes it stale at once through ``data_version``.
ANSWER_CACHE_SECONDS = 3600


def data_version() -> str:
    """What every across-runs answer depends on, in one cheap query.

    A new run raises ``max(id)``; a deleted one lowers ``count(*)``; any
    change to a run (moderation: hide, flag; a baseline linked, a run made
    suspect at ingest) sets its ``updated`` (``auto_now``, and explicitly in
    ingest's ``update_fields`` and bulk ``update``).  Results are written
    and deleted only with their run.  Read from PostgreSQL, so every web
    process sees a new version as soon as the run is committed, whatever
    the cache backend.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), max(id), max(updated) FROM results_run")
        count, top, updated = cursor.fetchone()
    return f"{count}:{top}:{updated.isoformat() if updated else ''}"


def cached(fn):
    """Cache a community answer (Django's cache) by its arguments and the
    ``data_version``: these answers aggregate over every listed run of a
    test, so they cost the same however few rows they show."""

    @functools.wraps(fn)
    def wrapper(*args):
        digest = hashlib.sha256(repr(args).encode()).hexdigest()[:32]
        key = f"benchdb:answers:{fn.__name__}:{data_version()}:{digest}"
        found = cache.get(key)
        if found is None:
            found = fn(*args)
            cache.set(key, found, ANSWER_CACHE_SECONDS)
        return found

    wrapper.uncached = fn
    return wrapper
