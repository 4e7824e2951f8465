"""Pages kept as written, per process, while nothing they show can change.

Home, browse and the two reports show listed runs and stored answers only:
the same page for every anonymous visitor, written again on each request
(their queries, rows and templates: 15 to 90 ms of CPU at 100k results for
a few ms of SQL, bench/README.md "Kept pages").  What they show changes
only when

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
is a new key.  ``changed`` is a clock time, so a test's rolled-back data
cannot meet the page of another test's under the same version number; a
changed setting (tests' ``override_settings``) forgets every page.

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

import functools

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.utils.cache import patch_vary_headers

from benchdb.results.memo import Memo

# What {% csrf_token %} writes in a page being kept (``csrf_placeholder``),
# replaced by the visitor's token.
PLACEHOLDER = "kept-page-csrf-token-placeholder"

_PAGES = Memo(0)

STAMP_SQL = (
    "SELECT v.version, v.changed, s.n, s.xids FROM (SELECT 1) AS one "
    "LEFT JOIN results_dataversion v ON v.id = 1 "
    "CROSS JOIN (SELECT count(*) AS n, sum(xmin::text::bigint) AS xids "
    "FROM results_answersummary) AS s"
)


def stamp() -> tuple:
    """What the kept pages are kept under besides their address: the data
    version with its time, and the stored answers' number and writers."""
    with connection.cursor() as cursor:
        cursor.execute(STAMP_SQL)
        return cursor.fetchone()


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
        key = (
            view.__name__,
            request.get_full_path(),
            request.get_host(),
            request.scheme,
            stamp(),
        )
        found = _PAGES.get(key)
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
        return _answer(request, *found)

    return kept


def clear() -> None:
    _PAGES.clear()


def _forget(**_kwargs) -> None:
    clear()


setting_changed.connect(_forget)
