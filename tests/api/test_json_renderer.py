"""The API's JSON is written by orjson (``renderers.FastJSONRenderer``); every
answer must be the JSON DRF's own ``JSONRenderer`` writes: the same bytes,
or, where orjson spells a float differently (1e-9 <= |x| < 1e-4: 0.00001
for 1e-05), the same value.  What DRF refuses (NaN, infinities) it refuses
the same way."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import math
import uuid
from collections import OrderedDict

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from benchdb.api.renderers import FastJSONRenderer, all_finite
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

READ = "fio-rand-read-4k-q1t1"
WRITE = "fio-rand-write-4k-q1t1"


def drf(data, media_type="application/json", context=None) -> bytes:
    return JSONRenderer().render(data, media_type, context or {})


def fast(data, media_type="application/json", context=None) -> bytes:
    return FastJSONRenderer().render(data, media_type, context or {})


def respelled(fast_bytes: bytes) -> bytes:
    """orjson's output with every float spelled as Python's json spells it
    (json.loads reads the exact double, json.dumps writes its repr): the
    same value and key order, DRF's spelling."""
    value = json.loads(fast_bytes)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def has_respelled_float(value) -> bool:
    """A float orjson spells differently from Python's repr (same digits)."""
    if isinstance(value, float):
        return 1e-9 <= abs(value) < 1e-4
    if isinstance(value, dict):
        return any(has_respelled_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_respelled_float(v) for v in value)
    return False


def same_json(data) -> bool:
    """Both renderers on ``data``: the same value always (floats exactly,
    key order included), the same bytes unless a float is spelled
    differently.  True when the bytes are the same."""
    ours, theirs = fast(data), drf(data)
    assert json.loads(ours) == json.loads(theirs)
    assert respelled(ours) == theirs
    if ours == theirs:
        return True
    assert has_respelled_float(json.loads(theirs)), (ours, theirs)
    return False


@pytest.fixture
def runs(fio, alice):
    host = store_bundle(make_bundle(fio, role="host", pair_id="j1", speed="slow"))
    guest = store_bundle(
        make_bundle(
            fio,
            tests=(READ, WRITE, "dd-write-1m-fdatasync"),
            pair_id="j1",
            tags={"cache_mode": "none", "note": "é ✓ \u2028 line"},
            environment={"note": 'a\u2029b \U0001f600 \x01 "q" \\'},
        )
    )
    other = store_bundle(make_bundle(fio, speed="slow", tags={"disk_type": "hdd"}))
    hidden = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=hidden.pk).update(hidden=True, hidden_reason="spam")
    owned = store_bundle(make_bundle(fio, tests=(READ, WRITE)))
    Run.objects.filter(pk=owned.pk).update(owner=alice, title="Mine \u2028")
    return {"host": host, "guest": guest, "other": other, "hidden": hidden}


