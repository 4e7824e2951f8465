"""Exports: CSV and JSON streamed in constant memory, one column set for all.

A run-list export is one row per run and test (``EXPORT_COLUMNS``): fields of
the API's run row and result row (``results.rows``), read and written as
those rows write them, under the export's column names.  The same columns in
the API (``/api/v1/runs/export/``), the browse page's download
(``/runs/export/``) and the worker's full dump (``tasks.public_dump``).  A
comparison's CSV has its own single column set (``COMPARE_COLUMNS``), shared by
the API and the compare page.

How it stays in constant memory:

- rows come from one ``values_list`` query (only the exported columns, never
  the raw outputs) read through a server-side cursor *inside a transaction*:
  Django opens its named cursors ``WITH HOLD`` in autocommit, which makes
  PostgreSQL materialise the whole result before the first row; inside a
  transaction the cursor is a plain one and rows flow as they are found;
- responses are ``StreamingHttpResponse`` generators writing 64 KiB chunks;
- filtered exports are pages of at most ``limit`` runs (all of their tests),
  chained by a keyset cursor on the run id (``?cursor=<last run id>``, given
  in the ``Link: <...>; rel="next"`` header and in JSON's ``next``), so no
  request holds a database snapshot for the whole table; everything at once
  is the worker's compressed dump, served as a file (``/api/v1/dump/``).

A CSV cell that a spreadsheet would run as a formula (starting with ``=``,
``+``, ``-``, ``@``, tab or carriage return) is written with a leading ``'``
(OWASP "CSV injection"); numbers are written as numbers.
"""

from __future__ import annotations

import csv
import datetime as dt
import uuid
from collections.abc import Iterable, Iterator
from decimal import Decimal

import orjson
from django.db import transaction
from django.db.models import Case, F, Q, QuerySet, TextField, When
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse

from benchdb.results import rows
from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.results.vocab import COLUMN_PATHS, Visibility

# One row per run and test.  The run's columns lead: export column -> the
# run row's field (``rows.RUN_FIELDS``; a setting kept on the hardware: the
# hardware row's, ``rows.HARDWARE_FIELDS``); "baseline" is the listed one.
EXPORT_RUN = {
    "run_id": "id",
    "run_uuid": "uuid",
    "created": "created",
    "ran_at": "ran_at",
    # Every setting a run keeps as a column, in the vocabulary's order.
    **{name: name for name in COLUMN_PATHS},
    "suite_id": "suite_id",
    "suite_version": "suite_version",
    "suspect": "suspect",
    # A baseline's id only where the baseline is listed itself.
    "baseline_id": "baseline",
}
# The result's columns follow: export column -> the result row's field
# (``rows.RESULT_FIELDS``).
EXPORT_RESULT = {
    name: name
    for name in ("test_id", "comparability_key", "tool", "repeat_count")
    + tuple(METRIC_COLUMNS.values())
}
EXPORT_COLUMNS = (*EXPORT_RUN, *EXPORT_RESULT)


def _run_field(name: str) -> rows.Field:
    """The run row's field ``name``: its path from Run and its writer."""
    if name == "baseline":
        return "listed_baseline_id", None
    if name in rows.RUN_FIELDS:
        return rows.RUN_FIELDS[name]
    path, write = rows.HARDWARE_FIELDS[name]
    return f"hardware__{path}", write


# Export column -> (ORM path from Run, writer), and from Result.
RUN_EXPORT = {column: _run_field(name) for column, name in EXPORT_RUN.items()}
RESULT_EXPORT = {
    column: rows.RESULT_FIELDS[name] for column, name in EXPORT_RESULT.items()
}
RUN_PATHS = tuple(path for path, _write in RUN_EXPORT.values())
RESULT_PATHS = tuple(path for path, _write in RESULT_EXPORT.values())


def _writer(spec: dict[str, rows.Field]):
    """A tuple of ``spec``'s paths' values -> the tuple of its fields as
    written (``rows.fields``), the values without a writer as they are."""
    writes = [(i, write) for i, (_path, write) in enumerate(spec.values()) if write]

    def write(values: tuple) -> tuple:
        out = list(values)
        for i, w in writes:
            out[i] = w(out[i])
        return tuple(out)

    return write


