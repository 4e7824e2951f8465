"""The harness asks as a browser asks: every timed GET says it accepts a
gzip answer, so the service's compression is in the figures (issue 35)."""

from __future__ import annotations

import base64
import gzip
import http.server
import os
import threading

from bench import timing


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict] = []
    # Random text: its gzip is longer than one 64 KiB read, so the trailer
    # is read across reads.
    page = base64.b64encode(os.urandom(90_000))
    body = gzip.compress(page)

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).seen.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_a_timed_get_asks_for_gzip_and_counts_the_page_s_bytes():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        server = object.__new__(timing.Server)  # no gunicorn: only its client
        server.port = httpd.server_address[1]
        status, size, seconds = server.get("/runs/")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert status == 200
    assert _Recorder.seen[-1].get("Accept-Encoding") == "gzip"
    # The page's own size (from the gzip trailer), not the bytes sent.
    assert 1 << 16 < len(_Recorder.body) < len(_Recorder.page)
    assert size == len(_Recorder.page) == 120_000
    assert seconds > 0
