"""One contract: the agent and the server accept and refuse the same bundles.

``benchdb_agent.contract.check`` is run by the agent (``bundle.validate``)
and by the server (``api/validation.check_bundle``).  These tests hold the
two to each other through the real upload endpoint, with bundles built from
real fio output and mutated by hypothesis, and check each bad input the
contract now refuses: 400 with a pointer, nothing written.
"""

from __future__ import annotations

import base64
import copy
import datetime
import gzip
import json
import uuid

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Comparison, Measurement, Result, Run, Submission
from benchdb_agent import bundle as agent_bundle
from benchdb_agent import contract, vocab
from tests.api.conftest import token_client
from tests.api.factories import make_bundle, pack

pytestmark = pytest.mark.django_db

URL = "/api/v1/submissions/"
SCHEMA = json.loads(agent_bundle.SCHEMA_PATH.read_text())
READ, WRITE = "fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1"


def counts() -> tuple[int, ...]:
    return (
        Submission.objects.count(),
        Run.objects.count(),
        Result.objects.count(),
        Measurement.objects.count(),
    )


@pytest.fixture
def good(fio):
    return make_bundle(fio, tests=(READ, WRITE))


def post(api, doc=None, raw_body: bytes | None = None):
    """POST a bundle as JSON text with ASCII escapes, as any client may send a
    lone surrogate ("\\ud800"), which UTF-8 itself cannot carry."""
    body = raw_body if raw_body is not None else json.dumps(doc).encode()
    return api.generic("POST", URL, body, content_type="application/json")


def refused(api, doc, pointer: str, raw_body: bytes | None = None) -> dict:
    """POST, expect 400 with ``pointer`` among the errors and nothing stored."""
    before = counts()
    response = post(api, doc, raw_body)
    assert response.status_code == 400, response.content[:2000]
    errors = response.json()["errors"]
    assert pointer in [e["pointer"] for e in errors], errors
    assert counts() == before
    return errors


# The schema file ---------------------------------------------------------------


def test_the_schema_file_is_generated_from_the_contract():
    assert agent_bundle.SCHEMA_PATH.read_text() == contract.schema_text()
    schema = json.loads(agent_bundle.SCHEMA_PATH.read_text())
    props = schema["properties"]
    assert props["role"]["enum"] == [*vocab.values(vocab.ROLE), None]
    tags = props["tags"]["properties"]
    assert tags["cache_mode"]["enum"] == list(vocab.values(vocab.CACHE_MODE))
    assert set(tags) == set(vocab.TAG_VOCABULARIES)
    raw = props["tests"]["items"]["properties"]["repeats"]["items"]["properties"]
    assert raw["raw"]["properties"]["format"]["enum"] == [*contract.RAW_FORMATS, None]
    # One copy only: the docs point at the package's file.
    from tests.conftest import ROOT

    assert not (ROOT / "docs" / "bundle.schema.json").exists()


def test_the_schema_accepts_what_the_contract_accepts(good):
    assert contract.check(good).errors == []
    jsonschema.validate(
        good,
        json.loads(agent_bundle.SCHEMA_PATH.read_text()),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


# The property: agent and server agree ------------------------------------------

# Leaves of a real bundle a mutation may replace, and values worth trying.
PATHS = [
    ("title",),
    ("notes",),
    ("role",),
    ("source",),
    ("pair_id",),
    ("created",),
    ("suite", "profile"),
    ("suite", "version"),
    ("agent", "version"),
    ("environment", "os", "name"),
    ("environment", "cpu", "cores"),
    ("environment", "target", "disk_bus"),
    ("tags", "note"),
    ("tags", "host_filesystem"),
    ("tags", "disk_count"),
    ("tags", "cache_mode"),
    ("tags", "hypervisor_version"),
    ("tests", 0, "test_id"),
    ("tests", 0, "title"),
    ("tests", 0, "direction"),
    ("tests", 0, "extra_repeats"),
    ("tests", 0, "options", "rw"),
    ("tests", 0, "repeats", 0, "index"),
    ("tests", 0, "repeats", 0, "records", 0, "iops"),
    ("tests", 0, "repeats", 0, "records", 0, "direction"),
    ("tests", 0, "repeats", 0, "raw", "format"),
    ("tests", 1, "repeats", 1, "raw", "direction"),
    ("warnings",),
]
TEXT = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "x" * 49, "x" * 51, "x" * 60, "x" * 201, "x" * 2001]),
    st.sampled_from(["a\x00b", "\ud800", "many", "12", "writeback", "read", "ext4"]),
)
VALUES = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e3, max_value=1e31),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b\x00"]), st.integers(0, 3), max_size=2),
)