_write_run = _writer(RUN_EXPORT)
_write_result = _writer(RESULT_EXPORT)


# A comparison flattened: one row per test, metric and run (API and page).
COMPARE_COLUMNS = (
    "test_id",
    "comparability_key",
    "metric",
    "unit",
    "run",
    "reference",
    "n",
    "mean",
    "stdev",
    "ci95_low",
    "ci95_high",
    "ci95_too_wide",
    "delta_percent",
    "gmean",
    "ratio",
    "ratio_low",
    "ratio_high",
    "ratio_too_wide",
    "p_value",
    "p_adjusted",
    "verdict",
    "verdict_text",
)

# Runs per page of a filtered export (all of each run's tests).
PAGE_RUNS = 100
MAX_PAGE_RUNS = 1000
CHUNK_BYTES = 64 * 1024
CURSOR_ROWS = 2000
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ExportError(ValueError):
    """A bad export parameter (cursor, limit), with the parameter's name."""

    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter


def csv_cell(value) -> str | int | float:
    """A value as a CSV cell: numbers as numbers, text defused."""
    # The common exact types first (text, numbers: most cells of an export),
    # without the isinstance chain, which every cell would walk.
    kind = type(value)
    if kind is str:
        return "'" + value if value.startswith(FORMULA_START) else value
    if kind is int or kind is float:
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    text = str(value)
    if text.startswith(FORMULA_START):
        return "'" + text
    return text


def json_value(value):
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    return value


def result_rows(runs: QuerySet, *, stats: bool = False) -> Iterator[tuple]:
    """Tuples in ``EXPORT_COLUMNS`` order (plus the stats as JSON text when
    asked) for every result of ``runs``, ordered by run id and test id.

    A server-side cursor inside a transaction: rows stream as PostgreSQL finds
    them, ``CURSOR_ROWS`` at a time.  Iterate to the end or close the
    generator (a closed generator ends the transaction).
    """
    from benchdb.results.models import Result

    qs = Result.objects.filter(run__in=runs.order_by().values("pk")).annotate(
        listed_baseline_id=Case(
            When(
                Q(run__baseline__visibility=Visibility.PUBLIC)
                & Q(run__baseline__hidden=False),
                then=F("run__baseline_id"),
            ),
            default=None,
        )
    )
    if stats:
        # The statistics as PostgreSQL's JSON text: spliced into the output
        # as they are, never decoded and encoded again in Python.
        qs = qs.annotate(stats_text=Cast("stats", TextField()))
    run_paths = [
        path if path == "listed_baseline_id" else f"run__{path}" for path in RUN_PATHS
    ]
    paths = [*run_paths, *RESULT_PATHS] + (["stats_text"] if stats else [])
    qs = qs.order_by("run_id", "test_id").values_list(*paths)
    n_run, n_result = len(RUN_PATHS), len(RESULT_PATHS)
    with transaction.atomic():
        for row in qs.iterator(chunk_size=CURSOR_ROWS):
            yield (
                _write_run(row[:n_run])
                + _write_result(row[n_run : n_run + n_result])
                + row[n_run + n_result :]
            )


def page_rows(run_ids: list[int], *, stats: bool = False) -> Iterator[tuple]:
    """``result_rows`` of one export page's runs (ids from ``page_of_runs``),
    the same tuples: the runs' columns read once per run (one query, at most
    ``MAX_PAGE_RUNS`` rows), then their results' columns streamed through a
    server-side cursor, each row the run's columns followed by the result's.

    Joined per result, every row carried its run's columns again: 24 copies
    of each run's two timestamps, uuid and names parsed by psycopg per run.
    """
    prefix, results = _page_parts(run_ids, stats)
    n = len(RESULT_PATHS)
    for run_id, *rest in results:
        yield prefix[run_id] + _write_result(tuple(rest[:n])) + tuple(rest[n:])


