"""Health: is the database answering, is the broker reachable."""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse

from benchdb.celery import app as celery_app


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure is "unhealthy", with its reason
        return f"{type(exc).__name__}: {exc}"
    return None


def check_broker() -> str | None:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def health(request) -> JsonResponse:
    """200 when the database and the broker answer, 503 otherwise."""
    checks = {"database": check_database(), "broker": check_broker()}
    ok = all(v is None for v in checks.values())
    body = {
        "status": "ok" if ok else "unhealthy",
        "checks": {k: "ok" if v is None else v for k, v in checks.items()},
    }
    return JsonResponse(body, status=200 if ok else 503)
