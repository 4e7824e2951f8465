"""Send bundles to benchdb servers; keep what could not be sent.

A bundle that cannot be delivered (network down, server error) is kept in a
spool folder and sent again by ``upload --pending``.  Its bundle_id makes a
resend harmless: the server answers with the run it already has.  A 4xx
answer is final (the bundle itself is wrong) and is not retried; a busy
server (503/429 with Retry-After) is not hammered: the bundle is spooled.
Only 202 (accepted) and 200 (already received) count as sent; the status URL
is then followed until the run is ingested, to give its address.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from . import __version__

RETRY_STATUSES = (408, 429, 500, 502, 503, 504)
# Seconds to follow an upload's status URL for the run's address.
DEFAULT_WAIT = 60.0
# A Retry-After longer than this is not waited for: the bundle is spooled.
MAX_INLINE_WAIT = 30.0


class UploadError(RuntimeError):
    def __init__(self, message: str, final: bool, retry_after: float | None = None):
        super().__init__(message)
        self.final = final
        self.retry_after = retry_after


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A POST redirected would arrive as a GET without its body, and the page
    it lands on would look like success: refuse redirects instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(
            req.full_url, code, f"redirected to {newurl}", headers, fp
        )


_OPENER = urllib.request.build_opener(_NoRedirect)


def spool_dir(override: str | None = None) -> Path:
    base = override or os.environ.get("BENCHDB_AGENT_SPOOL")
    if not base:
        state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
        base = os.path.join(state, "benchdb-agent", "spool")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _headers(token: str | None) -> dict:
    headers = {
        "Accept": "application/json",
        "User-Agent": f"benchdb-agent/{__version__}",
    }
    if token:
        headers["Authorization"] = f"Token {token}"
    return headers


def _retry_after(value) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: treat as "later"


def post(server: str, body: bytes, token: str | None, timeout: float = 60) -> dict:
    """POST a bundle; success only on 202 (accepted) or 200 (already there)."""
    url = server.rstrip("/") + "/api/v1/submissions/"
    headers = dict(_headers(token), **{"Content-Type": "application/json"})
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as resp:
            status = resp.status
            text = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:2000] if exc.fp else exc.msg
        if 300 <= exc.code < 400:
            raise UploadError(
                f"{url}: HTTP {exc.code} {exc.msg}: give the server's own address",
                final=True,
            ) from None
        final = exc.code not in RETRY_STATUSES
        raise UploadError(
            f"{url}: HTTP {exc.code}: {detail}",
            final=final,
            retry_after=_retry_after(exc.headers.get("Retry-After")),
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UploadError(f"{url}: {reason}", final=False) from None
    if status not in (200, 202):
        raise UploadError(
            f"{url}: HTTP {status} is not an acceptance (expected 202 or 200)",
            final=False,
        )
    try:
        answer = json.loads(text or "{}")
    except ValueError:
        raise UploadError(f"{url}: the answer is not JSON", final=False) from None
    return answer if isinstance(answer, dict) else {}


def send(
    server: str,
    body: bytes,
    token: str | None = None,
    attempts: int = 4,
    backoff: float = 2.0,
    log=None,
) -> dict:
    """POST with retries and exponential backoff on transient failures.  A
    server that asks for more than MAX_INLINE_WAIT s (Retry-After) is not
    waited for: the error goes up and the caller spools the bundle."""
    for attempt in range(1, attempts + 1):
        try:
            return post(server, body, token)
        except UploadError as exc:
            if exc.final or attempt == attempts:
                raise
            if exc.retry_after is not None and exc.retry_after > MAX_INLINE_WAIT:
                raise UploadError(
                    f"{exc} (the server asks to retry after {exc.retry_after:.0f} s)",
                    final=False,
                    retry_after=exc.retry_after,
                ) from None
            delay = backoff * 2 ** (attempt - 1)
            if exc.retry_after is not None:
                delay = exc.retry_after
            if log:
                log(f"{exc}; retrying in {delay:.0f} s ({attempt}/{attempts})")
            time.sleep(delay)
    raise AssertionError("unreachable")


def absolute(server: str, url: str) -> str:
    return urllib.parse.urljoin(server.rstrip("/") + "/", url)


def run_page(server: str, status: dict) -> str:
    """The run's page (and API address) from a finished submission status."""
    run = status.get("run")
    page = absolute(server, f"/runs/{run}/") if run is not None else None
    api = status.get("run_url")
    return " ".join(x for x in (page, f"(API: {api})" if api else None) if x)


def follow(
    server: str, status_url: str, token: str | None, timeout: float = DEFAULT_WAIT
) -> dict:
    """Poll the status URL until the submission is done or failed, or until
    ``timeout`` seconds pass; return the last status seen ({} if none)."""
    url = absolute(server, status_url)
    deadline = time.monotonic() + timeout
    last = {}
    delay = 0.5
    while True:
        request = urllib.request.Request(url, headers=_headers(token))
        try:
            with _OPENER.open(request, timeout=30) as resp:
                last = json.loads(resp.read().decode("utf-8") or "{}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = dict(last, follow_error=str(exc))
        if last.get("status") in ("done", "failed") or time.monotonic() >= deadline:
            return last
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 5.0)


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
