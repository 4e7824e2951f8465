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
converted as the compiler converts them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from django.db import connections
from django.db.models import QuerySet

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


class Compiled:
    """``build(shape, **values)``, a ``values_list()`` query set, run as SQL
    compiled once per ``shape``: what its SQL depends on besides ``values``
    (which must be ints, floats or strings given to lookups as parameters).
    The caller is what vouches that nothing else (a reader, a setting) changes
    the SQL; ``rows`` returns what the query set would."""

    def __init__(self, build: Callable[..., QuerySet]):
        self.build = build
        self._sql: dict[Hashable, tuple | None] = {}

    def _compile(self, shape: Hashable, values: dict) -> tuple | None:
        stand_ins = {
            name: _stand_in(i, value) for i, (name, value) in enumerate(values.items())
        }
        qs = self.build(shape, **stand_ins)
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
        select = [column for column, _sql, _alias in compiler.select]
        converters = list(compiler.get_converters(select).items())
        return qs.db, sql, tuple(params), places, converters

    def rows(self, shape: Hashable, **values) -> list[tuple]:
        if shape not in self._sql:
            self._sql[shape] = self._compile(shape, values)
        compiled = self._sql[shape]
        if compiled is None:
            return list(self.build(shape, **values))
        db, sql, params, places, converters = compiled
        params = list(params)
        for name, value in values.items():
            for i in places[name]:
                params[i] = value
        connection = connections[db]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if not converters:
            return rows
        # As the compiler's results_iter converts them (apply_converters).
        out = []
        for row in rows:
            row = list(row)
            for i, (functions, expression) in converters:
                for convert in functions:
                    row[i] = convert(row[i], expression, connection)
            out.append(tuple(row))
        return out
