"""What the site compresses: every answer to a client that accepts gzip
(Django's ``GZipMiddleware``, with its padding against BREACH), except a
body that is compressed already.

The public dump (``/api/v1/dump/``) is a gzip file and the agent
(``benchdb-agent.pyz``) a zip of deflated files.  Django's middleware
compresses every streamed answer it is allowed to, so a browser's download
of the dump went through gzip a second time: a web worker's CPU for the
whole file, for no byte saved (tests/api/test_dump.py).  Such answers are
sent as they are.
"""

from __future__ import annotations

from django.middleware.gzip import GZipMiddleware

# Media types whose bodies are compressed already.
COMPRESSED_TYPES = frozenset(
    {
        "application/gzip",
        "application/x-gzip",
        "application/zip",
        "image/png",
        "image/jpeg",
        "image/webp",
        "font/woff2",
    }
)


def media_type(response) -> str:
    """The media type of an answer: text/csv for "text/csv; charset=utf-8"."""
    return response.get("Content-Type", "").partition(";")[0].strip().lower()


class Compression(GZipMiddleware):
    """``GZipMiddleware`` that leaves bodies of ``COMPRESSED_TYPES`` alone."""

    def process_response(self, request, response):
        if media_type(response) in COMPRESSED_TYPES:
            return response
        return super().process_response(request, response)
