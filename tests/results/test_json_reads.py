"""The runs' and results' JSON columns are read by ``models.read_json``
(orjson, json.loads where orjson would read differently): every value must
be the one Django's json.loads gave, bit for bit, type for type."""

from __future__ import annotations

import decimal
import json
import math
import random
import struct

import pytest
from django.db import connection

from benchdb.results.models import JSONField, Result, Run, read_json
from tests.api.factories import FioRuns, make_bundle


@pytest.fixture(scope="module")
def fio(tmp_path_factory):
    return FioRuns(tmp_path_factory.mktemp("fio"))


def spelled(value) -> str:
    """A value with its types and float bits visible: 1 and 1.0, 0.0 and
    -0.0, NaN all differ; key order counts."""
    return json.dumps(value, allow_nan=True)


def same(text: str) -> None:
    assert spelled(read_json(text)) == spelled(json.loads(text)), text


def numbers(rng: random.Random, count: int) -> list[str]:
    """Floats and integers as JSON text in the spellings PostgreSQL's jsonb
    and Python write: shortest repr, 17 digits, exponents, the exact
    decimal expansion, halfway points, long integers."""
    out = []
    for _ in range(count):
        x = struct.unpack("d", rng.randbytes(8))[0]
        if not math.isfinite(x):
            continue
        out += [repr(x), f"{x:.17e}", f"{x:.25e}"]
        y = rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-12, 12)
        exact = format(decimal.Decimal(y), "f")
        out += [repr(y), exact if "." in exact else exact + ".0"]
        if x:
            after = math.nextafter(x, math.inf)
            mid = (decimal.Decimal(x) + decimal.Decimal(after)) / 2
            out.append(format(mid, "e"))
        out.append(str(rng.randint(-(2**70), 2**70)))
        out.append(str(rng.randint(-(2**63), 2**64)))
    return out


def test_numbers_read_as_json_loads_reads_them():
    rng = random.Random(17)
    values = numbers(rng, 3000)
    for text in values:
        same(text)
    same("[" + ",".join(values) + "]")
    # Integers past 64 bits (orjson: a float), the edges of 64 bits.
    for text in ("18446744073709551616", "-9223372036854775809", "1" + "0" * 300):
        same(text)
        assert type(read_json(text)) is int
    for text in ("18446744073709551615", "-9223372036854775808", "-0", "0", "1E2"):
        same(text)
    assert read_json('{"n": 12345678901234567890}')["n"] == 12345678901234567890
    # Nineteen digits that are no integer (a fraction, an exponent), or an
    # integer of 19 digits after others: the same values.
    for text in (
        "0.1234567890123456789012",
        "[1.5, 12345678901234567890]",
        "1e1234567890123456789",
        '{"a": "x12345678901234567890"}',
    ):
        same(text)


def test_what_orjson_refuses_is_read_by_json_loads():
    for text in ("NaN", "[Infinity, -Infinity]", "1e400", '"\\ud800"', '"a\\u0000b"'):
        same(text)
    assert math.isnan(read_json('{"x": NaN}')["x"])
    with pytest.raises(json.JSONDecodeError):
        read_json("[1, 2")
    # As Django does: text neither can read is returned as it is.
    field = JSONField()
    assert field.from_db_value("[1, 2", None, connection) == "[1, 2"
    assert field.from_db_value(None, None, connection) is None
    assert field.deconstruct()[1] == "django.db.models.JSONField"


def test_strings_and_structure_are_json_loads_own():
    for text in (
        '{"b": 1, "a": [true, false, null, {"é": "✓ \\u2028 \\n \\" \\\\"}]}',
        '{"a": 1, "a": 2}',
        "[]",
        "{}",
        '"\\ud83d\\ude00"',
        '{"sha": "12345678901234567890123", "v": [1.5, -0.0]}',
        " [1] ",
    ):
        same(text)


@pytest.mark.django_db
def test_stored_statistics_read_as_django_read_them(fio):
    """Every JSON column of stored runs and results, read through the
    models, against json.loads of the text PostgreSQL returns."""
    from benchdb.results.ingest import store_bundle

    store_bundle(
        make_bundle(
            fio, tests=("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1"), role="host"
        )
    )
    store_bundle(make_bundle(fio, tags={"note": "é ✓"}))
    Result.objects.filter(pk=Result.objects.order_by("pk").first().pk).update(
        stats={"big": 2**70, "tiny": 5e-324, "neg": -0.0, "n": [1, 1.0, 1e16]}
    )
    checked = 0
    for model, columns in (
        (Result, ("options", "command", "stats")),
        (Run, ("environment", "tags", "tag_sources", "warnings", "suspect_reasons")),
    ):
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, {', '.join(f'{c}::text' for c in columns)} FROM {table}"
            )
            texts = {row[0]: row[1:] for row in cursor.fetchall()}
        for obj in model.objects.order_by("pk"):
            for column, text in zip(columns, texts[obj.pk], strict=True):
                assert spelled(getattr(obj, column)) == spelled(json.loads(text))
                checked += 1
    assert checked == 3 * 3 + 2 * 5
    big = Result.objects.order_by("pk").first().stats
    assert big["big"] == 2**70 and type(big["big"]) is int
