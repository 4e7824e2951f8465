"""What the site compresses: every answer to a client that accepts gzip
(Django's ``GZipMiddleware``, with its padding against BREACH), except a
body that is compressed already; a streamed answer at a faster level.

The public dump (``/api/v1/dump/``) is a gzip file and the agent
(``benchdb-agent.pyz``) a zip of deflated files.  Django's middleware
compresses every streamed answer it is allowed to, so a browser's download
of the dump went through gzip a second time: a web worker's CPU for the
whole file, for no byte saved (tests/api/test_dump.py).  Such answers are
sent as they are.

Streamed answers are the exports, up to about 10 MB a page.  Django
compresses at level 6: 238 ms of a web worker's CPU for a 10.6 MB page of
the JSON export, 9 ms for the CSV's first page (1 MB), where level 3 takes
100 and 3.3 ms for 12% and 20% more bytes (bench/README.md, "Compressed
answers").  Pages and API answers are not streamed and stay at level 6:
a page of 130 KB costs about 1 ms, and a phone on a slow link gains its
bytes.
"""

from __future__ import annotations

import gzip
import io
import secrets
from collections.abc import Iterable, Iterator

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


# zlib's level for streamed answers: the last of its fast levels (1 to 3
# skip the lazy match search); 3 wrote 8 to 12% fewer bytes than 1 for the
# exports, in 0.95 to 1.5 times its time (bench/README.md).
STREAM_LEVEL = 3


def gzip_stream(chunks: Iterable[bytes], max_random_bytes: int) -> Iterator[bytes]:
    """``chunks`` as one gzip member at ``STREAM_LEVEL``, a piece per chunk
    as the compressor gives it.  Its header carries a file name of 0 to
    ``max_random_bytes`` - 1 random bytes, as Django's does, so the size of
    an answer says less about what it holds (BREACH)."""
    out = io.BytesIO()
    name = b"a" * secrets.randbelow(max_random_bytes) if max_random_bytes else b""
    with gzip.GzipFile(
        filename=name, mode="wb", compresslevel=STREAM_LEVEL, fileobj=out, mtime=0
    ) as writer:
        for chunk in chunks:
            writer.write(chunk)
            if out.tell():
                yield _taken(out)
    yield _taken(out)


def _taken(out: io.BytesIO) -> bytes:
    data = out.getvalue()
    out.seek(0)
    out.truncate()
    return data


def media_type(response) -> str:
    """The media type of an answer: text/csv for "text/csv; charset=utf-8"."""
    return response.get("Content-Type", "").partition(";")[0].strip().lower()


class Compression(GZipMiddleware):
    """``GZipMiddleware`` that leaves bodies of ``COMPRESSED_TYPES`` alone
    and compresses a streamed answer at ``STREAM_LEVEL``: Django decides
    whether to compress and sets the headers; the stream it would have
    sent at level 6 is replaced, unread, by ``gzip_stream``."""

    def process_response(self, request, response):
        if media_type(response) in COMPRESSED_TYPES:
            return response
        streamed = response.streaming and not response.is_async
        source = response.streaming_content if streamed else None
        response = super().process_response(request, response)
        if streamed and response.get("Content-Encoding") == "gzip":
            response.streaming_content = gzip_stream(source, self.max_random_bytes)
        return response
