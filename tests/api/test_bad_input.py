"""Every kind of bad upload answers 400/413 with pointers and stores nothing."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import uuid

import pytest

from benchdb.api import validation
from benchdb.results.models import Measurement, Result, Run, Submission
from benchdb_agent import contract
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

URL = "/api/v1/submissions/"


def counts() -> tuple[int, ...]:
    return (
        Submission.objects.count(),
        Run.objects.count(),
        Result.objects.count(),
        Measurement.objects.count(),
    )


@pytest.fixture
def good(fio):
    return make_bundle(fio, tests=("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1"))


def post_raw(api, body: bytes, content_type="application/json", **extra):
    return api.generic("POST", URL, body, content_type=content_type, **extra)


def mutate(bundle: dict, path: str, value) -> dict:
    """A copy of ``bundle`` with the JSON pointer ``path`` set to ``value``."""
    doc = copy.deepcopy(bundle)
    parts = path.strip("/").split("/")
    target = doc
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


# (pointer to change, new value, pointer expected in the errors)
FIELD_CASES = [
    ("/schema_version", 2, "/schema_version"),
    ("/schema_version", "1", "/schema_version"),
    ("/bundle_id", "not-a-uuid", "/bundle_id"),
    ("/bundle_id", 12, "/bundle_id"),
    ("/created", "yesterday", "/created"),
    ("/created", "2999-01-01T00:00:00Z", "/created"),
    ("/suite", {"id": "benchdb-standard", "version": "1"}, "/suite/profile"),
    ("/role", "hypervisor", "/role"),
    ("/source", "published", "/source"),
    ("/pair_id", "has spaces", "/pair_id"),
    ("/tags", {"cache_mode": "turbo"}, "/tags/cache_mode"),
    ("/tags", {"colour": "blue"}, "/tags/colour"),
    ("/tags", {"disk_count": "-3"}, "/tags/disk_count"),
    ("/tags", {"disk_count": "\u00b9"}, "/tags/disk_count"),
    ("/tags", {"hypervisor_version": "x" * 101}, "/tags/hypervisor_version"),
    ("/tags", {"note": 5}, "/tags/note"),
    ("/environment/virtualization/type", "warp", "/environment/virtualization/type"),
    ("/environment/target/disk_bus", "firewire", "/environment/target/disk_bus"),
    ("/environment/cpu/sockets", -1, "/environment/cpu/sockets"),
    ("/environment/memory_bytes", "lots", "/environment/memory_bytes"),
    ("/environment/os/name", "x" * 5000, "/environment/os/name"),
    ("/tests", [], "/tests"),
    ("/tests", "fio", "/tests"),
    ("/tests/0/test_id", "", "/tests/0/test_id"),
    ("/tests/0/test_id", "fio randread; rm -rf", "/tests/0/test_id"),
    ("/tests/1/test_id", "fio-rand-read-4k-q1t1", "/tests/1/test_id"),
    ("/tests/0/tool", "bonnie", "/tests/0/tool"),
    ("/tests/0/direction", "sideways", "/tests/0/direction"),
    # Not text: refused as such, not a 500 from the tool version's major.
    ("/tests/0/tool_version", 3, "/tests/0/tool_version"),
    ("/tests/0/tool_version", ["fio-3.33"], "/tests/0/tool_version"),
    ("/tests/0/repeats", [], "/tests/0/repeats"),
    ("/tests/0/extra_repeats", -1, "/tests/0/extra_repeats"),
    ("/tests/0/preconditioned", "no", "/tests/0/preconditioned"),
    ("/tests/0/repeats/0/index", 1, "/tests/0/repeats/1/index"),
    ("/tests/0/repeats/0/records/0/iops", -5.0, "/tests/0/repeats/0/records/0/iops"),
    ("/tests/0/repeats/0/records/0/iops", "fast", "/tests/0/repeats/0/records/0/iops"),
    (
        "/tests/0/repeats/0/records/0/bw_bytes",
        1e30,
        "/tests/0/repeats/0/records/0/bw_bytes",
    ),
    (
        "/tests/0/repeats/0/records/0/direction",
        "sideways",
        "/tests/0/repeats/0/records/0/direction",
    ),
    ("/tests/0/repeats/0/raw", None, "/tests/0/repeats/0/raw"),
    (
        "/tests/0/repeats/0/raw/format",
        "atto-bmk",
        "/tests/0/repeats/0/raw/format",
    ),
    ("/tests/0/repeats/0/raw/data", "!!not base64!!", "/tests/0/repeats/0/raw/data"),
    (
        "/tests/0/repeats/0/raw/data",
        base64.b64encode(b"not gzip").decode(),
        "/tests/0/repeats/0/raw/data",
    ),
    (
        "/tests/0/repeats/2/raw",
        {"format": "fio-json", "encoding": "plain", "data": '{"jobs": 3}'},
        "/tests/0/repeats/2/raw",
    ),
]


@pytest.mark.parametrize(("path", "value", "pointer"), FIELD_CASES)
def test_it_refuses_a_bad_field_with_its_pointer(api, good, path, value, pointer):
    before = counts()
    response = api.post(URL, mutate(good, path, value), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert pointer in [e["pointer"] for e in errors], errors
    assert all(e["message"] for e in errors)
    assert counts() == before


def test_it_refuses_malformed_json(api, db):
    before = counts()
    response = post_raw(api, b'{"schema_version": 1, "tests": [')
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == ""
    assert "JSON" in response.json()["errors"][0]["message"]
    assert counts() == before


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_it_refuses_nan_and_infinity(api, good, constant):
    text = json.dumps(good).replace('"iops": ', f'"iops": {constant}, "was": ', 1)
    before = counts()
    response = post_raw(api, text.encode())
    assert response.status_code == 400
    assert constant.lstrip("-") in response.json()["errors"][0]["message"]
    assert counts() == before


@pytest.mark.parametrize("body", [b"[]", b"42", b'"bundle"', b"null", b"{}"])
def test_it_refuses_a_body_that_is_not_a_bundle(api, db, body):
    before = counts()
    response = post_raw(api, body)
    assert response.status_code == 400
    assert response.json()["errors"]
    assert counts() == before


def test_it_refuses_a_body_over_the_limit_with_413(api, good, settings):
    settings.BUNDLE_MAX_BYTES = 10_000
    body = json.dumps(good).encode()
    assert len(body) > 10_000
    before = counts()
    response = post_raw(api, body)
    assert response.status_code == 413
    assert "10000" in response.json()["errors"][0]["message"]
    assert counts() == before


def test_it_refuses_a_gzip_body_that_inflates_over_the_limit(api, db, settings):
    settings.BUNDLE_MAX_BYTES = 50_000
    bomb = gzip.compress(b'{"x": "' + b"a" * 5_000_000 + b'"}')
    assert len(bomb) < 50_000
    before = counts()
    response = post_raw(api, bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert counts() == before


def test_it_accepts_a_gzip_body(api, good, settings):
    response = post_raw(
        api, gzip.compress(json.dumps(good).encode()), HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 202, response.content


def test_it_refuses_too_many_tests(api, good):
    doc = copy.deepcopy(good)
    first = doc["tests"][0]
    doc["tests"] = [
        {**first, "test_id": f"t{i}"} for i in range(validation.MAX_TESTS + 1)
    ]
    before = counts()
    response = api.post(URL, doc, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/tests"
    assert counts() == before


def test_it_refuses_too_many_repeats(api, good):
    doc = copy.deepcopy(good)
    rep = doc["tests"][0]["repeats"][0]
    doc["tests"][0]["repeats"] = [
        {**rep, "index": i} for i in range(validation.MAX_REPEATS + 1)
    ]
    before = counts()
    response = api.post(URL, doc, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/tests/0/repeats"
    assert counts() == before


def test_it_refuses_a_raw_that_inflates_beyond_the_raw_limit(api, good, monkeypatch):
    monkeypatch.setattr(contract, "MAX_RAW_BYTES", 1000)
    before = counts()
    response = api.post(URL, good, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/tests/0/repeats/0/raw/data"
    assert counts() == before


def test_it_refuses_an_unknown_visibility(api, good):
    before = counts()
    response = api.post(f"{URL}?visibility=secret", good, format="json")
    assert response.status_code == 400
    assert counts() == before


def test_it_refuses_anonymous_uploads_when_the_setting_says_so(api, good, settings):
    settings.ALLOW_ANONYMOUS_SUBMISSIONS = False
    before = counts()
    response = api.post(URL, good, format="json")
    assert response.status_code == 401
    assert counts() == before


def test_it_refuses_a_revoked_token(api, good, alice):
    from benchdb.results.models import ApiToken

    token, key = ApiToken.issue(alice, "old")
    ApiToken.objects.filter(pk=token.pk).update(revoked="2026-01-01T00:00:00Z")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    before = counts()
    response = api.post(URL, good, format="json")
    assert response.status_code == 401
    assert counts() == before


def test_it_throttles_submissions_per_address(api, good, monkeypatch):
    from benchdb.api.throttling import SubmissionAddressThrottle

    monkeypatch.setattr(SubmissionAddressThrottle, "rate", "2/hour", raising=False)
    statuses = []
    for _ in range(3):
        doc = copy.deepcopy(good)
        doc["bundle_id"] = str(uuid.uuid4())
        statuses.append(api.post(URL, doc, format="json").status_code)
    assert statuses == [202, 202, 429]
    assert Submission.objects.count() == 2


def test_it_needs_the_direction_of_a_dd_test_to_parse_it(api, fio):
    bundle = make_bundle(fio, tests=("dd-write-1m-fdatasync",))
    assert bundle["tests"][0]["direction"] == "write"
    blind = copy.deepcopy(bundle)
    del blind["tests"][0]["direction"]
    before = counts()
    response = api.post(URL, blind, format="json")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["pointer"] == "/tests/0/repeats/0/raw"
    assert "read or write" in error["message"]
    assert counts() == before
    assert api.post(URL, bundle, format="json").status_code == 202
