"""Pages kept as written, shared by the web processes, while nothing they
show can change.

Home, browse, the two reports, comparisons and run pages show runs and
stored answers only: the same page for every anonymous visitor, written
again on each request (their queries, rows and templates: 15 to 90 ms of
CPU at 100k results for a few ms of SQL, bench/README.md "Kept pages").
What they show changes only when

- a run is written (stored, moderated, edited, deleted; a result changed):
  ``results_dataversion`` is bumped at its commit, by the write functions
  or by the trigger for any other write (``answer_cache``), and its
  ``changed`` time with it;
- a stored answer is computed again, stored or dropped
  (``results_answersummary``: its rows and the sum of their ``xmin``, the
  transaction that wrote each: any row written anew changes it, where its
  ``computed`` time need not be the latest).

So a page written for one address is kept under the address and that
stamp (one query, read before the page is written: a write committed while
it is written makes a newer stamp, never an older page under the new one)
and given again while both are the same.  Nothing is invalidated, only
evicted (``memo.Memo``, bounded by ``BENCHDB_PAGE_MEMO`` bytes); a change
is a new key.

Each process keeps its own, and shares what it wrote through one unlogged
table (``web_keptpage``, one row per address): the stamp's query also says
whether the table holds this address under the current stamp, so a page
written by one worker is read (one more query, once) by the others, where
each of them wrote it again.  A store drops the pages of every older stamp,
and keeps the table within the same budget.

``changed`` is a clock time, so a test's rolled-back data cannot meet the
page of another test's under the same version number; a changed setting
(tests' ``override_settings``) or ``clear()`` forgets every page, by a new
generation in the addresses.

Only for requests that carry no session and no messages (anonymous, no
owner keys, nothing to flash): the pages' only per-visitor part is then the
CSRF token of the comparison's "save" form, written as a placeholder and
replaced by this visitor's token (``get_token``) on every answer.  Only 200
answers are kept.  The kept page's answers skip ``answer_cache.fetch``, so
their ``requested`` time is not written on a hit (the refresh keeps
answers asked for within 7 days; one dropped is a new stamp, and computed
on the next visit).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from pathlib import Path

from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, connection, transaction
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.utils.cache import patch_vary_headers

from benchdb.results.memo import Memo

log = logging.getLogger(__name__)

# What {% csrf_token %} writes in a page being kept (``csrf_placeholder``),
# replaced by the visitor's token.
PLACEHOLDER = "kept-page-csrf-token-placeholder"

_PAGES = Memo(0)


@functools.cache
def _files() -> str:
    """The code, templates and static files a page is written from: their
    names, sizes and times, the same in every process of one deployment."""
    digest = hashlib.sha256()
    base = Path(settings.BASE_DIR)
    folders = [base / "benchdb", base / "templates", base / "static"]
    if settings.STATIC_ROOT:
        folders.append(Path(settings.STATIC_ROOT) / "staticfiles.json")
    for folder in folders:
        paths = sorted(folder.rglob("*")) if folder.is_dir() else [folder]
        for path in paths:
            if "__pycache__" in path.parts or not path.is_file():
                continue
            found = path.stat()
            digest.update(f"{path}\0{found.st_size}\0{found.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _code() -> str:
    """What else a page depends on: the files it is written from and the
    project's own settings. A page kept by the code before an upgrade, or
    under other settings, is never given by the new one."""
    digest = hashlib.sha256(_files().encode())
    for name in sorted(dir(settings)):
        if name.startswith("BENCHDB_") or name in SETTINGS_SHOWN:
            digest.update(f"{name}={getattr(settings, name)!r}\n".encode())
    return digest.hexdigest()[:16]


# Settings a page shows besides the project's own (``BENCHDB_*``).
SETTINGS_SHOWN = ("DEBUG", "LANGUAGE_CODE", "TIME_ZONE", "STATIC_URL", "USE_TZ")
# Part of each address: the code's fingerprint, with a number bumped by
# every changed setting and ``clear()``, so a page written before is never
# met again (in production, where neither happens, every process of one
# deployment shares it, and so its pages).
_GENERATION = None
_CLEARED = 0


def _generation() -> str:
    global _GENERATION
    if _GENERATION is None:
        _GENERATION = f"{_code()}.{_CLEARED}"
    return _GENERATION


# The stamp as text, made by PostgreSQL (one spelling for every process),
# and whether the shared table holds this address's page under it.
STAMP_SQL = (
    "SELECT concat_ws(' ', v.version, v.changed, s.n, s.xids), "
    "EXISTS (SELECT 1 FROM web_keptpage k WHERE k.address = %s "
    "AND k.stamp = concat_ws(' ', v.version, v.changed, s.n, s.xids)) "
    "FROM (SELECT 1) AS one "
    "LEFT JOIN results_dataversion v ON v.id = 1 "
    "CROSS JOIN (SELECT count(*) AS n, sum(xmin::text::bigint) AS xids "
    "FROM results_answersummary) AS s"
)
LOAD_SQL = (
    "SELECT content, content_type FROM web_keptpage WHERE address = %s AND stamp = %s"
)
# Pages of any other stamp can never be given again: dropped at each store.
# Stored only within the budget (``BENCHDB_PAGE_MEMO`` bytes, as each
# process's own): a crawler's endless query strings fill it, never more.
STORE_SQL = (
    "WITH gone AS (DELETE FROM web_keptpage "
    "WHERE stamp <> %(stamp)s AND address <> %(address)s) "
    "INSERT INTO web_keptpage (address, stamp, content, content_type) "
    "SELECT %(address)s, %(stamp)s, %(content)s, %(content_type)s "
    "WHERE (SELECT coalesce(sum(octet_length(content)), 0) FROM web_keptpage "
    "WHERE stamp = %(stamp)s AND address <> %(address)s) + %(size)s <= %(budget)s "
    "ON CONFLICT (address) DO UPDATE SET stamp = EXCLUDED.stamp, "
    "content = EXCLUDED.content, content_type = EXCLUDED.content_type"
)


def _stamp_and_shared(address: str) -> tuple[str, bool]:
    with connection.cursor() as cursor:
        cursor.execute(STAMP_SQL, [address])
        return cursor.fetchone()


def stamp() -> str:
    """What the kept pages are kept under besides their address: the data
    version with its time, and the stored answers' number and writers."""
    return _stamp_and_shared("")[0]


