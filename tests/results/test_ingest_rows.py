"""Every stored column of an ingested bundle, against what ingest stored
before it was made set-based and faster (issue 17).

``ingest_rows.json.gz`` was written by ``store_bundle`` at commit f89158f
(results by ``bulk_create``, every raw output re-parsed in the worker) from
the bundles below: a real full-profile bundle of tests/samples (up to 10
repeats a test) and variants of both samples (the standard profile's tests
only; a host run; plain-text raw outputs; records sent without raw outputs
by staff).  Any change to the ingest path must store exactly these rows,
whether the worker parses the raw outputs or takes what the API's check
parsed; ids (and the timestamps of the insert) are left out, foreign keys
are replaced by what they point to.

Regenerate (only for an intended change of the stored figures, said in the
commit) with ``BENCHDB_REGEN_INGEST_ROWS=1 pytest tests/results/test_ingest_rows.py``.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import os
import uuid
from pathlib import Path

import pytest
from django.db import connection

from benchdb.results import ingest
from benchdb.results.ingest import parsed_of, store_bundle
from benchdb.results.models import Measurement, RawOutput, Result, Run
from benchdb_agent import contract, suite

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"
GOLDEN = Path(__file__).resolve().parent / "ingest_rows.json.gz"
REGEN = os.environ.get("BENCHDB_REGEN_INGEST_ROWS") == "1"


def _sample(name: str) -> dict:
    with gzip.open(SAMPLES / f"{name}.json.gz", "rt") as fh:
        return json.load(fh)


def _bundle_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"benchdb-test-ingest-rows:{label}"))


def _standard(bundle: dict) -> dict:
    keep = {t["test_id"] for t in suite.tests_for("standard")}
    out = copy.deepcopy(bundle)
    out["tests"] = [
        dict(t, repeats=t["repeats"][:3]) for t in out["tests"] if t["test_id"] in keep
    ]
    out["suite"]["profile"] = "standard"
    return out


def _host(bundle: dict) -> dict:
    out = copy.deepcopy(bundle)
    out["role"] = "host"
    out["tags"] = {"disk_count": "1", "raid_level": "none"}
    out["pair_id"] = "rows-pair"
    return out


def _plain(bundle: dict) -> dict:
    out = copy.deepcopy(bundle)
    for test in out["tests"]:
        for repeat in test["repeats"]:
            raw = repeat.get("raw")
            if raw and raw.get("encoding") == "gzip+base64":
                text = gzip.decompress(base64.b64decode(raw["data"])).decode()
                raw.update(encoding="plain", data=text)
    return out


def _published(bundle: dict) -> dict:
    out = copy.deepcopy(bundle)
    out["source"] = "published"
    out["citation"] = "A document"
    for test in out["tests"]:
        for repeat in test["repeats"]:
            repeat.pop("raw", None)
    return out


def cases() -> dict[str, tuple[dict, dict]]:
    """label -> (bundle, store_bundle keyword arguments)."""
    none, writeback = _sample("full-none"), _sample("full-writeback")
    out = {
        "full-none": (none, {}),
        "standard-none": (_standard(none), {"visibility": "unlisted"}),
        "standard-writeback-host": (_host(_standard(writeback)), {}),
        "standard-none-plain": (_plain(_standard(none)), {}),
        "standard-writeback-published": (_published(_standard(writeback)), {}),
    }
    for label, (bundle, _kw) in out.items():
        bundle["bundle_id"] = _bundle_id(label)
        if label != "standard-writeback-host":
            bundle["pair_id"] = "rows-pair" if "none" in label else None
    return out


def _plain_value(value):
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _raw_row(raw: RawOutput, exact_gzip: bool) -> dict:
    data = bytes(raw.data_gzip)
    text_sha = hashlib.sha256(gzip.decompress(data)).hexdigest()
    row = {
        c: _plain_value(getattr(raw, c))
        for c in _columns(RawOutput, {"id", "result", "data_gzip"})
    }
    # The stored gzip holds the text the sha256 column names; and, when the
    # bundle sent gzip, it is the bundle's own stream byte for byte (a plain
    # raw output is compressed at ingest, with the time in its header).
    row["data_gzip"] = {"gunzip_is_sha256": text_sha == raw.sha256}
    if exact_gzip:
        row["data_gzip"]["sha256_16"] = hashlib.sha256(data).hexdigest()[:16]
    return row


def _columns(model, exclude: set[str]) -> list[str]:
    return [
        f.attname
        for f in model._meta.concrete_fields
        if f.attname not in exclude and f.name not in exclude
    ]


# JSON columns are compared as PostgreSQL's text of them (jsonb_text).
RUN_JSON = {"environment", "tags", "tag_sources", "warnings", "suspect_reasons"}
RESULT_JSON = {"options", "command", "stats"}


def stored_rows(run: Run, exact_gzip: bool = True) -> dict:
    """Every column of the run and of its results, measurements and raw
    outputs, as plain JSON values; ids and insert timestamps left out."""
    run = Run.objects.select_related("hardware", "baseline").get(pk=run.pk)
    run_cols = _columns(
        Run, {"id", "created", "updated", "hardware", "baseline", *RUN_JSON}
    )
    out = {"run": {c: _plain_value(getattr(run, c)) for c in run_cols}}
    out["run"]["baseline"] = str(run.baseline.uuid) if run.baseline else None
    hw = run.hardware
    out["hardware"] = (
        None
        if hw is None
        else {
            **{
                c: _plain_value(getattr(hw, c))
                for c in _columns(type(hw), {"id", "cpu_model", "disk_model"})
            },
            "cpu_model": hw.cpu_model.name if hw.cpu_model else None,
            "disk_model": hw.disk_model.name if hw.disk_model else None,
        }
    )
    results = {}
    for res in Result.objects.filter(run=run).order_by("test_id"):
        # main_values is stats cut by a trigger (tests/api/test_main_values.py),
        # overhead names the baseline's id (tests/api/test_stored_overheads.py).
        cols = _columns(Result, {"id", "run", "main_values", "overhead", *RESULT_JSON})
        results[res.test_id] = {c: _plain_value(getattr(res, c)) for c in cols}
        results[res.test_id]["measurements"] = [
            {
                c: _plain_value(getattr(m, c))
                for c in _columns(Measurement, {"id", "result"})
            }
            for m in Measurement.objects.filter(result=res).order_by(
                "repeat", "direction", "job"
            )
        ]
        results[res.test_id]["raw_outputs"] = [
            _raw_row(r, exact_gzip)
            for r in RawOutput.objects.filter(result=res).order_by("repeat")
        ]
    out["results"] = results
    # What PostgreSQL holds, not only what Python reads back: the JSON text
    # of every jsonb column (numbers as stored).
    with connection.cursor() as cur:
        cur.execute(
            "SELECT test_id, options::text, command::text, stats::text "
            "FROM results_result WHERE run_id = %s ORDER BY test_id",
            [run.pk],
        )
        out["jsonb_text"] = [list(row) for row in cur.fetchall()]
        cur.execute(
            "SELECT environment::text, tags::text, tag_sources::text, "
            "warnings::text, suspect_reasons::text FROM results_run WHERE id = %s",
            [run.pk],
        )
        out["run_jsonb_text"] = list(cur.fetchone())
    return out


def ingest_all(with_parsed: bool = False) -> dict:
    """Store every case; ``with_parsed``: as the worker does after an upload,
    with what the API's check parsed (``parsed_of``), and then neither
    decoding nor parsing a raw output again."""
    got = {}
    for label, (bundle, kwargs) in cases().items():
        parsed = None
        if with_parsed:
            checked = contract.check(bundle, allow_published="published" in label)
            assert not checked.errors, (label, checked.errors[:3])
            # Through JSON, as it is stored with the submission.
            parsed = json.loads(json.dumps(parsed_of(checked)))
        with pytest.MonkeyPatch.context() as patch:
            if with_parsed:
                patch.setattr(ingest.parsers, "parse", _not_again)
                patch.setattr(ingest.gzip, "decompress", _not_again)
            got[label] = store_bundle(copy.deepcopy(bundle), parsed=parsed, **kwargs)
    # Stored after every bundle: pairing links the runs stored before.
    return {
        label: stored_rows(run, exact_gzip="plain" not in label)
        for label, run in got.items()
    }


def _not_again(*args, **kwargs):
    raise AssertionError("a raw output the check parsed was parsed again")


@pytest.mark.parametrize("with_parsed", [False, True], ids=["reparse", "parsed"])
def test_stored_rows_are_unchanged(with_parsed):
    got = json.loads(json.dumps(ingest_all(with_parsed)))
    if REGEN and not with_parsed:
        with gzip.open(GOLDEN, "wt") as fh:
            json.dump(got, fh, sort_keys=True, separators=(",", ":"))
        pytest.skip("regenerated " + str(GOLDEN))
    with gzip.open(GOLDEN, "rt") as fh:
        want = json.load(fh)
    assert sorted(got) == sorted(want)
    for label in want:
        w, g = want[label], got[label]
        assert g["run"] == w["run"], label
        assert g["hardware"] == w["hardware"], label
        assert g["run_jsonb_text"] == w["run_jsonb_text"], label
        assert g["jsonb_text"] == w["jsonb_text"], label
        assert sorted(g["results"]) == sorted(w["results"]), label
        for test_id, row in w["results"].items():
            assert g["results"][test_id] == row, (label, test_id)
