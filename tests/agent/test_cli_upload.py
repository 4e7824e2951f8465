"""parse, import and upload through the command line, against a real HTTP server."""

from __future__ import annotations

import gzip
import json
import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchdb_agent import bundle

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


class Server:
    """A tiny HTTP server on 127.0.0.1 answering with the statuses it is given."""

    def __init__(self, statuses, headers=None, ingest=("done",), payloads=None):
        self.statuses = list(statuses)
        self.payloads = list(payloads or [])
        self.polls = []
        self.headers = dict(headers or {})
        self.ingest = list(ingest)
        self.received = []
        self.polled = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)  # as benchdb reads it
                outer.received.append((self.path, dict(self.headers), body))
                status = outer.statuses.pop(0) if outer.statuses else 202
                payload = {"id": 1, "status_url": "/api/v1/submissions/1/"}
                if status >= 400:
                    payload = {"errors": [{"pointer": "/tests", "message": "no"}]}
                if outer.payloads:
                    payload = outer.payloads.pop(0)
                data = json.dumps(payload).encode()
                self.send_response(status)
                if status >= 400:
                    for key, value in outer.headers.items():
                        self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.polled += 1
                outer.polls.append(dict(self.headers))
                state = (
                    outer.ingest.pop(0) if len(outer.ingest) > 1 else outer.ingest[0]
                )
                payload = {"status": state, "run": 7 if state == "done" else None}
                payload["run_url"] = (
                    "http://x/api/v1/runs/7/" if payload["run"] else None
                )
                data = json.dumps(payload).encode()
                self.send_response(200)
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
def imported(agent, tmp_path):
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


def test_parse_prints_the_contract(agent, tmp_path):
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


def test_upload_sends_with_the_token(agent, imported, tmp_path):
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
    assert headers["Content-Encoding"] == "gzip"  # sent compressed
    assert (
        json.loads(body)["bundle_id"] == json.loads(imported.read_text())["bundle_id"]
    )


def test_a_refused_bundle_is_not_retried_nor_spooled(agent, imported, tmp_path):
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


def test_an_unreachable_server_spools_and_pending_resends(agent, imported, tmp_path):
    spool = tmp_path / "spool"
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    proc = agent("upload", str(imported), "--server", dead, "--spool-dir", str(spool))
    assert proc.returncode == 5 and "upload --pending" in proc.stderr
    assert "spooled in" in proc.stderr
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


