"""Exports stream from a plain server-side cursor, page by run-id cursor, share
one column set between the API and the pages, and defuse formulas."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import connection

from benchdb.results import exports
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from tests.api.factories import make_bundle

READ = "fio-rand-read-4k-q1t1"
WRITE = "fio-rand-write-4k-q1t1"


def body(response) -> bytes:
    assert response.status_code == 200, response
    assert response.streaming, "an export must stream"
    return b"".join(response.streaming_content)


def csv_rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body(response).decode())))


@pytest.mark.django_db
def test_pages_chain_by_cursor_and_cover_every_row_once(api, fio):
    runs = [store_bundle(make_bundle(fio, tests=(READ, WRITE))) for _ in range(5)]
    url = "/api/v1/runs/export/?format=csv&limit=2"
    seen, pages = [], 0
    while url:
        response = api.get(url)
        rows = csv_rows(response)
        assert len({r["run_id"] for r in rows}) <= 2
        seen += [(int(r["run_id"]), r["test_id"]) for r in rows]
        link = response.get("Link")
        url = link[1 : link.index(">")] if link else None
        pages += 1
    assert pages == 3
    assert seen == sorted((r.pk, t) for r in runs for t in (READ, WRITE))


@pytest.mark.django_db
def test_json_pages_carry_stats_and_the_next_url(api, fio):
    first, second = (store_bundle(make_bundle(fio)) for _ in range(2))
    doc = json.loads(body(api.get("/api/v1/runs/export/?format=json&limit=1")))
    assert [r["run_id"] for r in doc["rows"]] == [first.pk]
    assert doc["rows"][0]["stats"]["directions"]["read"]["iops"]["n"] == 3
    assert doc["columns"] == list(exports.EXPORT_COLUMNS)
    assert doc["next"].endswith(f"cursor={first.pk}")
    last = json.loads(body(api.get(doc["next"])))
    assert [r["run_id"] for r in last["rows"]] == [second.pk]
    assert last["next"] is None


@pytest.mark.django_db
def test_bad_cursor_or_limit_is_a_clear_400(api, client):
    response = api.get("/api/v1/runs/export/?cursor=abc")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/cursor"
    assert api.get("/api/v1/runs/export/?limit=0").status_code == 400
    assert client.get("/runs/export/?limit=999999").status_code == 400


@pytest.mark.django_db
def test_formulas_are_defused_and_numbers_stay_numbers(api, client, fio):
    store_bundle(make_bundle(fio, tags={"disk_model": "=HYPERLINK(1)"}))
    api_rows = csv_rows(api.get("/api/v1/runs/export/?format=csv"))
    page_rows = csv_rows(client.get("/runs/export/"))
    assert api_rows == page_rows  # one column set, same rows
    assert list(api_rows[0]) == list(exports.EXPORT_COLUMNS)
    assert api_rows[0]["disk_model"] == "'=HYPERLINK(1)"
    assert float(api_rows[0]["iops_mean"]) > 0
    for text in ("+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert exports.csv_cell(text) == "'" + text
    assert exports.csv_cell(-1.5) == -1.5
    assert exports.csv_cell("plain") == "plain"


def test_csv_cells_of_every_type():
    """csv_cell's exact-type shortcuts (str, int, float) and the rest."""
    import datetime as dt
    import uuid
    from decimal import Decimal

    from django.utils.safestring import mark_safe

    moment = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    key = uuid.UUID(int=7)
    cases = [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, 0),
        (7, 7),
        (-2.5, -2.5),
        (Decimal("1.5"), Decimal("1.5")),
        (moment, moment.isoformat()),
        (moment.date(), "2026-01-02"),
        (key, str(key)),
        ("", ""),
        ("-x", "'-x"),
        (mark_safe("=1"), "'=1"),
        (mark_safe("a"), "a"),
    ]
    for value, cell in cases:
        assert exports.csv_cell(value) == cell, value
        # Numbers stay numbers (written unquoted); text is text.
        assert isinstance(exports.csv_cell(value), type(cell)), value


@pytest.mark.django_db
def test_compare_csv_has_one_column_set_for_api_and_page(api, client, fio):
    a, b = (store_bundle(make_bundle(fio)) for _ in range(2))
    url = f"?runs={a.pk},{b.pk}"
    api_head = body(api.get(f"/api/v1/compare/{url}&format=csv")).split(b"\r\n")[0]
    page_head = body(client.get(f"/compare/csv/{url}")).split(b"\r\n")[0]
    assert api_head == page_head == ",".join(exports.COMPARE_COLUMNS).encode()


