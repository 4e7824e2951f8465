"""A web process keeps its database connection across requests, checked
before reuse, on the embedded PostgreSQL (``manage.py serve``) and with
DATABASE_URL (compose) alike: a new connection for every request was a large
share of a page's fixed cost (docs/deploy.md, "Database connections")."""

import json
import os
import subprocess
import sys

from benchdb import embedded
from tests.conftest import ROOT

SHOW = (
    "import json; from django.conf import settings; "
    "d = settings.DATABASES['default']; "
    "print(json.dumps([d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS']]))"
)


def database_settings(**env) -> list:
    environ = {k: v for k, v in os.environ.items() if k not in ("DB_CONN_MAX_AGE",)} | {
        "DJANGO_SETTINGS_MODULE": "benchdb.settings",
        **env,
    }
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {SHOW}"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_it_keeps_connections_with_health_checks_by_default():
    url = "postgres://postgres@127.0.0.1:5432/unused"
    assert database_settings(DATABASE_URL=url) == [600, True]


def test_db_conn_max_age_0_closes_after_each_request():
    url = "postgres://postgres@127.0.0.1:5432/unused"
    assert database_settings(DATABASE_URL=url, DB_CONN_MAX_AGE="0") == [0, True]


class FakeServer:
    class Info:
        socket_dir = "/tmp/sockets"
        port = 5432

    def psql(self, sql: str) -> str:
        return "(1 row)"

    def get_postmaster_info(self):
        return self.Info()


def test_the_embedded_database_keeps_them_as_asked(monkeypatch):
    monkeypatch.setattr(embedded, "postgres_server", FakeServer)
    found = embedded.database_settings(conn_max_age=600, conn_health_checks=True)
    assert (found["CONN_MAX_AGE"], found["CONN_HEALTH_CHECKS"]) == (600, True)
