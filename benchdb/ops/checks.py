"""A deploy check that refuses a known-insecure production configuration.

Django's own ``check --deploy`` warns about headers and cookies; these are the
mistakes specific to benchdb's defaults, which are made for a laptop: the
development secret key, the embedded PostgreSQL (one process's private
cluster under ``var/``) and the filesystem broker (workers on other machines
cannot see it).  They are errors, not warnings: a public instance running any
of them is broken or unsafe, not merely untidy.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_CHARS = 5


@register(Tags.security, deploy=True)
def check_production_settings(app_configs=None, **kwargs) -> list[Error]:
    """Errors for each insecure production setting (run by ``check --deploy``)."""
    errors = []
    key = settings.SECRET_KEY
    if key == settings.INSECURE_SECRET_KEY:
        errors.append(
            Error(
                "SECRET_KEY is the development key.",
                hint="Set SECRET_KEY to 50 or more random characters "
                '(python -c "import secrets; print(secrets.token_urlsafe(50))").',
                id="benchdb.E001",
            )
        )
    elif len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < MIN_SECRET_KEY_CHARS:
        errors.append(
            Error(
                f"SECRET_KEY is too short or too uniform ({len(key)} characters).",
                hint=f"Use {MIN_SECRET_KEY_LENGTH} or more random characters.",
                id="benchdb.E002",
            )
        )
    if settings.DEBUG:
        errors.append(
            Error(
                "DEBUG is on.",
                hint="Unset DEBUG or set DEBUG=false in production: tracebacks "
                "show settings and data to anyone.",
                id="benchdb.E003",
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        errors.append(
            Error(
                "ALLOWED_HOSTS contains '*'.",
                hint="List the host names the site answers to, e.g. "
                "ALLOWED_HOSTS=bench.example.org.",
                id="benchdb.E004",
            )
        )
    if getattr(settings, "DATABASE_IS_EMBEDDED", False):
        errors.append(
            Error(
                "The database is the embedded PostgreSQL (DATABASE_URL is unset).",
                hint="Set DATABASE_URL=postgres://user:password@host:5432/benchdb.",
                id="benchdb.E005",
            )
        )
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        errors.append(
            Error(
                "The Celery broker is the filesystem transport "
                "(CELERY_BROKER_URL is unset).",
                hint="Set CELERY_BROKER_URL=redis://host:6379/0 (or amqp://...): "
                "workers on other machines cannot see a local folder.",
                id="benchdb.E006",
            )
        )
    return errors


@register(Tags.security, deploy=True)
def check_shared_limits(app_configs=None, **kwargs) -> list[Warning]:
    """A warning when the sign-in and API limits cannot be shared."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend.endswith(("LocMemCache", "DummyCache")):
        return [
            Warning(
                "The sign-in and API limits count in each process's memory "
                "(CACHE_URL is unset): every web process, and every restart of "
                "one, gives a client a new allowance of failed sign-ins.",
                hint="Set CACHE_URL=redis://host:6379/1 (docker/.env.example).",
                id="benchdb.W001",
            )
        ]
    return []
