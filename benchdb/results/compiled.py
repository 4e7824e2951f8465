"""Queries whose SQL is compiled once per shape, run with each request's values.

Building and compiling a query set costs Django more than PostgreSQL takes to
answer a lookup of one row by its id (a run to rank among similar systems:
its visibility rule, three subqueries for its result; a run page's nearest
runs, a window of one key's index).  ``Compiled`` keeps the
query set's definition where it is (``build``) and compiles it once per
shape: with stand-ins for the values that change between requests, whose
places among the SQL's parameters it notes; a request puts its values in
those places.  A query whose SQL would not take them as parameters (a value
written into the SQL) is compiled on every call, as before; its columns are
converted as the compiler converts them.  ``list_statements``: a list's
count, estimate and page (``reads.IdPaginator``'s queries) compiled alike.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import NamedTuple

import psycopg
from django.db import connections
from django.db.models import QuerySet

_TIMESTAMPTZ = psycopg.adapters.get_loader(
    psycopg.postgres.types["timestamptz"].oid, psycopg.pq.Format.TEXT
)

# Stand-ins: values no request gives (ids are positive; test ids printable;
# figures are not negative, and none is this one).
_INT = -2_000_000_000
_STR = "\x1e{}\x1e"
_FLOAT = -1.2345678901234567e299


def _stand_in(index: int, value):
    if isinstance(value, float):
        return _FLOAT * (index + 1)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"no stand-in for {type(value).__name__}")
    return _INT - index if isinstance(value, int) else _STR.format(index)


def _holds_stand_in(param) -> bool:
    if isinstance(param, str):
        return "\x1e" in param
    if isinstance(param, list | tuple):
        return any(_holds_stand_in(p) for p in param)
    return False


class Statement(NamedTuple):
    """A query's SQL compiled with stand-ins (``statement``): its parameters,
    the places of each stand-in among them, its columns' names (a
    ``values()`` query's) and their converters."""

    db: str
    sql: str
    params: tuple
    places: dict[str, list[int]]
    names: tuple[str, ...]
    converters: list


def statement(qs: QuerySet, stand_ins: dict) -> Statement | None:
    """``qs``'s SQL with the places of ``stand_ins`` (name -> a ``_stand_in``)
    among its parameters; None when a stand-in is not a parameter of its own
    (written into the SQL, or into another parameter: a LIKE pattern)."""
    compiler = qs.query.get_compiler(qs.db)
    sql, params = compiler.as_sql()
    places = {}
    for name, stand_in in stand_ins.items():
        places[name] = [
            i
            for i, p in enumerate(params)
            if type(p) is type(stand_in) and p == stand_in
        ]
        if not places[name] or str(stand_in) in sql:
            return None
    placed = {i for found in places.values() for i in found}
    if any(_holds_stand_in(p) for i, p in enumerate(params) if i not in placed):
        return None
    query = qs.query
    names = (*query.extra_select, *query.values_select, *query.annotation_select)
    select = [column for column, _sql, _alias in compiler.select]
    converters = list(compiler.get_converters(select).items())
    return Statement(qs.db, sql, tuple(params), places, names, converters)


def execute(stmt: Statement, values: dict, sql: str | None = None) -> list[tuple]:
    """The rows of ``stmt`` (or of ``sql``, its text changed, the same
    parameters) with ``values`` in their places, converted as the compiler
    converts them."""
    params = params_of(stmt, values)
    connection = connections[stmt.db]
    with connection.cursor() as cursor:
        if connection.timezone_name == "UTC":
            # Django reads timestamptz with its own subclass of psycopg's
            # loader (to set the time zone it wants), which psycopg runs in
            # Python: a third of a run list page's reading.  psycopg's own
            # (C) loader gives the same datetimes in a session whose time
            # zone is UTC (Django sets the session's to connection.timezone).
            cursor.cursor.adapters.register_loader("timestamptz", _TIMESTAMPTZ)
        cursor.execute(stmt.sql if sql is None else sql, params)
        rows = cursor.fetchall()
    if not stmt.converters:
        return rows
    # As the compiler's results_iter converts them (apply_converters).
    out = []
    for row in rows:
        row = list(row)
        for i, (functions, expression) in stmt.converters:
            for convert in functions:
                row[i] = convert(row[i], expression, connection)
        out.append(tuple(row))
    return out


