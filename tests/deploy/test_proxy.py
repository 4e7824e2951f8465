"""Slow clients cannot hold the web workers: docker/nginx.conf in front.

The production stack's proxy (the shipped nginx.conf, pointed at a local
gunicorn instead of the compose service ``web``) runs with Debian's nginx in
front of ``entrypoint.sh web`` with its two workers; two clients then send
headers announcing a 100,000-byte body, 6 bytes of it, and nothing more.
Straight to gunicorn, they hold both sync workers until its timeout (60 s)
and /health/ waits; through the proxy it answers at once.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.deploy.conftest import (
    ROOT,
    answers,
    free_port,
    production_env,
    request,
    running_web,
    stop,
    with_test_broker,
)

pytestmark = pytest.mark.django_db

NGINX_CONF = ROOT / "docker" / "nginx.conf"


def nginx_binary() -> str:
    binary = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    assert binary, "nginx is needed (Debian package nginx; scripts/system-deps.sh)"
    return binary


def proxy_config(folder: Path, listen: int, upstream: int) -> Path:
    """The shipped server block, with this machine's addresses, inside the
    main configuration the official image otherwise provides."""
    server = NGINX_CONF.read_text()
    assert "server web:8000;" in server and "listen 8080;" in server
    server = server.replace("server web:8000;", f"server 127.0.0.1:{upstream};")
    server = server.replace("listen 8080;", f"listen 127.0.0.1:{listen};")
    # The test itself is the host's TLS proxy here.
    assert "172.30.80.1 1;" in server
    server = server.replace("172.30.80.1 1;", "127.0.0.1 1;")
    (folder / "default.conf").write_text(server)
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = folder / "nginx.conf"
    main.write_text(
        f"{user}worker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'error.log'};\nevents {{ worker_connections 64; }}\n"
        f"http {{\n    access_log {folder / 'access.log'};\n{temp}\n"
        f"    include {folder / 'default.conf'};\n}}\n"
    )
    return main


@pytest.fixture
def web(test_database_url, tmp_path):
    """``entrypoint.sh web`` with the compose stack's two workers."""
    env = with_test_broker(
        production_env(
            test_database_url, WEB_CONCURRENCY="2", WHITENOISE_USE_FINDERS="true"
        )
    )
    with running_web(env, tmp_path / "gunicorn.log") as base:
        yield base


@pytest.fixture
def proxy(web, tmp_path):
    folder = tmp_path / "nginx"
    folder.mkdir()
    port = free_port()
    config = proxy_config(folder, port, int(web.rsplit(":", 1)[1]))
    nginx = nginx_binary()
    tested = subprocess.run(
        [nginx, "-t", "-c", str(config), "-p", str(folder)],
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0, tested.stderr
    proc = subprocess.Popen(
        [nginx, "-c", str(config), "-p", str(folder), "-g", "daemon off;"],
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: proc.poll() is not None or answers(base + "/proxy-health") == 200,
            timeout=20,
            what="nginx to answer",
        )
        assert proc.poll() is None, proc.stderr.read()
        yield base
    finally:
        stop(proc)


def slow_client(base: str) -> socket.socket:
    """Headers for a 100,000-byte body, 6 bytes of it, then nothing."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        b"POST /api/v1/submissions/ HTTP/1.1\r\nHost: example.org\r\n"
        b"X-Forwarded-Proto: https\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n"
        b'{"bund'
    )
    return sock


def health_time(base: str) -> tuple[int, float]:
    started = time.monotonic()
    status = request(base + "/health/", https=False)[0]
    return status, time.monotonic() - started


def test_two_slow_clients_do_not_hold_the_workers(proxy):
    slow = [slow_client(proxy) for _ in range(2)]
    try:
        time.sleep(1)  # long enough to reach whatever they would hold
        status, seconds = health_time(proxy)
    finally:
        for sock in slow:
            sock.close()
    assert status == 200
    assert seconds < 5, f"/health/ took {seconds:.1f} s behind two slow clients"


def test_the_proxy_passes_whole_requests_and_answers(proxy):
    status, headers, body = request(proxy + "/api/v1/vocabularies/")
    assert status == 200, body[:500]
    assert headers["Content-Type"].startswith("application/json")
    # Larger than its client_max_body_size: refused by the proxy itself.
    status, _, _ = request(
        proxy + "/api/v1/submissions/",
        b"x" * (16 * 1024 * 1024 + 1),
        {"Content-Type": "application/json"},
    )
    assert status == 413
