"""What benchdb sets on its PostgreSQL sessions (benchdb/settings.py): JIT
off, unless DATABASE_URL's own options turn it back on."""

import os
import subprocess
import sys

import psycopg
import pytest
from django.db import connection

from tests.conftest import ROOT


def show(cursor, name: str) -> str:
    cursor.execute(f"SHOW {name}")
    return cursor.fetchone()[0]


@pytest.mark.django_db
def test_service_sessions_run_without_jit():
    with connection.cursor() as cursor:
        assert show(cursor, "jit") == "off"


def settings_options(database_url: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url}
    code = (
        "import benchdb.settings as s; "
        "print(s.DATABASES['default']['OPTIONS']['options'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip()


@pytest.mark.django_db
def test_options_in_the_database_url_come_after_and_win():
    assert settings_options("postgres://u@127.0.0.1:1/db") == "-c jit=off"
    options = settings_options(
        "postgres://u@127.0.0.1:1/db?options=-c%20jit%3Don%20-c%20work_mem%3D8MB"
    )
    assert options == "-c jit=off -c jit=on -c work_mem=8MB"
    # PostgreSQL takes the last of a setting given twice.
    params = connection.get_connection_params()
    params["options"] = options
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as conn, conn.cursor() as cursor:
        assert show(cursor, "jit") == "on"
        assert show(cursor, "work_mem") == "8MB"
