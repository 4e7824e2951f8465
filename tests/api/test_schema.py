"""The published OpenAPI schema: valid, served with local docs, and honoured.

Schemathesis generates requests for every operation from /api/schema/ and
sends them to the application in-process (WSGI, same test database); every
answer must be free of server errors and must match the schema.
"""

from __future__ import annotations

from io import StringIO

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from benchdb.results.ingest import store_bundle
from benchdb.results.models import ApiToken
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

# Examples per operation: enough to reach past validation into the views,
# few enough that the whole run stays around a minute.
EXAMPLES = 30


def test_it_publishes_a_valid_schema_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(out),
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    text = out.read_text()
    for path in (
        "/api/v1/submissions/",
        "/api/v1/compare/",
        "/api/v1/aggregates/",
        "/api/v1/population/compare/",
    ):
        assert path in text


def test_the_docs_page_uses_no_cdn(client):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "drf_spectacular_sidecar" in html
    assert "cdn." not in html and "unpkg" not in html


# Loaded at collection: generating the schema needs no database.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture
def seeded(db, fio, staff):
    """Two public runs of a staff user, and that user's token header, so
    list, detail, compare, edit and moderation answers have content.

    Requests go through the real WSGI handler, which closes the database
    connection when a request ends; Django's test client stops that so the
    test's transaction survives, and so does this fixture.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        for mode in ("none", "writeback"):
            store_bundle(make_bundle(fio, tags={"cache_mode": mode}), owner=staff)
        _token, key = ApiToken.issue(staff, "schemathesis")
        yield {"Authorization": f"Token {key}"}
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=False,
)
def test_the_api_keeps_its_schema_and_never_fails(case, seeded):
    # identity: the WSGI transport hands schemathesis the body as sent, and
    # GZipMiddleware would compress it for a client that accepts gzip.
    case.call_and_validate(
        headers={**seeded, "Accept-Encoding": "identity"},
        checks=[not_a_server_error, response_schema_conformance],
    )