def page_csv_lines(run_ids: list[int]) -> Iterator[str]:
    """``csv_lines(EXPORT_COLUMNS, page_rows(run_ids))``, with each run's
    columns made into CSV once: a row is its run's cells, then its result's
    (cells are quoted one by one, so the two halves join with a comma)."""
    writer = csv.writer(_Line())
    yield writer.writerow(list(EXPORT_COLUMNS))
    prefix, results = _page_parts(run_ids, False)
    heads = {
        run_id: writer.writerow([csv_cell(v) for v in row])[:-2] + ","
        for run_id, row in prefix.items()
    }
    text = _text_cells()
    for run_id, *cells in results:
        # The numbers as read (csv writes them, and None as an empty cell, as
        # csv_cell does); the text cells defused.
        for i in text:
            cells[i] = csv_cell(cells[i])
        yield heads[run_id] + writer.writerow(cells)


def _text_cells() -> list[int]:
    """The places in ``RESULT_EXPORT``'s columns of those to go through
    ``csv_cell``: all but the float and integer model fields written as read
    or by ``rows._float`` (float or None: the cell ``csv_cell`` would make)."""
    from django.db import models

    from benchdb.results.models import Result

    numbers = (models.FloatField, models.IntegerField)  # not BooleanField
    return [
        i
        for i, (path, write) in enumerate(RESULT_EXPORT.values())
        if "__" in path
        or write not in (None, rows._float)
        or not isinstance(Result._meta.get_field(path), numbers)
    ]


def _page_parts(run_ids: list[int], stats: bool) -> tuple[dict, Iterator[tuple]]:
    """(run id -> the run's export columns as written, the results' rows:
    run id, then the result's columns as read, ordered by run and test id,
    streamed)."""
    from benchdb.results.models import Result, Run

    runs = (
        Run.objects.filter(pk__in=run_ids)
        .order_by()
        .annotate(
            listed_baseline_id=Case(
                When(
                    Q(baseline__visibility=Visibility.PUBLIC)
                    & Q(baseline__hidden=False),
                    then=F("baseline_id"),
                ),
                default=None,
            )
        )
        .values_list(*RUN_PATHS)
    )
    prefix = {row[0]: _write_run(row) for row in runs}
    qs = Result.objects.filter(run_id__in=list(prefix))
    if stats:
        qs = qs.annotate(stats_text=Cast("stats", TextField()))
    paths = ["run_id", *RESULT_PATHS] + (["stats_text"] if stats else [])
    qs = qs.order_by("run_id", "test_id").values_list(*paths)

    def stream() -> Iterator[tuple]:
        with transaction.atomic():
            yield from qs.iterator(chunk_size=CURSOR_ROWS)

    return prefix, stream()


def page_of_runs(
    runs: QuerySet, cursor: str | None, limit: str | int | None
) -> tuple[list[int], int | None]:
    """The run ids of one export page (ascending) and the next page's cursor.

    One small query over run ids: ``limit + 1`` ids after ``cursor``.
    """
    after = 0
    if cursor not in (None, ""):
        try:
            after = int(cursor)
        except (TypeError, ValueError):
            raise ExportError("cursor", "cursor must be a run id") from None
        if after < 0:
            raise ExportError("cursor", "cursor must be a run id")
    size = PAGE_RUNS
    if limit not in (None, ""):
        try:
            size = int(limit)
        except (TypeError, ValueError):
            raise ExportError("limit", "limit must be a whole number") from None
        if not 1 <= size <= MAX_PAGE_RUNS:
            raise ExportError("limit", f"limit must be within 1..{MAX_PAGE_RUNS}")
    ids = list(
        runs.order_by()
        .filter(pk__gt=after)
        .order_by("pk")
        .values_list("pk", flat=True)[: size + 1]
    )
    if len(ids) > size:
        return ids[:size], ids[size - 1]
    return ids, None


def _chunks(pieces: Iterable[str]) -> Iterator[bytes]:
    """``_byte_chunks`` of text pieces, encoded as UTF-8."""
    return _byte_chunks(piece.encode("utf-8") for piece in pieces)