def _load(address: str, stamp_: str):
    with connection.cursor() as cursor:
        cursor.execute(LOAD_SQL, [address, stamp_])
        row = cursor.fetchone()
    return None if row is None else (bytes(row[0]), row[1])


def _store(address: str, stamp_: str, found: tuple[bytes, str]) -> None:
    """Share the page written with the other processes. A cache's write: if
    the database refuses it (a read-only transaction, say), the page is still
    given."""
    # One statement: atomic by itself in autocommit; within a transaction
    # (a test's, or ATOMIC_REQUESTS), a savepoint keeps a refusal from
    # aborting it.
    guard = (
        transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    )
    try:
        with guard, connection.cursor() as cursor:
            cursor.execute(
                STORE_SQL,
                {
                    "address": address,
                    "stamp": stamp_,
                    "content": found[0],
                    "content_type": found[1],
                    "size": len(found[0]),
                    "budget": settings.BENCHDB_PAGE_MEMO,
                },
            )
    except DatabaseError:
        log.warning("a kept page could not be shared", exc_info=True)


def _keepable(request) -> bool:
    return (
        request.method == "GET"
        and settings.SESSION_COOKIE_NAME not in request.COOKIES
        and "messages" not in request.COOKIES
    )


def csrf_placeholder(request) -> dict:
    """A context processor: the placeholder as the CSRF token of a page
    being kept (after Django's own processor, so it wins)."""
    return {"csrf_token": PLACEHOLDER} if getattr(request, "kept_page", False) else {}


def _answer(request, content: bytes, content_type: str) -> HttpResponse:
    marker = PLACEHOLDER.encode()
    if marker in content:
        content = content.replace(marker, get_token(request).encode())
    response = HttpResponse(content, content_type=content_type)
    # As the page written says (its template asked for ``user``, so the
    # session middleware added it): it differs for a signed-in visitor.
    patch_vary_headers(response, ("Cookie",))
    return response


def page(view):
    """``view`` (a page that shows the same to every anonymous visitor)
    kept per address and ``stamp()``."""

    @functools.wraps(view)
    def kept(request, *args, **kwargs):
        _PAGES.budget = settings.BENCHDB_PAGE_MEMO
        if not _PAGES.budget or not _keepable(request):
            return view(request, *args, **kwargs)
        address = "\n".join(
            (
                _generation(),
                view.__name__,
                request.scheme,
                request.get_host(),
                request.get_full_path(),
            )
        )
        if "\x00" in address:  # PostgreSQL's text holds no NUL
            return view(request, *args, **kwargs)
        stamp_, shared = _stamp_and_shared(address)
        key = (address, stamp_)
        found = _PAGES.get(key)
        if found is None and shared:
            # Written by another process: one more query, once per process.
            found = _load(address, stamp_)
            if found is not None:
                _PAGES.put(key, found, len(found[0]))
        if found is None:
            request.kept_page = True
            response = view(request, *args, **kwargs)
            request.kept_page = False
            if response.streaming:
                return response
            found = (response.content, response["Content-Type"])
            if response.status_code != 200:
                response.content = _answer(request, *found).content
                return response
            _PAGES.put(key, found, len(found[0]))
            _store(address, stamp_, found)
        return _answer(request, *found)

    return kept


def clear() -> None:
    """Forget every page kept, this process's and (by a new generation in
    their addresses) the shared ones it wrote."""
    global _GENERATION, _CLEARED
    _CLEARED += 1
    _GENERATION = None
    _PAGES.clear()


def _forget(**_kwargs) -> None:
    clear()


setting_changed.connect(_forget)
