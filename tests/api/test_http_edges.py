"""HTTP at the API's edges: what it reads from a request body (every gzip
member, deflate as zlib or raw, chunked bodies to their end; unknown codings
415 and duplicate JSON keys 400), and JSON for a path no route matches."""

from __future__ import annotations

import gzip
import io
import json
import zlib

import pytest
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.views import APIView

# After DRF's views, which import the parser named in the settings.
from benchdb.api.parsers import BundleJSONParser

assert APIView

DOC = {"bundle_id": "b", "tests": [{"test_id": "t", "repeats": [1, 2, 3]}]}
BODY = json.dumps(DOC).encode()


class Request:
    def __init__(self, **meta):
        self.META = meta


def parse(body: bytes, stream=True, **meta):
    meta.setdefault("CONTENT_LENGTH", str(len(body)))
    context = {"request": Request(**meta)}
    return BundleJSONParser().parse(
        io.BytesIO(body) if stream else None, parser_context=context
    )


def test_gzip_with_a_second_member_is_read_whole():
    half = len(BODY) // 2
    body = gzip.compress(BODY[:half]) + gzip.compress(BODY[half:])
    assert parse(body, HTTP_CONTENT_ENCODING="gzip") == DOC


def test_deflate_is_zlib_and_raw_deflate_is_read_too():
    assert parse(zlib.compress(BODY), HTTP_CONTENT_ENCODING="deflate") == DOC
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = raw.compress(BODY) + raw.flush()
    assert parse(body, HTTP_CONTENT_ENCODING="deflate") == DOC


def test_a_cut_or_trailing_compressed_body_is_refused():
    body = gzip.compress(BODY)
    with pytest.raises(ParseError, match="cut short"):
        parse(body[:-12], HTTP_CONTENT_ENCODING="gzip")
    with pytest.raises(ParseError):
        parse(body + b"junk", HTTP_CONTENT_ENCODING="gzip")


def test_an_unknown_content_encoding_is_refused_not_read_as_json():
    with pytest.raises(UnsupportedMediaType, match="br"):
        parse(BODY, HTTP_CONTENT_ENCODING="br")


def test_a_chunked_body_without_content_length_is_read_to_its_end():
    # As gunicorn hands it over: de-chunked in wsgi.input, no Content-Length,
    # so Django and DRF give the parser no stream.
    body = parse(
        b"",
        stream=False,
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(BODY)},
    )
    assert body == DOC


def test_duplicate_keys_are_refused():
    with pytest.raises(ParseError, match="'bundle_id' appears twice"):
        parse(b'{"bundle_id": "a", "bundle_id": "b"}')
    with pytest.raises(ParseError, match="appears twice"):
        parse(b'{"tests": [{"x": 1, "x": 1}]}')


@pytest.mark.django_db
def test_the_api_answers_415_and_400(api):
    response = api.generic(
        "POST",
        "/api/v1/submissions/",
        BODY,
        content_type="application/json",
        HTTP_CONTENT_ENCODING="compress",
    )
    assert response.status_code == 415
    assert "compress" in response.json()["errors"][0]["message"]
    response = api.generic(
        "POST",
        "/api/v1/submissions/",
        b'{"bundle_id": "a", "bundle_id": "b"}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "appears twice" in response.json()["errors"][0]["message"]


@pytest.mark.django_db
def test_an_api_path_matching_no_route_answers_json_404(client):
    for path in ("/api/v1/nothing-here/", "/api/v2/runs/", "/api/v1/runs/x/y/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json", path
        assert response.json()["errors"][0]["code"] == "not_found"
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
