"""The upload keeps what its check parsed; the worker stores it (issue 17).

The API's check (``contract.check``) decodes and parses every raw output of
an upload; ``Submission.parsed`` keeps those records, and the ingest task
stores them instead of parsing the same outputs again.  What the worker's own
parse used to refuse is refused by the API first, so no submission reaches a
worker without it; a submission without ``parsed`` (or parsed by other
parsers) is parsed by the worker as before.
"""

from __future__ import annotations

import base64
import copy
import gc
import gzip
import json
import re
import uuid
from pathlib import Path
from unittest import mock

import pytest
from django.db import connection

from benchdb.api import views as api_views
from benchdb.api.validation import check_upload
from benchdb.results import ingest, tasks
from benchdb.results.ingest import IngestError, parsed_of, reparse_test
from benchdb.results.models import Measurement, Submission, read_json
from benchdb_agent import contract, parsers
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

TESTS = ("fio-rand-read-4k-q1t1", "dd-write-1m-fdatasync")


def _measurements(run_id: int) -> list[tuple]:
    return list(
        Measurement.objects.filter(result__run_id=run_id)
        .order_by("result__test_id", "repeat", "direction", "job")
        .values_list(
            "result__test_id",
            "repeat",
            "direction",
            "job",
            "iops",
            "bw_bytes",
            "lat_mean_ns",
            "clat_p99_ns",
            "runtime_s",
        )
    )


def _not_again(*args, **kwargs):
    raise AssertionError("a raw output the API parsed was parsed again")


def test_the_upload_keeps_what_its_check_parsed_and_the_worker_stores_it(
    fio, alice, monkeypatch
):
    bundle = make_bundle(fio, tests=TESTS)
    response = token_client(alice).post("/api/v1/submissions/", bundle, format="json")
    assert response.status_code == 202, response.content
    sub = Submission.objects.get(bundle_id=bundle["bundle_id"])
    want = json.loads(json.dumps(parsed_of(contract.check(bundle))))
    assert sub.parsed == want
    assert len(sub.parsed["raws"]) == 6  # every repeat's raw output

    with monkeypatch.context() as patch:
        patch.setattr(ingest.parsers, "parse", _not_again)
        patch.setattr(ingest.gzip, "decompress", _not_again)
        tasks.ingest.run(sub.pk)
    sub.refresh_from_db()
    assert sub.status == "done", sub.errors

    # The same bundle parsed by the worker itself stores the same figures.
    again = dict(copy.deepcopy(bundle), bundle_id=str(uuid.uuid4()))
    other = Submission.objects.create(bundle_id=again["bundle_id"], bundle=again)
    tasks.ingest.run(other.pk)
    other.refresh_from_db()
    assert other.status == "done", other.errors
    assert _measurements(sub.run_id) == _measurements(other.run_id)
    assert len(_measurements(sub.run_id)) == 6


def test_records_of_other_parsers_are_not_used(fio):
    bundle = make_bundle(fio, tests=TESTS)
    parsed = parsed_of(contract.check(bundle))
    # As if another version of the parsers had read these outputs.
    parsed["parsers"] = "0" * 64
    for _digest, records in parsed["raws"].values():
        for record in records:
            record[2:] = [1.0] * (len(record) - 2)
    sub = Submission.objects.create(
        bundle_id=bundle["bundle_id"], bundle=bundle, parsed=parsed
    )
    tasks.ingest.run(sub.pk)
    sub.refresh_from_db()
    assert sub.status == "done", sub.errors
    assert all(row[4] != 1.0 for row in _measurements(sub.run_id))

    reference = dict(copy.deepcopy(bundle), bundle_id=str(uuid.uuid4()))
    plain = Submission.objects.create(
        bundle_id=reference["bundle_id"], bundle=reference
    )
    tasks.ingest.run(plain.pk)
    plain.refresh_from_db()
    assert _measurements(sub.run_id) == _measurements(plain.run_id)


def _raw(bundle: dict, t: int = 0, r: int = 0) -> dict:
    return bundle["tests"][t]["repeats"][r]["raw"]


def _bad_base64(b):
    _raw(b)["data"] = "not base64 !"


def _not_gzip(b):
    _raw(b)["data"] = base64.b64encode(b"plain bytes").decode()


def _not_utf8(b):
    _raw(b)["data"] = base64.b64encode(gzip.compress(b"\xff\xfe\xfa")).decode()


def _does_not_parse(b):
    _raw(b)["data"] = base64.b64encode(gzip.compress(b"{ not fio")).decode()


def _no_direction(b):
    # dd does not say whether it read or wrote: the test must.
    b["tests"][1].pop("direction", None)
    for repeat in b["tests"][1]["repeats"]:
        repeat["raw"].pop("direction", None)
        repeat["records"] = []


def _unknown_encoding(b):
    _raw(b)["encoding"] = "zstd"


