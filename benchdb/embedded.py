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


MIB = 1 << 20
GIB = 1 << 30
# The file of benchdb's settings in the data folder, included by the
# postgresql.conf initdb wrote.
SETTINGS_FILE = "benchdb.conf"


def memory_bytes() -> int:
    """The memory PostgreSQL's settings are derived from: ``BENCHDB_PG_MEMORY``
    (bytes, or with a unit: 4GB, 512MB) if set, else the machine's RAM, or
    the container's limit (cgroup v2 ``memory.max``) when lower."""
    given = os.environ.get("BENCHDB_PG_MEMORY", "").strip().upper()
    if given:
        units = {"KB": 1 << 10, "MB": MIB, "GB": GIB, "TB": 1 << 40}
        for unit, factor in units.items():
            if given.endswith(unit):
                return int(float(given[: -len(unit)]) * factor)
        return int(given)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        limit = "max"
    return min(ram, int(limit)) if limit.isdigit() else ram


def postgres_settings(memory: int | None = None) -> dict[str, str]:
    """PostgreSQL's memory settings for a machine with ``memory`` bytes
    (``memory_bytes()``), instead of its defaults for a 1990s-sized one
    (128 MB of buffers, 4 MB per sort).  Why each (bench/README.md,
    "PostgreSQL configured for the machine"):

    - ``shared_buffers``: a quarter of the memory (PostgreSQL's own advice),
      at most 8 GiB: the rest is the kernel's page cache, which holds the same
      pages; past a few GiB a larger pool mostly holds them twice.  A new
      comparison reads each of its results' pages: at PostgreSQL's default
      almost none of a large database is there.
    - ``effective_cache_size``: three quarters of the memory: what the planner
      assumes the buffers and the page cache hold together (it allocates
      nothing); the default 4 GB makes it shy of index scans on larger
      machines.
    - ``work_mem``: what one sort or hash may use before spilling to disk, per
      operation and per connection: the memory left after the buffers over
      three operations for each of the 100 connections, between 4 and 64
      MiB.  The reports' percentiles and browse's grouping sets sort every
      listed run's figures: 4 MB spilled them to temporary files.
    - ``maintenance_work_mem``: VACUUM and index builds, 1/16 of the memory,
      at most 1 GiB.
    """
    memory = memory_bytes() if memory is None else memory
    buffers = max(128 * MIB, min(memory // 4, 8 * GIB))
    work = max(4 * MIB, min((memory - buffers) // (3 * 100), 64 * MIB))
    maintenance = max(64 * MIB, min(memory // 16, GIB))
    return {
        "shared_buffers": f"{buffers // MIB}MB",
        "effective_cache_size": f"{memory * 3 // 4 // MIB}MB",
        "work_mem": f"{work // MIB}MB",
        "maintenance_work_mem": f"{maintenance // MIB}MB",
    }


def write_settings(pgdata: Path) -> bool:
    """Write ``postgres_settings()`` to the data folder's SETTINGS_FILE (and
    include it from postgresql.conf once); True if they changed.  Read by
    the server at its next start (``shared_buffers``) or reload (the rest)."""
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    text = conf.read_text()
    if include not in text:
        conf.write_text(text.rstrip("\n") + f"\n\n# benchdb/embedded.py\n{include}\n")
    body = "# Derived from this machine's memory by benchdb/embedded.py at start.\n"
    body += "".join(f"{k} = '{v}'\n" for k, v in postgres_settings().items())
    path = pgdata / SETTINGS_FILE
    if path.exists() and path.read_text() == body:
        return False
    path.write_text(body)
    return True


def postgres_server():
    """Start (or attach to) the embedded PostgreSQL and return its handle,
    configured for the machine (``postgres_settings``).

    ``cleanup_mode=None`` keeps the server running after this process exits:
    the web server, its autoreloader and the worker are separate processes
    that must share one cluster.  ``manage.py embedded stop`` stops it.
    """
    import logging
    import warnings

    pgdata = var_dir() / "pgdata"
    fresh = not (pgdata / "PG_VERSION").exists()
    # A server that is not running reads the settings when it starts.
    changed = False if fresh else write_settings(pgdata)
    # pgserver logs every handle it closes and platformdirs warns about a
    # missing XDG_RUNTIME_DIR on servers: neither is news to a user.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        from pgserver._commands import pg_ctl

        server = pgserver.get_server(pgdata, cleanup_mode=None)
        if fresh and write_settings(pgdata):
            # Just created: nothing is connected yet, so restart it with them
            # (pg_ctl restart keeps the options it was started with).
            pg_ctl(["-w", "restart"], pgdata=pgdata, user=server.system_user)
            server = pgserver.get_server(pgdata, cleanup_mode=None)
        elif changed:
            # Running with other settings (the machine's memory changed):
            # work_mem and the rest now, shared_buffers at its next start.
            server.psql("SELECT pg_reload_conf();")
        return server


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


def database_settings(conn_max_age: int = 0, conn_health_checks: bool = False) -> dict:
    """Django ``DATABASES['default']`` for the embedded PostgreSQL; a web
    process keeps its connection ``conn_max_age`` seconds, as with
    ``DATABASE_URL`` (dj-database-url's arguments of the same names)."""
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
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": conn_health_checks,
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
        # times a second, a small share of a core.
        "polling_interval": float(os.environ.get("BROKER_POLLING_INTERVAL", "0.01")),
    }
    return "filesystem://", options