class Compiled:
    """``build(shape, **values)``, a ``values_list()`` query set, run as SQL
    compiled once per ``shape``: what its SQL depends on besides ``values``
    (which must be ints, floats or strings given to lookups as parameters).
    The caller is what vouches that nothing else (a reader, a setting) changes
    the SQL; ``rows`` returns what the query set would."""

    def __init__(self, build: Callable[..., QuerySet]):
        self.build = build
        self._sql: dict[Hashable, Statement | None] = {}

    def _compile(self, shape: Hashable, values: dict) -> Statement | None:
        stand_in = stand_ins(values)
        return statement(self.build(shape, **stand_in), stand_in)

    def rows(self, shape: Hashable, **values) -> list[tuple]:
        if shape not in self._sql:
            self._sql[shape] = self._compile(shape, values)
        compiled = self._sql[shape]
        if compiled is None:
            return list(self.build(shape, **values))
        return execute(compiled, values)


def stand_ins(values: dict) -> dict:
    """A stand-in (``_stand_in``) for each of ``values``, by name."""
    return {name: _stand_in(i, value) for i, (name, value) in enumerate(values.items())}


def params_of(stmt: Statement, values: dict) -> list:
    """``stmt``'s parameters with ``values`` in their places."""
    params = list(stmt.params)
    for name, value in values.items():
        for i in stmt.places[name]:
            params[i] = value
    return params


# A page's ids sliced [_OFFSET : _OFFSET + _LIMIT] when its SQL is compiled:
# numbers no page asks for, whose LIMIT and OFFSET text each page replaces.
_LIMIT, _OFFSET = 900_000_007, 800_000_000_009
_WINDOW = f"LIMIT {_LIMIT} OFFSET {_OFFSET}"


class ListStatements(NamedTuple):
    """A list's queries as ``reads.IdPaginator`` sends them, compiled: its
    rows counted up to a cap (``reads.bounded_count``), its primary keys
    (for ``reads.estimated_count``'s EXPLAIN) and a page's rows by its ids
    (``page_sql``)."""

    count: Statement
    pks: Statement
    page: Statement

    def page_sql(self, bottom: int, top: int) -> str:
        """The page's SQL for the list's rows ``bottom`` to ``top`` (top >
        bottom), with the LIMIT and OFFSET Django writes for that slice."""
        window = f"LIMIT {top - bottom}" + (f" OFFSET {bottom}" if bottom else "")
        return self.page.sql.replace(_WINDOW, window)


def list_statements(
    qs: QuerySet, rows_of: Callable[[QuerySet], QuerySet], stand_in: dict, cap: int
) -> ListStatements | None:
    """The ``ListStatements`` of ``qs`` (a filtered, ordered list built with
    ``stand_in``'s values), ``rows_of`` making a page's ``values()`` query
    from a query set of its ids; None where a stand-in is not a parameter."""
    pks = qs.order_by().values("pk")
    count = statement(pks[: cap + 1], stand_in)
    every = statement(pks, stand_in)
    page = statement(rows_of(qs.values("pk")[_OFFSET : _OFFSET + _LIMIT]), stand_in)
    if count is None or every is None or page is None:
        return None
    if page.sql.count(_WINDOW) != 1:
        return None
    # As QuerySet.count() counts a sliced query.
    count = count._replace(
        sql=f"SELECT COUNT(*) FROM ({count.sql}) subquery", names=(), converters=[]
    )
    return ListStatements(count, every, page)