@pytest.mark.parametrize(
    "tamper",
    [
        _bad_base64,
        _not_gzip,
        _not_utf8,
        _does_not_parse,
        _no_direction,
        _unknown_encoding,
    ],
)
def test_what_the_worker_would_refuse_the_api_refuses_first(fio, alice, tamper):
    """Each way the worker's own parse fails (IngestError) is a 400 at upload:
    no submission with it is stored, so none reaches a worker, whether sent
    by the API's enqueue, a resend or ``requeue_stale`` (which re-queue
    stored rows only)."""
    bundle = make_bundle(fio, tests=TESTS)
    tamper(bundle)
    failed = False
    for t, test in enumerate(bundle["tests"]):
        try:
            reparse_test(test, f"/tests/{t}")
        except (IngestError, ValueError, KeyError):
            failed = True
    assert failed, "the worker's parse accepts this bundle"
    assert contract.check(bundle).errors
    response = token_client(alice).post("/api/v1/submissions/", bundle, format="json")
    assert response.status_code == 400, response.content
    assert not Submission.objects.filter(bundle_id=bundle["bundle_id"]).exists()


SAMPLES = Path(__file__).resolve().parent.parent / "samples"
JSON_SAMPLES = [
    *(("fio-json", p) for p in sorted((SAMPLES / "fio").glob("*.json*"))),
    *(("ioping-json", p) for p in sorted((SAMPLES / "ioping").glob("*.json"))),
    *(("yabs-json", p) for p in sorted((SAMPLES / "yabs").glob("*.json"))),
]


@pytest.mark.parametrize(("fmt", "path"), JSON_SAMPLES, ids=lambda v: str(v)[-40:])
def test_raw_json_read_by_orjson_parses_to_the_same_records(fmt, path):
    """The API's check reads raw JSON outputs with ``read_json``: the same
    records, number types included, as the agent's ``json.loads`` gives."""
    text = path.read_text()
    variants = [text]
    if fmt == "fio-json":
        # Lines after the document (orjson refuses them: json's decoder
        # reads it), and an integer past 64 bits (orjson: a float).
        variants += [text + "\nfio: file hash not empty on exit\n"]
        variants += [
            re.sub(r'"io_bytes" : \d+', '"io_bytes" : 12345678901234567890123', text)
        ]
    for variant in variants:
        reads = []

        def loads(doc, reads=reads):
            reads.append(len(doc))
            return read_json(doc)

        fast = parsers.parse(variant, fmt, source="x", direction="read", loads=loads)
        plain = parsers.parse(variant, fmt, source="x", direction="read")
        assert reads, "the JSON was not read by the given loads"
        assert repr(fast) == repr(plain)


def test_the_upload_pauses_the_collector_and_leaves_it_running(fio, alice):
    """The upload runs with the cyclic collector paused (its walks over a
    bundle's objects were a sixth of the request), and leaves it on whatever
    the answer: 202, or a 400 raised from inside."""
    client = token_client(alice)
    bundle = make_bundle(fio, tests=TESTS)
    bad = dict(copy.deepcopy(bundle), bundle_id=str(uuid.uuid4()), created="no")
    for doc, code in ((bundle, 202), (bad, 400)):
        assert gc.isenabled()
        with mock.patch.object(
            api_views, "check_upload", side_effect=_checked_without_gc
        ):
            response = client.post("/api/v1/submissions/", doc, format="json")
        assert response.status_code == code, response.content
        assert gc.isenabled()


def _checked_without_gc(doc, **kwargs):
    assert not gc.isenabled(), "the collector runs during the upload's check"
    return check_upload(doc, **kwargs)


def test_the_upload_stores_the_bundle_as_sent(fio, alice):
    """``Submission.bundle`` is the body's JSON text as sent (kept as
    ``json`` by PostgreSQL, not encoded again by the view, not parsed into
    jsonb): the same value as the decoded document, whatever the body's
    spacing and key order; the worker is given the same values."""
    bundle = make_bundle(fio, tests=TESTS)
    bundle["title"] = 'é \u2603 \\ " /'
    body = json.dumps(dict(reversed(bundle.items())), indent=3, ensure_ascii=True)
    response = token_client(alice).post(
        "/api/v1/submissions/", body, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    sub = Submission.objects.get(bundle_id=bundle["bundle_id"])
    assert sub.bundle == json.loads(body) == bundle
    assert sub.parsed == json.loads(json.dumps(parsed_of(contract.check(bundle))))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_typeof(bundle)::text, bundle::text FROM results_submission "
            "WHERE id = %s",
            [sub.pk],
        )
        assert cursor.fetchone() == ("json", body)
    seen = {}
    store = tasks.store_bundle

    def spy(doc, **kwargs):
        seen.update(bundle=doc, parsed=kwargs["parsed"])
        return store(doc, **kwargs)

    with mock.patch.object(tasks, "store_bundle", spy):
        tasks.ingest.run(sub.pk)
    sub.refresh_from_db()
    assert sub.status == "done", sub.errors
    assert seen == {"bundle": sub.bundle, "parsed": sub.parsed}