def test_every_answer_is_drfs_json(api, alice, runs):
    guest, host, other = runs["guest"], runs["host"], runs["other"]
    urls = [
        "/api/v1/runs/",
        "/api/v1/runs/?cache_mode=none&page_size=2",
        f"/api/v1/runs/{guest.pk}/",
        f"/api/v1/runs/{host.pk}/",
        f"/api/v1/runs/{guest.pk}/similar/?test_id={READ}&metric=iops",
        f"/api/v1/runs/{guest.pk}/similar/?test_id={READ}&metric=lat_p99_ns",
        f"/api/v1/compare/?runs={guest.pk},{host.pk},{other.pk}",
        f"/api/v1/aggregates/?test_id={READ}&metric=iops&group_by=cache_mode",
        f"/api/v1/population/?test_id={READ}&metric=iops",
        "/api/v1/hardware/",
        f"/api/v1/hardware/{guest.hardware_id}/",
        "/api/v1/vocabularies/",
        # Errors: validation (pointers), not found, gone, not signed in.
        "/api/v1/compare/?runs=x",
        "/api/v1/compare/?runs=999999",
        "/api/v1/aggregates/?metric=nope",
        "/api/v1/runs/?cache_mode=bogus",
        f"/api/v1/runs/{guest.pk}/similar/?test_id=nope",
        "/api/v1/runs/999999/",
        f"/api/v1/runs/{runs['hidden'].pk}/",
        "/api/v1/runs/?mine=true",
        "/api/v1/tokens/",
    ]
    statuses, byte_equal = set(), 0
    for url in urls:
        response = api.get(url)
        statuses.add(response.status_code)
        assert response["Content-Type"] == "application/json", url
        if isinstance(response.accepted_renderer, FastJSONRenderer):
            assert response.content == fast(response.data), url
        byte_equal += same_json(response.data)
    # The owner's view (their run and their tokens) and a 201 with a key.
    owner = token_client(alice)
    for url in ("/api/v1/runs/?mine=true", "/api/v1/tokens/"):
        response = owner.get(url)
        assert response.status_code == 200
        byte_equal += same_json(response.data)
    # Tokens are created signed in, never with a token (TokensBySessionOnly).
    signed_in = APIClient()
    signed_in.force_login(alice)
    created = signed_in.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert created.status_code == 201 and created.json()["key"]
    byte_equal += same_json(created.data)
    assert {200, 400, 401, 404, 410} <= statuses
    # Most answers hold no float orjson spells differently.
    assert byte_equal >= len(urls) - 6


def test_the_run_detail_is_written_by_orjson_byte_for_byte(api, runs):
    response = api.get(f"/api/v1/runs/{runs['guest'].pk}/")
    assert isinstance(response.accepted_renderer, FastJSONRenderer)
    body = response.json()
    assert len(body["tests"]) == 3
    assert any(t["overhead"] for t in body["tests"])  # with its intervals
    # The separators and escapes of the answer's strings.
    assert b"\\u2028" in response.content and b"\\u2029" in response.content
    assert "\u2028".encode() not in response.content
    assert "é ✓".encode() in response.content
    theirs = drf(response.data)
    if not has_respelled_float(json.loads(theirs)):
        assert response.content == theirs
    else:
        assert respelled(response.content) == theirs


def test_indent_and_the_browsable_api_are_drfs(api, runs):
    url = f"/api/v1/runs/{runs['guest'].pk}/"
    plain = api.get(url)
    for accept in ("application/json; indent=4", "application/json; indent=2"):
        response = api.get(url, HTTP_ACCEPT=accept)
        assert response.status_code == 200
        assert response.content == JSONRenderer().render(plain.data, accept, {})
        assert response.content.startswith(b"{\n  ")
    # indent=0 is no indent (DRF's rule): written by orjson.
    flat = api.get(url, HTTP_ACCEPT="application/json; indent=0")
    assert flat.content == plain.content == fast(plain.data)
    assert respelled(flat.content) == drf(plain.data)
    html = api.get(url, HTTP_ACCEPT="text/html")
    assert html["Content-Type"].startswith("text/html")
    assert "&quot;id&quot;: " in html.content.decode()  # indented by DRF's renderer


class Money(float):
    pass


@dataclasses.dataclass
class Point:
    x: int


def by_orjson(data, monkeypatch) -> bytes:
    """FastJSONRenderer's answer, failing if it handed ``data`` to DRF's."""
    with monkeypatch.context() as patch:
        patch.setattr(JSONRenderer, "render", lambda *a: pytest.fail("DRF's"))
        return fast(data)


