"""Request body parsing for bundles: bounded size, strict JSON, compression.

DRF's own JSON parser reads the whole body before any limit applies and lets
Python's ``json`` accept ``NaN`` and ``Infinity``; a benchmark value of NaN is
not a measurement, so both are refused here with a pointer-shaped error, as
is an object with a key twice (which value was meant?).  Bodies may be sent
``Content-Encoding: gzip`` (every member) or ``deflate`` (zlib, or raw as
some clients send it); any other coding is refused (415) rather than read as
JSON, and a chunked body (no Content-Length) is read to its end.

The body's text is kept on the request (``BODY_TEXT``): an upload stores
the bundle as it was sent (``Submission.bundle``), with no second encoding
of what was just decoded.
"""

from __future__ import annotations

import json
import zlib

from django.conf import settings
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser

from benchdb.api.exceptions import PayloadTooLarge
from benchdb.api.validation import DIGITS
from benchdb.lib.collector import paused_gc

# The attribute of the (DRF) request that holds the JSON text of its body,
# as decoded by ``BundleJSONParser``.
BODY_TEXT = "body_json_text"


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows (no NaN or Infinity)")


def _unique_keys(pairs: list) -> dict:
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def loads_strict(text: str):
    """``json.loads`` that refuses NaN, Infinity, -Infinity and duplicate keys
    (the collector paused: a bundle is thousands of new objects)."""
    with paused_gc():
        return json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
        )


def _inflate(body: bytes, wbits: int, limit: int, coding: str) -> bytes:
    """Every member of a compressed body, at most ``limit`` bytes in all."""
    out, total = [], 0
    while body:
        inflater = zlib.decompressobj(wbits)
        try:
            chunk = inflater.decompress(body, limit + 1 - total)
        except zlib.error as exc:
            raise ParseError(f"Content-Encoding {coding}, but: {exc}") from exc
        total += len(chunk)
        if total > limit or inflater.unconsumed_tail:
            raise PayloadTooLarge(
                f"The body decompresses beyond the limit of {limit} bytes."
            )
        if not inflater.eof:
            raise ParseError(f"Content-Encoding {coding}, but the body is cut short.")
        out.append(chunk)
        # gzip allows several members one after the other (RFC 1952); zlib
        # and raw deflate streams end with the body.
        body = inflater.unused_data if coding == "gzip" else b""
        if inflater.unused_data and coding != "gzip":
            raise ParseError(f"Content-Encoding {coding}, but bytes follow its end.")
    return b"".join(out)


def decode_content(body: bytes, coding: str, limit: int) -> bytes:
    """The body as sent before its Content-Encoding (415 for an unknown one)."""
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return body
    if coding in ("gzip", "x-gzip"):
        return _inflate(body, 16 + zlib.MAX_WBITS, limit, "gzip")
    if coding == "deflate":
        # RFC 9110: zlib format; some clients send raw deflate instead.
        try:
            return _inflate(body, zlib.MAX_WBITS, limit, coding)
        except ParseError:
            return _inflate(body, -zlib.MAX_WBITS, limit, coding)
    raise UnsupportedMediaType(
        coding,
        detail=f"Content-Encoding {coding!r} is not supported: send the body "
        "as is, gzip or deflate.",
    )


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
        if stream is None and "chunked" in meta.get("HTTP_TRANSFER_ENCODING", ""):
            # No Content-Length: Django and DRF see an empty body, but the
            # server (gunicorn) gives the de-chunked body to its end.
            stream = meta.get("wsgi.input")
        if stream is None:
            raise ParseError("The body is empty: send the bundle as JSON.")
        body = read_limited(stream, limit)
        body = decode_content(body, meta.get("HTTP_CONTENT_ENCODING", ""), limit)
        try:
            text = body.decode("utf-8")
            data = loads_strict(text)
        except UnicodeDecodeError as exc:
            raise ParseError(f"The body is not UTF-8: {exc}") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error: {exc}") from exc
        except RecursionError:
            # json's decoder recurses per level: a body of 100,000 "[" would
            # otherwise be a 500.  The contract bounds depth far lower anyway.
            raise ParseError("JSON parse error: nested too deeply") from None
        if request is not None:
            setattr(request, BODY_TEXT, text)
        return data
