"""What a client that accepts gzip is sent (``benchdb/ops/compression.py``):
text compressed, a body compressed already as it is.  The dump's own case
is in tests/api/test_dump.py."""

from __future__ import annotations

import gzip
import zipfile
from io import BytesIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

GZIP = {"HTTP_ACCEPT_ENCODING": "gzip, deflate, br"}


def _body(response) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def test_the_agent_is_sent_as_its_zip_to_a_client_that_accepts_gzip(client):
    plain = client.get("/agent/benchdb-agent.pyz")
    asked = client.get("/agent/benchdb-agent.pyz", **GZIP)
    assert asked.status_code == 200
    assert not asked.has_header("Content-Encoding")
    assert _body(asked) == _body(plain)
    with zipfile.ZipFile(BytesIO(_body(asked))) as pyz:
        assert "__main__.py" in pyz.namelist()


@pytest.mark.parametrize(
    ("url", "marker"),
    [
        ("/runs/", b"</html>"),
        ("/api/v1/runs/?limit=5", b'"results"'),
        ("/api/v1/runs/export/?format=csv", b"run_id,"),
    ],
)
def test_pages_answers_and_exports_are_gzipped(client, url, marker):
    call_command("load_reference")
    response = client.get(url, **GZIP)
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    assert marker in gzip.decompress(_body(response))


def test_a_streamed_export_is_gzipped_whole_at_the_stream_level(client):
    from benchdb.ops.compression import STREAM_LEVEL

    call_command("load_reference")
    url = "/api/v1/runs/export/?format=json"
    plain = _body(client.get(url))
    body = _body(client.get(url, **GZIP))
    assert gzip.decompress(body) == plain
    assert len(plain) > 10_000
    # The same deflate stream as a one-shot gzip at that level, give or take
    # the header's random name (under 100 bytes); level 6's differs by more.
    at_level = len(gzip.compress(plain, STREAM_LEVEL, mtime=0))
    at_six = len(gzip.compress(plain, 6, mtime=0))
    assert at_level - at_six > 1_000
    assert 0 <= len(body) - at_level < 101
