"""Send bundles to benchdb servers; keep what could not be sent.

A bundle that cannot be delivered (network down, server error) is kept in a
spool folder and sent again by ``upload --pending``.  Its bundle_id makes a
resend harmless: the server answers with the run it already has.  A 4xx
answer is final (the bundle itself is wrong) and is not retried.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import __version__

RETRY_STATUSES = (408, 429, 500, 502, 503, 504)


class UploadError(RuntimeError):
    def __init__(self, message: str, final: bool):
        super().__init__(message)
        self.final = final


def spool_dir(override: str | None = None) -> Path:
    base = override or os.environ.get("BENCHDB_AGENT_SPOOL")
    if not base:
        state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
        base = os.path.join(state, "benchdb-agent", "spool")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def post(server: str, body: bytes, token: str | None, timeout: float = 60) -> dict:
    url = server.rstrip("/") + "/api/v1/submissions/"
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": f"benchdb-agent/{__version__}",
    }
    if token:
        headers["Authorization"] = f"Token {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:2000]
        final = exc.code not in RETRY_STATUSES
        raise UploadError(f"{url}: HTTP {exc.code}: {detail}", final=final) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UploadError(f"{url}: {reason}", final=False) from None


def send(
    server: str,
    body: bytes,
    token: str | None = None,
    attempts: int = 4,
    backoff: float = 2.0,
    log=None,
) -> dict:
    """POST with retries and exponential backoff on transient failures."""
    for attempt in range(1, attempts + 1):
        try:
            return post(server, body, token)
        except UploadError as exc:
            if exc.final or attempt == attempts:
                raise
            delay = backoff * 2 ** (attempt - 1)
            if log:
                log(f"{exc}; retrying in {delay:.0f} s ({attempt}/{attempts})")
            time.sleep(delay)
    raise AssertionError("unreachable")


def spool(body: bytes, bundle_id: str, server: str, directory: Path) -> Path:
    """Keep an unsent bundle (atomically: write, then rename)."""
    path = directory / f"{bundle_id}.json"
    meta = directory / f"{bundle_id}.server"
    tmp = directory / f".{bundle_id}.tmp"
    tmp.write_bytes(body)
    os.replace(tmp, path)
    meta.write_text(server + "\n")
    return path


def pending(directory: Path) -> list:
    return sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))
