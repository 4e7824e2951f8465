"""Embedded defaults: a real PostgreSQL and a server-less Celery broker.

When ``DATABASE_URL`` is unset, benchdb starts PostgreSQL from the ``pgserver``
package (real PostgreSQL binaries, data under ``var/pgdata``) so that a new
user needs nothing installed.  It is the same engine as in production: there is
no SQLite path anywhere.

When ``CELERY_BROKER_URL`` is unset, Celery uses kombu's filesystem transport
under ``var/broker``, made safe for concurrent processes and woken by its
acks (benchdb/broker.py): a real worker
process consumes real messages, exactly the path production takes with Redis or
RabbitMQ, only without a broker server.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "benchdb"


def var_dir() -> Path:
    """Where local state lives (git-ignored); ``BENCHDB_VAR_DIR`` overrides."""
    path = Path(os.environ.get("BENCHDB_VAR_DIR") or BASE_DIR / "var")
    path.mkdir(parents=True, exist_ok=True)
    return path


def postgres_server():
    """Start (or attach to) the embedded PostgreSQL and return its handle.

    ``cleanup_mode=None`` keeps the server running after this process exits:
    the web server, its autoreloader and the worker are separate processes
    that must share one cluster.  ``manage.py embedded stop`` stops it.
    """
    import logging
    import warnings

    # pgserver logs every handle it closes and platformdirs warns about a
    # missing XDG_RUNTIME_DIR on servers: neither is news to a user.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        return pgserver.get_server(var_dir() / "pgdata", cleanup_mode=None)


def database_url(settings_dict: dict) -> str:
    """A ``DATABASE_URL`` for a Django database settings dict (socket or TCP).

    Used to hand the very database a process uses (e.g. the test database) to
    a child process such as a Celery worker.
    """
    from urllib.parse import quote

    host = quote(str(settings_dict.get("HOST") or ""), safe="")
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    user = quote(settings_dict.get("USER") or "", safe="")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}@" if password else f"{user}@"
    return f"postgres://{auth}{host}{port}/{settings_dict['NAME']}"


def database_settings() -> dict:
    """Django ``DATABASES['default']`` for the embedded PostgreSQL."""
    server = postgres_server()
    exists = server.psql(
        f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';"
    )
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    info = server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        # A Unix socket directory: pgserver listens on a socket, not a port.
        "HOST": str(info.socket_dir) if info.socket_dir else "127.0.0.1",
        # The socket file is named after the port (.s.PGSQL.<port>).
        "PORT": str(info.port or ""),
    }


def is_lifecycle_command(argv: list[str]) -> bool:
    """True for ``manage.py embedded ...`` (benchdb/ops/management/commands/
    embedded.py), which must see the server as it is, not start it."""
    return len(argv) > 1 and Path(argv[0]).name == "manage.py" and argv[1] == "embedded"


def unstarted_settings() -> dict:
    """``DATABASES['default']`` for a process that never connects (the
    ``embedded`` command): the embedded database's name, no server."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(var_dir() / "pgdata"),
        "PORT": "",
    }


def broker_settings() -> tuple[str, dict]:
    """The filesystem broker URL and its transport options."""
    # BENCHDB_BROKER_DIR lets the test suite keep its messages apart from a
    # development server's.
    root = Path(os.environ.get("BENCHDB_BROKER_DIR") or var_dir() / "broker")
    queue = root / "queue"
    held = root / "held"
    control = root / "control"
    for folder in (queue, held, control):
        folder.mkdir(parents=True, exist_ok=True)
    options = {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        # Messages taken by a consumer and not yet acknowledged
        # (benchdb/broker.py): put back if their consumer dies.
        "held_folder": str(held),
        # Broadcast (pidbox) exchanges; kombu's default is ./control.
        "control_folder": str(control),
        # kombu sleeps this long whenever it cannot take a message.  An ack
        # ends the sleep at once (benchdb/broker.py), so this is only how late
        # a message sent to an empty queue is seen; at kombu's default of 1 s
        # without that wake-up a worker process ingested at most one bundle a
        # second.  10 ms costs an idle worker a directory listing a hundred
        # times a second (well under 1% of a core).
        "polling_interval": float(os.environ.get("BROKER_POLLING_INTERVAL", "0.01")),
    }
    return "filesystem://", options
