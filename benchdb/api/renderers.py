"""The API's renderers: JSON (every answer) and CSV (``?format=csv``).

``FastJSONRenderer`` is DRF's JSON renderer written by orjson: the same
bytes, or at least the same JSON value, for every answer (see below).

``CSVRenderer``: views hand it ``{"columns": [...], "rows": [{...}, ...]}``;
an error body (``{"errors": [...]}``) becomes a two-column CSV of pointers
and messages, so a failed export still says what went wrong in the format
asked.
"""

from __future__ import annotations

import csv
import io
from functools import cached_property, partial

import orjson
from rest_framework.renderers import BaseRenderer, JSONRenderer

from benchdb.results import compare
from benchdb.results.exports import csv_cell


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        out = io.StringIO()
        if isinstance(data, dict) and "rows" in data and "columns" in data:
            writer = csv.DictWriter(
                out, fieldnames=data["columns"], extrasaction="ignore"
            )
            writer.writeheader()
            for row in data["rows"]:
                writer.writerow({k: csv_cell(v) for k, v in row.items()})
        elif isinstance(data, dict) and "errors" in data:
            writer = csv.writer(out)
            writer.writerow(["pointer", "message"])
            for error in data["errors"]:
                writer.writerow(
                    [csv_cell(error.get("pointer")), csv_cell(error.get("message"))]
                )
        else:
            writer = csv.writer(out)
            writer.writerow(["detail"])
            writer.writerow([csv_cell(str(data))])
        return out.getvalue().encode(self.charset)


# JSON ------------------------------------------------------------------------
# orjson writes the same JSON as DRF's renderer (Python's json, compact,
# UTF-8, ensure_ascii off), many times faster on a run detail or a
# comparison.  What orjson would write differently is handed to DRF's own
# renderer instead, which then answers (or fails) exactly as before:
# - NaN and infinities: orjson writes null; DRF refuses them (STRICT_JSON)
#   or writes NaN, so a non-finite float anywhere goes to DRF;
# - datetimes, dataclasses: passed through to DRF's encoder (``default``),
#   as are the types orjson does not know (Decimal, lazy strings, sets...);
# - what orjson refuses (integers past 64 bits, non-str keys, surrogates,
#   nesting past 254) and indented output (``; indent=4``, the browsable API).
# Floats are the same shortest round-trip digits; only the spelling of
# 1e-9 <= |x| < 1e-4 differs (0.00001 for 1e-05), the same number.
# tests/api/test_json_renderer.py holds both renderers to the same values.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class NotOrjson(Exception):
    """Raised inside orjson's ``default``: DRF's renderer answers instead."""


def _finite_numbers(values: list) -> bool:
    """True if ``values`` holds only numbers (floats, ints, bools) whose sum
    is finite: then none of them is NaN or infinite.  False otherwise, also
    where it cannot tell (another type inside, or finite numbers whose sum
    overflows): the caller then looks at each value."""
    try:
        total = sum(values, 0.0)
    except (TypeError, OverflowError):  # text, None, containers; huge ints
        return False
    return type(total) is float and total - total == 0.0


def all_finite(value) -> bool:
    """False if a float in ``value``'s dicts, lists and tuples is NaN or
    infinite (x - x is NaN, which is true, for those; 0.0 for the others).
    Other objects are left to ``default``, which checks what DRF's encoder
    makes of them."""
    if not isinstance(value, dict | list | tuple):
        return not (isinstance(value, float) and value - value)
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        container = pop()
        for v in container.values() if isinstance(container, dict) else container:
            t = type(v)
            if t is float:
                if v - v:
                    return False
            elif t is str or v is None or t is int or t is bool:
                continue
            elif t is list and _finite_numbers(v):
                # A comparison's per-repeat values: a list of numbers
                # whose sum is finite holds no NaN or infinity, one C loop
                # instead of one Python step per value.
                continue
            elif isinstance(v, dict | list | tuple):
                push(v)
            elif isinstance(v, float) and v - v:
                return False
    return True


class FastJSONRenderer(JSONRenderer):
    """DRF's ``JSONRenderer`` (same media type, format, settings and
    output), written by orjson; see the note above."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if (
            not self.compact
            or self.ensure_ascii
            or self.get_indent(accepted_media_type, renderer_context or {}) is not None
        ):
            return super().render(data, accepted_media_type, renderer_context)
        # A comparison the memo keeps is written once, its bytes kept with
        # it: a hot comparison's 0.7 MB are not walked (``all_finite``) and
        # written again on every request.
        return compare.derived(
            data,
            "json",
            partial(self._compact, data, accepted_media_type, renderer_context),
        )

    def _compact(self, data, accepted_media_type, renderer_context) -> bytes:
        try:
            if not all_finite(data):
                raise NotOrjson
            out = orjson.dumps(data, default=self._default, option=_ORJSON_OPTIONS)
        except (NotOrjson, orjson.JSONEncodeError):
            return super().render(data, accepted_media_type, renderer_context)
        # DRF escapes these two, so the JSON is also valid JavaScript.  Their
        # last bytes looked for first, one byte each (memchr): the three-byte
        # search stepped through every "…" (e2 80 a6), which a comparison's
        # answer is full of.
        if (b"\xa8" in out or b"\xa9" in out) and (
            b"\xe2\x80\xa8" in out or b"\xe2\x80\xa9" in out
        ):
            out = out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(
                b"\xe2\x80\xa9", b"\\u2029"
            )
        return out

    def _default(self, obj):
        """What DRF's encoder makes of an object orjson hands back (checked
        for non-finite floats, which orjson would write as null)."""
        if isinstance(obj, float):  # a float subclass: json writes its repr
            value = float(obj)
        else:
            value = self._encoder.default(obj)
        if not all_finite(value):
            raise NotOrjson
        return value

    @cached_property
    def _encoder(self):
        return self.encoder_class()
