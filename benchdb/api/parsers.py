"""Request body parsing for bundles: bounded size, strict JSON, optional gzip.

DRF's own JSON parser reads the whole body before any limit applies and lets
Python's ``json`` accept ``NaN`` and ``Infinity``; a benchmark value of NaN is
not a measurement, so both are refused here with a pointer-shaped error.
"""

from __future__ import annotations

import json
import zlib

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from benchdb.api.exceptions import PayloadTooLarge
from benchdb.api.validation import DIGITS


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows (no NaN or Infinity)")


def loads_strict(text: str):
    """``json.loads`` that refuses NaN, Infinity and -Infinity."""
    return json.loads(text, parse_constant=_reject_constant)


def read_limited(stream, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``; PayloadTooLarge beyond it."""
    chunks, total = [], 0
    while True:
        chunk = stream.read(min(65536, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(
                f"The body is larger than the limit of {limit} bytes."
            )
    return b"".join(chunks)


class BundleJSONParser(BaseParser):
    """``application/json`` bodies up to ``BUNDLE_MAX_BYTES`` (also gzip'd)."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.BUNDLE_MAX_BYTES
        request = (parser_context or {}).get("request")
        meta = request.META if request is not None else {}
        length = meta.get("CONTENT_LENGTH") or ""
        if DIGITS.fullmatch(length) and int(length) > limit:
            raise PayloadTooLarge(
                f"The body is {int(length)} bytes; the limit is {limit} bytes."
            )
        if stream is None:
            raise ParseError("The body is empty: send the bundle as JSON.")
        body = read_limited(stream, limit)
        if meta.get("HTTP_CONTENT_ENCODING", "").lower() == "gzip":
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                body = inflater.decompress(body, limit + 1)
            except zlib.error as exc:
                raise ParseError(f"Content-Encoding gzip, but: {exc}") from exc
            if len(body) > limit or inflater.unconsumed_tail:
                raise PayloadTooLarge(
                    f"The body decompresses beyond the limit of {limit} bytes."
                )
        try:
            return loads_strict(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ParseError(f"The body is not UTF-8: {exc}") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error: {exc}") from exc
        except RecursionError:
            # json's decoder recurses per level: a body of 100,000 "[" would
            # otherwise be a 500.  The contract bounds depth far lower anyway.
            raise ParseError("JSON parse error: nested too deeply") from None
