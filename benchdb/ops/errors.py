"""The site's own 404 and 500 pages with ``DEBUG`` on, as with it off.

``make run`` runs with ``DEBUG=true``, where Django answers a page that does
not exist with its technical 404 (every URL pattern, in a page wider than a
phone) and an error with its traceback page.  For the people who use the
site those are the same missing page and the same error as in production:
this middleware (in ``MIDDLEWARE`` only when ``DEBUG`` is on) answers them
as with ``DEBUG`` off (the URLconf's ``handler404``, ``templates/404.html``)
and with ``templates/500.html``.  The traceback still
goes to the log (the console), where the developer reads it; API answers
(JSON) and responses a view made itself are left alone.
"""

from __future__ import annotations

import logging

from django.shortcuts import render

log = logging.getLogger("django.request")


def site_error_pages(get_response):
    def middleware(request):
        response = get_response(request)
        if response.status_code == 404 and _technical(response):
            # The answer DEBUG off gives: the URLconf's handler404 (JSON
            # under /api/), else templates/404.html.
            from django.http import Http404
            from django.urls import get_resolver

            handler = get_resolver(getattr(request, "urlconf", None))
            return handler.resolve_error_handler(404)(request, Http404())
        return response

    def process_exception(request, exception):
        from django.core.exceptions import PermissionDenied
        from django.http import Http404

        if isinstance(exception, (Http404, PermissionDenied)):
            return None  # Django's own handling (then the 404 above)
        if request.path.startswith("/api/"):
            return None
        log.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        return render(request, "500.html", status=500)

    middleware.process_exception = process_exception
    return middleware


def _technical(response) -> bool:
    """Django's technical 404 page (DEBUG), not a view's own answer."""
    return (
        getattr(response, "is_rendered", True)
        and response.get("Content-Type", "").startswith("text/html")
        and b'<meta name="robots" content="NONE,NOARCHIVE">' in response.content[:2000]
    )