def _byte_chunks(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Pieces joined into chunks of about ``CHUNK_BYTES`` each."""
    buf: list[bytes] = []
    size = 0
    for piece in pieces:
        buf.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(buf)
            buf, size = [], 0
    if buf:
        yield b"".join(buf)


class _Line:
    """A file-like object whose write returns the line (csv.writer target)."""

    def write(self, value: str) -> str:
        return value


def csv_lines(columns: Iterable[str], rows: Iterable[Iterable]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(list(columns))
    for row in rows:
        yield writer.writerow([csv_cell(v) for v in row])


def _json_default(value):
    """What orjson hands back (with its datetimes passed through): written
    as ``json_value`` and then ``json.dumps(default=str)`` would write it."""
    value = json_value(value)
    return value if isinstance(value, str) else str(value)


# The JSON of a row: orjson, with datetimes (and anything it does not know)
# written by ``_json_default`` as ``json_value`` writes them.
_ROW_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME


def json_document(
    columns: tuple[str, ...], rows: Iterable[tuple], next_url: str | None
) -> Iterator[bytes]:
    """``{"columns": [...], "rows": [{...}, ...], "next": url}`` piece by piece
    (UTF-8); a value after the columns' (when present) is the ``stats`` JSON
    text.  Each row is written by orjson in one call (compact, UTF-8; NaN
    and infinities, which no stored figure holds, as null): Python's json
    with ``json_value`` per cell was most of a page's time."""
    yield b'{"columns":' + orjson.dumps(list(columns)) + b',"rows":['
    n = len(columns)
    dumps, default = orjson.dumps, _json_default
    separator = b""
    for row in rows:
        text = dumps(dict(zip(columns, row, strict=False)), default, _ROW_OPTIONS)
        if len(row) > n:
            stats = row[n]
            text = b"".join(
                (text[:-1], b',"stats":', stats.encode() if stats else b"null", b"}")
            )
        yield separator + text
        separator = b","
    yield b'],"next":' + orjson.dumps(next_url) + b"}"


def run_export_response(
    request, runs: QuerySet, fmt: str, filename: str = "benchdb-runs"
) -> StreamingHttpResponse:
    """One page of a run-list export, streamed (``fmt``: csv or json).

    Raises ExportError for a bad ``cursor`` or ``limit`` parameter.
    """
    ids, next_cursor = page_of_runs(
        runs, request.GET.get("cursor"), request.GET.get("limit")
    )
    next_url = None
    if next_cursor is not None:
        query = request.GET.copy()
        query["cursor"] = str(next_cursor)
        next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    if fmt == "csv":
        body = page_csv_lines(ids)
        response = StreamingHttpResponse(
            _chunks(body), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    else:
        body = json_document(EXPORT_COLUMNS, page_rows(ids, stats=True), next_url)
        response = StreamingHttpResponse(
            _byte_chunks(body), content_type="application/json"
        )
    if next_url:
        response["Link"] = f'<{next_url}>; rel="next"'
        response["X-Next-Cursor"] = str(next_cursor)
    response["X-Page-Runs"] = str(len(ids))
    return response


def comparison_rows(result: dict) -> Iterator[tuple]:
    """A comparison (``compare.build_comparison``) as ``COMPARE_COLUMNS`` rows.

    An interval too wide to mean anything (``stats.too_wide``) is written as
    empty cells with its ``*_too_wide`` flag true, never as its bounds: a
    spreadsheet would take them for a measurement (the API keeps them)."""
    from benchdb.results import stats

    for test in result["tests"]:
        for metric in test["metrics"]:
            for entry in metric["runs"]:
                row = {
                    "test_id": test["test_id"],
                    "comparability_key": test["comparability_key"],
                    "metric": metric["metric"],
                    "unit": metric["unit"],
                    "reference": result["reference"],
                    **entry,
                }
                for low, high, flag in (
                    ("ci95_low", "ci95_high", "ci95_too_wide"),
                    ("ratio_low", "ratio_high", "ratio_too_wide"),
                ):
                    row[flag] = stats.too_wide(row.get(low), row.get(high))
                    if row[flag]:
                        row[low] = row[high] = None
                yield tuple(row.get(c) for c in COMPARE_COLUMNS)


def comparison_csv_response(
    result: dict, filename: str = "benchdb-comparison"
) -> StreamingHttpResponse:
    body = csv_lines(COMPARE_COLUMNS, comparison_rows(result))
    response = StreamingHttpResponse(
        _chunks(body), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    return response
