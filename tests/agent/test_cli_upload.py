"""parse, import and upload through the command line, against a real HTTP server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchdb_agent import bundle

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
AGENT = [sys.executable, "-m", "benchdb_agent"]


def agent(*args, **kw):
    return subprocess.run(
        [*AGENT, *args], capture_output=True, text=True, timeout=120, **kw
    )


class Server:
    """A tiny HTTP server on 127.0.0.1 answering with the statuses it is given."""

    def __init__(self, statuses):
        self.statuses = list(statuses)
        self.received = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append((self.path, dict(self.headers), body))
                status = outer.statuses.pop(0) if outer.statuses else 202
                payload = {"id": 1, "status_url": "/api/v1/submissions/1/"}
                if status >= 400:
                    payload = {"errors": [{"pointer": "/tests", "message": "no"}]}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def imported(tmp_path):
    out = tmp_path / "b.json"
    files = [str(SAMPLES / "dd" / "gnu-c.txt"), str(SAMPLES / "dd" / "gnu-de_de.txt")]
    proc = agent(
        "import",
        *files,
        "--direction",
        "write",
        "--test-id",
        "dd-seq",
        "--tag",
        "cache_mode=writeback",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_parse_prints_the_contract(tmp_path):
    proc = agent("parse", str(SAMPLES / "fio" / "randrw-3.json"))
    doc = json.loads(proc.stdout)
    assert set(doc) == {"tool", "tool_version", "format", "records"}
    assert doc["format"] == "fio-json" and len(doc["records"]) == 2
    bad = tmp_path / "junk.txt"
    bad.write_text("nothing to see")
    proc = agent("parse", str(bad))
    assert proc.returncode == 2 and "junk.txt" in proc.stderr


def test_import_makes_repeats_of_one_test(imported):
    doc = json.loads(imported.read_text())
    assert bundle.validate(doc) == []
    (test,) = doc["tests"]
    assert test["test_id"] == "dd-seq" and len(test["repeats"]) == 2
    assert doc["source"] == "imported" and doc["tags"]["cache_mode"] == "writeback"


def test_upload_sends_with_the_token(imported, tmp_path):
    server = Server([202])
    try:
        proc = agent(
            "upload",
            str(imported),
            "--server",
            server.url,
            "--token",
            "bdt_x",
            "--spool-dir",
            str(tmp_path / "spool"),
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    ((path, headers, body),) = server.received
    assert path == "/api/v1/submissions/"
    assert headers["Authorization"] == "Token bdt_x"
    assert (
        json.loads(body)["bundle_id"] == json.loads(imported.read_text())["bundle_id"]
    )


def test_a_refused_bundle_is_not_retried_nor_spooled(imported, tmp_path):
    server = Server([400])
    spool = tmp_path / "spool"
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
    finally:
        server.close()
    assert proc.returncode == 1 and "refused" in proc.stderr
    assert len(server.received) == 1
    assert list(spool.glob("*.json")) == []


def test_an_unreachable_server_spools_and_pending_resends(imported, tmp_path):
    spool = tmp_path / "spool"
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    proc = agent("upload", str(imported), "--server", dead, "--spool-dir", str(spool))
    assert proc.returncode == 1 and "upload --pending" in proc.stderr
    (kept,) = spool.glob("*.json")
    assert json.loads(kept.read_text()) == json.loads(imported.read_text())
    # The spool remembers the server; --pending with a live one sends and clears.
    server = Server([503, 202])
    try:
        (spool / kept.with_suffix(".server").name).write_text(server.url + "\n")
        proc = agent("upload", "--pending", "--spool-dir", str(spool))
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert len(server.received) == 2  # one 503, retried, then 202
    assert list(spool.glob("*.json")) == []