def test_types_are_encoded_as_drf_encodes_them(monkeypatch):
    moment = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)
    data = ReturnDict(
        {
            "error": ErrorDetail("bad value", code="invalid"),
            "lazy": gettext_lazy("Write back"),
            "decimal": decimal.Decimal("1.25"),
            "aware": moment,
            "naive": moment.replace(tzinfo=None, microsecond=0),
            "date": moment.date(),
            "time": moment.time(),
            "delta": datetime.timedelta(seconds=90.5),
            "uuid": uuid.UUID(int=7),
            "bytes": b"raw",
            "set": {3},
            "tuple": (1, "two", None, True, False),
            "ordered": OrderedDict([("b", 1), ("a", 2)]),
            "list": ReturnList(
                [1.5, -0.0, 1e300, 5e-324, 123456789012345680.0], serializer=None
            ),
            "money": Money(2.5),
            "small": 1e-5,
            "escapes": '\x00\x1f\x7f"\\/\n\t\u2028\u2029é\U0001f600',
        },
        serializer=None,
    )
    assert not same_json(data)  # 1e-05 is spelled 0.00001
    del data["small"]
    assert same_json(data)
    assert by_orjson(data, monkeypatch) == drf(data)
    assert b'"aware":"2026-01-02T03:04:05.678901Z"' in drf(data)
    # What orjson refuses is DRF's to write: the same bytes.
    for odd in ({1: "int key"}, {"big": 2**70}, [[[[{"deep": 1}]]]] * 2):
        assert same_json(odd)
    assert fast(None) == b"" == drf(None)
    # What DRF's encoder refuses, refused the same way.
    for bad in (Point(1), object()):
        with pytest.raises(TypeError) as ours:
            fast({"a": bad})
        with pytest.raises(TypeError) as theirs:
            drf({"a": bad})
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(UnicodeEncodeError):
        fast({"a": "\ud800"})


@pytest.mark.parametrize(
    "bad",
    [
        math.nan,
        math.inf,
        -math.inf,
        Money(math.nan),
        decimal.Decimal("NaN"),
        decimal.Decimal("-Infinity"),
        {math.inf},
    ],
)
def test_nan_and_infinity_are_refused_as_drf_refuses_them(bad):
    """orjson would write null: the answer fails loudly instead (STRICT_JSON),
    wherever the value sits."""
    for data in (
        bad,
        [1, bad],
        {"a": {"b": [0.5, (bad,)]}},
        ReturnDict({"x": bad}, serializer=None),
    ):
        with pytest.raises(ValueError) as theirs:
            drf(data)
        with pytest.raises(ValueError) as ours:
            fast(data)
        assert str(ours.value) == str(theirs.value)
        assert "Out of range float values are not JSON compliant" in str(ours.value)
    assert all_finite({"a": [0.5, (1e308, -0.0)], "b": None})
    assert not all_finite({"a": [0.5, (1e308, math.nan)]})


def test_without_strict_json_nan_is_written_as_drf_writes_it():
    class Loose(FastJSONRenderer):
        strict = False

    class LooseDRF(JSONRenderer):
        strict = False

    data = {"a": [1.0, math.nan, -math.inf]}
    ours = Loose().render(data, "application/json", {})
    assert ours == LooseDRF().render(data, "application/json", {})
    assert ours == b'{"a":[1.0,NaN,-Infinity]}'


@pytest.mark.parametrize(
    ("values", "finite"),
    [
        ([0.5, 2, True, -0.0], True),
        ([1e308, 1e308], True),  # the sum overflows: each value is looked at
        ([-1e308, -1e308, 5e-324], True),
        ([10**400, 1.0], True),  # an int past a float: looked at one by one
        ([1.0, None, "x", [2.0]], True),
        ([1.0, math.nan], False),
        ([math.inf, -math.inf], False),
        ([1e308, 1e308, math.nan], False),
        ([1.0, None, math.inf], False),
        ([1.0, [2.0, [math.nan]]], False),
        ([Money(1.0), Money(math.inf)], False),
    ],
)
def test_lists_of_numbers_are_checked_at_once_and_exactly(values, finite):
    """``all_finite`` sums a list of numbers in one step (a comparison's
    per-repeat values); where the sum cannot tell (it overflows, or the list
    holds other things) it looks at each value: the answer is the same."""
    assert all_finite({"values": values}) is finite
    assert all_finite([values]) is finite