def test_upload_follows_the_status_to_the_run_page(agent, imported, tmp_path):
    server = Server([202], ingest=("queued", "processing", "done"))
    try:
        proc = agent(
            "upload",
            str(imported),
            "--server",
            server.url,
            "--spool-dir",
            str(tmp_path / "spool"),
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert server.polled == 3
    assert f"ingested: {server.url}/runs/7/" in proc.stderr


def test_a_busy_server_with_retry_after_spools_at_once(agent, imported, tmp_path):
    server = Server([503], headers={"Retry-After": "120"})
    spool = tmp_path / "spool"
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
    finally:
        server.close()
    assert proc.returncode == 5
    assert len(server.received) == 1  # not hammered
    assert "retry after 120 s" in proc.stderr and "spooled in" in proc.stderr
    (kept,) = spool.glob("*.json")
    assert json.loads(kept.read_text()) == json.loads(imported.read_text())


STORED = {"id": 1, "status": "queued", "status_url": "/api/v1/submissions/1/"}
NOT_QUEUED = dict(
    STORED,
    owner_key="bdo_secret503",
    errors=[{"pointer": None, "message": "later", "code": "queue_unavailable"}],
)


def _keys(spool, doc_path):
    bundle_id = json.loads(doc_path.read_text())["bundle_id"]
    path = spool / "owner-keys" / f"{bundle_id}.json"
    return path, json.loads(path.read_text())


def test_the_owner_key_of_a_503_is_kept_with_the_spooled_bundle(
    agent, imported, tmp_path
):
    spool = tmp_path / "spool"
    server = Server(
        [503, 200], headers={"Retry-After": "120"}, payloads=[NOT_QUEUED, STORED]
    )
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
        assert proc.returncode == 5, proc.stderr
        assert "owner key to claim, edit or delete the run later: bdo_secret503" in (
            proc.stderr
        )
        path, keys = _keys(spool, imported)
        assert path.stat().st_mode & 0o777 == 0o600
        assert keys["servers"][server.url]["owner_key"] == "bdo_secret503"
        # The resend is answered 200 without the key (shown once): the kept
        # key is said again and sent while following the status.
        proc = agent("upload", "--pending", "--spool-dir", str(spool))
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert "owner key was kept before: bdo_secret503" in proc.stderr
    assert server.polls[0]["X-Owner-Key"] == "bdo_secret503"
    assert list(spool.glob("*.json")) == []
    assert _keys(spool, imported)[0].exists()  # the key outlives the spool


def test_the_owner_key_of_a_503_survives_the_inline_retry(agent, imported, tmp_path):
    spool = tmp_path / "spool"
    server = Server(
        [503, 200], headers={"Retry-After": "0"}, payloads=[NOT_QUEUED, STORED]
    )
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert len(server.received) == 2
    assert "run later: bdo_secret503" in proc.stderr
    assert _keys(spool, imported)[1]["servers"][server.url]["owner_key"] == (
        "bdo_secret503"
    )
    assert server.polls[0]["X-Owner-Key"] == "bdo_secret503"


def test_the_owner_key_of_a_202_is_kept(agent, imported, tmp_path):
    spool = tmp_path / "spool"
    server = Server([202], payloads=[dict(STORED, owner_key="bdo_secret202")])
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    entry = _keys(spool, imported)[1]["servers"][server.url]
    assert entry["owner_key"] == "bdo_secret202"
    assert entry["status_url"] == server.url + "/api/v1/submissions/1/"
    assert "bdo_secret202 (kept in" in proc.stderr
    after = proc.stderr.split("sent to", 1)[1]
    sent, ingested = after.split("ingested:", 1)
    assert "bdo_secret202" not in sent  # the server's answer, echoed without it
    # The run's page for the uploader's browser (a private run opens there).
    assert "/runs/7/?key=bdo_secret202" in ingested


def test_only_202_or_200_count_as_sent(agent, imported, tmp_path):
    server = Server([201, 201, 201, 201])
    spool = tmp_path / "spool"
    try:
        proc = agent(
            "upload", str(imported), "--server", server.url, "--spool-dir", str(spool)
        )
    finally:
        server.close()
    assert proc.returncode == 5, proc.stderr
    assert "not an acceptance" in proc.stderr
    assert len(list(spool.glob("*.json"))) == 1


def test_a_refused_upload_after_a_run_keeps_the_bundle_and_says_where(agent, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    server = Server([400])
    try:
        proc = agent(
            "run",
            "--target",
            str(target),
            "--size",
            "16M",
            "--runtime",
            "1",
            "--repeats",
            "1",
            "--max-repeats",
            "1",
            "--test",
            "fio-rand-read-4k-q1t1",
            "--upload",
            server.url,
            "--spool-dir",
            str(tmp_path / "spool"),
            timeout=300,
            cwd=tmp_path,
        )
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    (kept,) = tmp_path.glob("benchdb-*.json")
    assert f"the bundle stays in {kept.name}" in proc.stderr
    doc = json.loads(kept.read_text())
    assert doc["tests"][0]["test_id"] == "fio-rand-read-4k-q1t1"
    # The table for people came before the upload.
    assert proc.stderr.index("Random read 4 KiB Q1T1") < proc.stderr.index("refused")


def test_a_bad_out_path_is_refused_before_measuring(agent, tmp_path):
    proc = agent(
        "run",
        "--target",
        str(tmp_path),
        "--size",
        "16M",
        "--out",
        str(tmp_path / "no-such-dir" / "b.json"),
    )
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr
    assert "laying out" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_parse_without_a_direction_returns_null_and_says_so(agent):
    proc = agent("parse", str(SAMPLES / "dd" / "gnu-c.txt"))
    assert proc.returncode == 0, proc.stderr
    (rec,) = json.loads(proc.stdout)["records"]
    assert rec["direction"] is None and rec["io_bytes"] > 0
    assert "does not say read or write" in proc.stderr


def test_parse_into_a_closed_pipe_is_quiet(agent):
    # `benchdb-agent parse FILE | head -1`: a real pipe whose reader leaves.
    proc = subprocess.run(
        shlex.join([*agent.argv, "parse", str(SAMPLES / "fio" / "numjobs2-3.json")])
        + " | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == "{\n"
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr


def test_import_keeps_each_fio_job_apart(agent, tmp_path):
    out = tmp_path / "jobs.json"
    proc = agent("import", str(SAMPLES / "fio" / "two-jobs-3.json"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    by_id = {t["test_id"]: t for t in doc["tests"]}
    assert set(by_id) == {"fio-seq-read-1m-q1t1", "fio-rand-write-4k-q1t1"}
    (rep,) = by_id["fio-seq-read-1m-q1t1"]["repeats"]
    assert {r["job"] for r in rep["records"]} == {"seqread"}
    assert rep["raw"]["job"] == "seqread"
    assert by_id["fio-rand-write-4k-q1t1"]["direction"] == "write"


def test_import_of_dd_without_a_direction_is_refused_with_the_reason(agent, tmp_path):
    proc = agent(
        "import", str(SAMPLES / "dd" / "gnu-c.txt"), "--out", str(tmp_path / "x")
    )
    assert proc.returncode == 2
    assert "--direction" in proc.stderr and not (tmp_path / "x").exists()