def mutated(doc: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    out["bundle_id"] = str(uuid.uuid4())
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(PATHS),
    value=VALUES,
    second=st.one_of(st.none(), st.tuples(st.sampled_from(PATHS), VALUES)),
)
def test_the_agent_and_the_server_accept_and_refuse_the_same_bundles(
    api, good, path, value, second
):
    from django.core.cache import cache

    cache.clear()  # the submission throttle counts every example's post
    doc = mutated(good, path, value)
    if second is not None:
        doc = mutated(doc, *second)
    agent_ok = agent_bundle.validate(doc) == []
    response = post(api, doc)
    assert response.status_code in (202, 400), response.content[:500]
    if agent_ok:  # the schema is looser than the contract, never stricter
        jsonschema.validate(doc, SCHEMA)
    assert (response.status_code == 202) == agent_ok, (
        path,
        value,
        second,
        response.json(),
        agent_bundle.validate(doc),
    )


def test_the_unmutated_bundle_is_accepted_by_both(api, good):
    assert agent_bundle.validate(good) == []
    assert api.post(URL, good, format="json").status_code == 202


# What the agent accepted and the server refused (the old drift) ----------------


@pytest.mark.parametrize(
    ("path", "value", "pointer"),
    [
        (("tags", "host_filesystem"), "x" * 60, "/tags/host_filesystem"),
        (("tags", "disk_count"), "many", "/tags/disk_count"),
        (("tests", 0, "title"), "x" * 300, "/tests/0/title"),
        (("tags", "note"), "x" * 2001, "/tags/note"),
    ],
)
def test_the_agent_refuses_what_the_server_refuses(api, good, path, value, pointer):
    doc = mutated(good, path, value)
    assert pointer in [p for p, _m in agent_bundle.validate(doc)]
    refused(api, doc, pointer)


def test_tags_follow_the_same_rules_on_upload_and_on_edit(fio, alice):
    note = "n" * 500
    doc = make_bundle(fio, tags={"note": note})
    assert agent_bundle.validate(doc) == []
    assert agent_bundle.check_tag("note", note) is None
    run = store_bundle(doc, owner=alice)
    client = token_client(alice)
    url = f"/api/v1/runs/{run.pk}/"
    assert client.patch(url, {"tags": {"note": note}}, format="json").status_code == 200
    for key, value in (("note", "n" * 2001), ("host_filesystem", "x" * 60)):
        assert agent_bundle.check_tag(key, value) is not None
        response = client.patch(url, {"tags": {key: value}}, format="json")
        assert response.status_code == 400
        assert response.json()["errors"][0]["pointer"] == f"/tags/{key}"
    response = client.patch(url, {"title": "a\x00b"}, format="json")
    assert response.status_code == 400
    run.refresh_from_db()
    assert run.tags == {"note": note}


# Bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "pointer"),
    [
        (("title",), "evil\x00title", "/title"),
        (("environment", "os", "name"), "Debian\x00", "/environment/os/name"),
        (("tags", "note"), "a\x00", "/tags/note"),
        (("tests", 0, "command", 0), "fio\x00", "/tests/0/command/0"),
        (("environment", "os", "kernel"), "6.1\ud800", "/environment/os/kernel"),
        (("warnings",), [{"code": "x", "message": "\udfff"}], "/warnings/0/message"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_anywhere(api, good, path, value, pointer):
    doc = mutated(good, path, value)
    assert pointer in [p for p, _m in agent_bundle.validate(doc)]
    refused(api, doc, pointer)


def test_a_nul_in_a_key_is_refused(api, good):
    doc = copy.deepcopy(good)
    doc["environment"]["bad\x00key"] = 1
    refused(api, doc, "/environment")


def test_a_body_nested_100000_deep_is_a_400(api, db):
    body = b'{"tests": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    errors = refused(api, None, "", raw_body=body)
    assert "nested" in errors[0]["message"]


def test_a_created_offset_no_place_has_is_refused_at_the_contract(api, good):
    doc = copy.deepcopy(good)
    doc["created"] = "2026-11-27T10:00:00+16:00"  # PostgreSQL refuses it
    errors = refused(api, doc, "/created")
    assert "+14:00" in errors[0]["message"]
    for zone in ("+14:00", "-12:00", "+05:45"):
        doc["created"] = f"2026-11-27T10:00:00{zone}"
        assert contract.parse_datetime(doc["created"]) is not None, zone


@pytest.mark.parametrize(
    "value", ["Samsung\u200b980", "Samsung \u202e089", "Samsung\t980", "a\u2028b"]
)
def test_a_free_text_tag_with_invisible_characters_is_refused(api, good, value):
    doc = copy.deepcopy(good)
    doc["tags"] = {**doc.get("tags", {}), "disk_model": value}
    errors = refused(api, doc, "/tags/disk_model")
    assert "U+" in errors[0]["message"]
    assert contract.check_tag("disk_model", "Samsung 980") is None


def test_a_raw_output_of_another_fio_job_is_refused(api, good):
    doc = copy.deepcopy(good)
    # The write test's raw output placed under the read test, records and all.
    doc["tests"][0]["repeats"][0] = copy.deepcopy(doc["tests"][1]["repeats"][0])
    errors = refused(api, doc, "/tests/0/repeats/0/raw")
    assert any("rw=randwrite" in e["message"] for e in errors), errors


def test_records_that_contradict_their_raw_output_are_refused(api, good):
    doc = copy.deepcopy(good)
    record = doc["tests"][0]["repeats"][1]["records"][0]
    record["iops"] = record["iops"] * 1.1
    pointer = "/tests/0/repeats/1/records/0/iops"
    assert pointer in [p for p, _m in agent_bundle.validate(doc)]
    errors = refused(api, doc, pointer)
    assert any("contradicts the raw output" in e["message"] for e in errors)


def test_a_record_too_many_is_refused(api, good):
    doc = copy.deepcopy(good)
    records = doc["tests"][0]["repeats"][0]["records"]
    records.append(copy.deepcopy(records[0]))
    refused(api, doc, "/tests/0/repeats/0/records")


def test_raw_outputs_inflating_beyond_the_total_are_refused(api, good):
    # 31 repeats, each 16 MiB of text in about 16 KiB of gzip: the bomb of the
    # issue.  Refused by the total long before all of them are inflated.
    doc = copy.deepcopy(good)
    bomb = {
        "format": "fio-json",
        "encoding": "gzip+base64",
        "data": base64.b64encode(
            gzip.compress(b" " * (contract.MAX_RAW_BYTES - 16))
        ).decode(),
    }
    assert len(bomb["data"]) < 40_000
    doc["tests"][0]["repeats"] = [
        {"index": i, "records": [], "raw": bomb} for i in range(31)
    ]
    errors = refused(api, doc, "/tests/0/repeats/4/raw/data")
    assert any("in all" in e["message"] for e in errors)
    checked = contract.check(doc)
    assert checked.raw_bytes <= contract.MAX_TOTAL_RAW_BYTES


def test_each_raw_output_is_decoded_and_parsed_once(good, monkeypatch):
    calls = []
    real = contract.parsers.parse

    def counting(*args, **kwargs):
        calls.append(kwargs.get("source"))
        return real(*args, **kwargs)

    monkeypatch.setattr(contract.parsers, "parse", counting)
    checked = contract.check(good)
    assert checked.errors == []
    assert len(calls) == 6 == len(set(calls)) == len(checked.raws)


def test_a_nul_in_saved_comparison_options_is_a_400(fio, alice):
    run = store_bundle(make_bundle(fio), owner=alice)
    client = token_client(alice)
    for body, pointer in (
        ({"runs": [run.pk], "options": {"metric": "io\x00ps"}}, "/options/metric"),
        ({"runs": [run.pk], "options": {"k\x00": 1}}, "/options"),
        ({"runs": [run.pk], "options": {"m": "\ud800"}}, "/options/m"),
    ):
        response = client.generic(
            "POST",
            "/api/v1/comparisons/",
            json.dumps(body).encode(),
            content_type="application/json",
        )
        assert response.status_code == 400, response.content
        assert response.json()["errors"][0]["pointer"] == pointer
    assert Comparison.objects.count() == 0
    assert pack("x")  # the factories' helper stays importable for others


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-11-28T08:06:38",
        "2026-11-28t08:06:38",
        "2026-11-28 08:06:38",
        "2024-02-29T23:59:59",
        "2026-02-29T00:00:00",
        "2026-11-28T24:00:00",
        "2026-11-28T23:59:60",
        "2026-13-01T00:00:00",
        "0000-01-01T00:00:00",
        "1999-12-31T23:59:59",
        "2026-11-28T08:06:3\u0663",
        "2026-11-28\u00a008:06:38",
    ],
)
def test_a_time_in_z_reads_as_the_same_time_at_plus_zero(stamp):
    """The agent's "...Z" form has a fast path (fromisoformat): the same
    datetime, or the same refusal, as the fields read one by one."""
    for zone in ("Z", "z"):
        got = contract.parse_datetime(stamp + zone)
        assert got == contract.parse_datetime(stamp + "+00:00")
        assert got is None or got.tzinfo is datetime.UTC
