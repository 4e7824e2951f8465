"""Every API error as ``{"errors": [{"pointer", "message", "code"}]}``.

Clients (the agent first) show each message next to the field it names: the
pointer is a JSON pointer into the request body (``/tests/0/repeats``) for a
field error, ``""`` for the body as a whole, and ``null`` for errors that are
not about the body (authentication, permissions, throttling, not found).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from benchdb.results.reads import RunHidden


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class Gone(exceptions.APIException):
    """A run the moderators hid (``reads.RunHidden``): 410 with the reason,
    as the page answers."""

    status_code = status.HTTP_410_GONE
    default_code = "hidden"

    def __init__(self, reason: str):
        super().__init__(f"This run was hidden by the moderators: {reason}")
        self.reason = reason


class BundleInvalid(exceptions.APIException):
    """A bundle's field errors, already as pointers."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, errors: list[dict]):
        super().__init__("The bundle is not valid.")
        self.errors = errors


def _escape(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def flatten(detail, pointer: str = "") -> list[dict]:
    """DRF's nested error detail as a flat list of pointers and messages."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            if key in ("non_field_errors", "detail"):
                out.extend(flatten(value, pointer))
            else:
                out.extend(flatten(value, f"{pointer}/{_escape(key)}"))
        return out
    if isinstance(detail, list):
        out = []
        for i, item in enumerate(detail):
            if isinstance(item, dict | list) and item:
                out.extend(flatten(item, f"{pointer}/{i}"))
            elif isinstance(item, dict | list):
                continue
            else:
                out.extend(flatten(item, pointer))
        return out
    code = getattr(detail, "code", "invalid")
    return [{"pointer": pointer, "message": str(detail), "code": code}]


def handler(exc, context):
    """DRF's EXCEPTION_HANDLER: the uniform error body, the usual statuses."""
    if isinstance(exc, RunHidden):
        exc = Gone(exc.reason)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    if isinstance(exc, BundleInvalid):
        errors = [{**e, "code": e.get("code", "invalid")} for e in exc.errors]
    elif isinstance(exc, exceptions.ValidationError):
        errors = flatten(exc.detail)
    elif isinstance(exc, exceptions.ParseError):
        errors = [{"pointer": "", "message": str(exc.detail), "code": "parse_error"}]
    else:
        errors = [
            {
                "pointer": None,
                "message": str(exc.detail),
                "code": getattr(exc.detail, "code", exc.default_code),
            }
        ]
    body = {"errors": errors}
    if isinstance(exc, Gone):
        body["hidden_reason"] = exc.reason
    set_rollback()
    return Response(body, status=exc.status_code, headers=headers)


def not_found(request, exception=None):
    """Django's 404 for a path no route matches (``handler404``): under
    /api/ the API's error body, as JSON, rather than the HTML page."""
    if request.path.startswith("/api/"):
        message = "No such API path: the endpoints are listed at /api/v1/."
        return JsonResponse(
            {"errors": [{"pointer": None, "message": message, "code": "not_found"}]},
            status=404,
        )
    return defaults.page_not_found(request, exception)