@pytest.mark.django_db(transaction=True)
def test_rows_come_from_a_cursor_without_hold(fio):
    """In autocommit Django declares its cursors WITH HOLD, which makes
    PostgreSQL copy the whole result before the first row; the export opens
    its own transaction so the cursor is a plain, streaming one."""
    for _ in range(2):
        store_bundle(make_bundle(fio))
    assert connection.get_autocommit()
    rows = exports.result_rows(Run.objects.all())
    first = next(rows)
    with connection.cursor() as cur:
        cur.execute("SELECT is_holdable FROM pg_cursors WHERE NOT is_binary")
        cursors = cur.fetchall()
    rows.close()
    assert first[0] == Run.objects.order_by("pk").first().pk
    assert cursors and all(not holdable for (holdable,) in cursors)
    assert connection.get_autocommit()  # the transaction ended with the rows


@pytest.mark.django_db
def test_an_export_row_is_the_api_rows_fields(api, fio):
    """Every export column is a field of the API's run row or result row
    (exports.EXPORT_RUN, exports.EXPORT_RESULT), written as the API writes
    it: a JSON export's rows and the API's rows of the same runs agree field
    by field, timestamps, baseline and hardware included."""
    host = store_bundle(make_bundle(fio, role="host", pair_id="p", tests=(READ,)))
    guest = store_bundle(make_bundle(fio, pair_id="p", tests=(READ, WRITE)))
    bare = store_bundle(make_bundle(fio, tests=(READ,)))
    Run.objects.filter(pk=bare.pk).update(hardware=None, ran_at=None)
    listed = {r["id"]: r for r in api.get("/api/v1/runs/").json()["results"]}
    doc = json.loads(body(api.get("/api/v1/runs/export/?format=json")))
    assert len(doc["rows"]) == 4
    for row in doc["rows"]:
        run = listed[row["run_id"]]
        detail = api.get(run["url"]).json()
        [test] = [t for t in detail["tests"] if t["test_id"] == row["test_id"]]
        for column, name in exports.EXPORT_RUN.items():
            shown = run if name in run else run["hardware"] or {}
            assert row[column] == shown.get(name), (column, row[column])
        for column, name in exports.EXPORT_RESULT.items():
            assert row[column] == test[name], (column, row[column])
    by_run = {r["run_id"]: r for r in doc["rows"]}
    assert by_run[guest.pk]["baseline_id"] == host.pk
    assert by_run[guest.pk]["created"].endswith("Z")
    assert by_run[bare.pk]["disk_type"] is None and by_run[bare.pk]["ran_at"] is None


def test_a_json_page_writes_each_value_as_json_value_does():
    """orjson writes the rows: datetimes, uuids and decimals as
    ``exports.json_value`` writes them, text as UTF-8, the stats text as it
    was read (or null)."""
    import datetime as dt
    import uuid
    from decimal import Decimal

    when = dt.datetime(2025, 3, 4, 5, 6, 7, 890, tzinfo=dt.UTC)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    columns = ("at", "uuid", "price", "name", "none", "n", "x")
    rows = [
        (when, ident, Decimal("1.50"), "Xeon® — «ç»", None, 3, 0.1, '{"a": [1, 2]}'),
        (when.date(), ident, Decimal("2"), "plain", None, -1, 1e300, None),
    ]
    text = b"".join(exports.json_document(columns, rows, "http://t/?cursor=9"))
    doc = json.loads(text)
    assert doc["columns"] == list(columns)
    assert doc["next"] == "http://t/?cursor=9"
    first, second = doc["rows"]
    assert first == {
        "at": "2025-03-04T05:06:07.000890+00:00",
        "uuid": str(ident),
        "price": "1.50",
        "name": "Xeon® — «ç»",
        "none": None,
        "n": 3,
        "x": 0.1,
        "stats": {"a": [1, 2]},
    }
    assert second["at"] == "2025-03-04" and second["stats"] is None
    assert second["x"] == 1e300 and second["price"] == "2"
    assert json.loads(b"".join(exports.json_document(columns, [], None))) == {
        "columns": list(columns),
        "rows": [],
        "next": None,
    }
