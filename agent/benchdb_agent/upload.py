"""Send bundles to benchdb servers; keep what could not be sent.

A bundle that cannot be delivered (network down, server error) is kept in a
spool folder and sent again by ``upload --pending``.  Its bundle_id makes a
resend harmless: the server answers with the run it already has.  A 4xx
answer is final (the bundle itself is wrong) and is not retried; a busy
server (503/429 with Retry-After) is not hammered: the bundle is spooled.
Only 202 (accepted) and 200 (already received) count as sent; the status URL
is then followed until the run is ingested, to give its address.

An anonymous upload's owner key is in the server's answer on the first 202,
or on a 503 (stored, not yet queued), and again on a resend of the very same
bundle (a server since issue 34).  It is carried across retries and kept in
``<spool>/owner-keys/<bundle_id>.json`` (mode 0600), never deleted by the
agent, so the run can be claimed, edited or deleted later.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
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
    def __init__(
        self,
        message: str,
        final: bool,
        retry_after: float | None = None,
        owner_key: str | None = None,
    ):
        super().__init__(message)
        self.final = final
        self.retry_after = retry_after
        # A 503 stores the bundle and shows an anonymous owner key only then.
        self.owner_key = owner_key


def _owner_key(text: str) -> str | None:
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    key = answer.get("owner_key") if isinstance(answer, dict) else None
    return key if isinstance(key, str) and key else None


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
    # Compressed: a full profile's bundle is several MB of JSON (a 198-test
    # one 2.2 MB), over a proxy's default body limit of 1 MiB; gzip'd it is
    # a fraction of that.  benchdb reads gzip bodies (docs/api.md).
    headers = dict(
        _headers(token),
        **{"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    data = gzip.compress(body, 6)
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as resp:
            status = resp.status
            text = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace") if exc.fp else ""
        detail = text[:2000] if exc.fp else exc.msg
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
            owner_key=_owner_key(text),
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
    waited for: the error goes up and the caller spools the bundle.

    An owner key shown by any attempt (a 503 that stored the bundle) is kept:
    in the answer returned, or in the error raised."""
    key = None
    for attempt in range(1, attempts + 1):
        try:
            answer = post(server, body, token)
        except UploadError as exc:
            key = exc.owner_key or key
            exc.owner_key = key
            if exc.final or attempt == attempts:
                raise
            if exc.retry_after is not None and exc.retry_after > MAX_INLINE_WAIT:
                raise UploadError(
                    f"{exc} (the server asks to retry after {exc.retry_after:.0f} s)",
                    final=False,
                    retry_after=exc.retry_after,
                    owner_key=key,
                ) from None
            delay = backoff * 2 ** (attempt - 1)
            if exc.retry_after is not None:
                delay = exc.retry_after
            if log:
                log(f"{exc}; retrying in {delay:.0f} s ({attempt}/{attempts})")
            time.sleep(delay)
            continue
        if key and not answer.get("owner_key"):
            answer["owner_key"] = key
        return answer
    raise AssertionError("unreachable")


def absolute(server: str, url: str) -> str:
    return urllib.parse.urljoin(server.rstrip("/") + "/", url)


def run_page(server: str, status: dict, owner_key: str | None = None) -> str:
    """The run's page (and API address) from a finished submission status.
    With an anonymous upload's owner key, the page's address carries it
    (``?key=``): a browser opened there sees the run even if it is private
    (benchdb keeps the key in that browser's session)."""
    run = status.get("run")
    page = absolute(server, f"/runs/{run}/") if run is not None else None
    if page and owner_key:
        page += "?key=" + urllib.parse.quote(owner_key, safe="")
    api = status.get("run_url")
    return " ".join(x for x in (page, f"(API: {api})" if api else None) if x)


def follow(
    server: str,
    status_url: str,
    token: str | None,
    timeout: float = DEFAULT_WAIT,
    owner_key: str | None = None,
) -> dict:
    """Poll the status URL until the submission is done or failed, or until
    ``timeout`` seconds pass; return the last status seen ({} if none).  The
    owner key lets the server show a private anonymous run's address."""
    url = absolute(server, status_url)
    deadline = time.monotonic() + timeout
    last = {}
    delay = 0.5
    headers = _headers(token)
    if owner_key:
        headers["X-Owner-Key"] = owner_key
    while True:
        request = urllib.request.Request(url, headers=headers)
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


# Room kept beyond the bundle's own size when deciding whether it fits: the
# filesystem's blocks and metadata for the new file.
WRITE_MARGIN_BYTES = 64 * 1024


def write_bundle(text: str, path: str, spool: Path | None, log=None) -> str | None:
    """Write a finished bundle to ``path`` (atomically), or, when it does not
    fit there (less free space than its size, or the write fails), to the
    spool folder's ``bundles/`` (not sent by ``--pending``) or the current
    folder, saying where.  A run measured for hours is never lost to a full
    disk at ``--out``.  Returns where it is, or None if nowhere would take it.
    """
    data = text.encode()
    name = Path(path).name
    places = [Path(path)]
    if spool is not None:
        places.append(spool / "bundles" / name)
    places.append(Path.cwd() / name)
    first_error = None
    for place in places:
        tmp = place.with_name("." + place.name + ".tmp")
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            free = shutil.disk_usage(str(place.parent)).free
            if free < len(data) + WRITE_MARGIN_BYTES:
                raise OSError(
                    errno.ENOSPC,
                    "{} free in {}, the bundle is {}".format(
                        _size(free), place.parent, _size(len(data))
                    ),
                )
            tmp.write_bytes(data)
            os.replace(str(tmp), str(place))
        except OSError as exc:
            try:
                tmp.unlink()
            except OSError:
                pass
            reason = exc.strerror or str(exc)
            if exc.filename is None and exc.strerror and exc.args[1:]:
                reason = str(exc.args[1])
            first_error = first_error or reason
            continue
        if place != Path(path) and log is not None:
            log(
                "could not write the bundle to {} ({}); written to {} instead".format(
                    path, first_error, place
                )
            )
        return str(place)
    if log is not None:
        log(
            "could not write the bundle to {} ({}), nor to {}".format(
                path, first_error, ", ".join(str(p) for p in places[1:])
            )
        )
    return None


def _size(n: int) -> str:
    return "{:.1f} MiB".format(n / 2**20) if n >= 2**20 else "{} KiB".format(n // 1024)


def pending(directory: Path) -> list:
    return sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))


def _key_file(directory: Path, bundle_id: str) -> Path:
    return directory / "owner-keys" / f"{bundle_id}.json"


def kept_owner_key(directory: Path, bundle_id: str, server: str) -> str | None:
    """The owner key kept for this bundle on this server, if any."""
    try:
        keys = json.loads(_key_file(directory, bundle_id).read_text())
    except (OSError, ValueError):
        return None
    entry = keys.get("servers", {}).get(server.rstrip("/")) if keys else None
    return entry.get("owner_key") if isinstance(entry, dict) else None


def keep_owner_key(
    directory: Path,
    bundle_id: str,
    server: str,
    owner_key: str,
    status_url: str | None = None,
) -> Path:
    """Keep an anonymous upload's owner key, per server, readable by the
    user only; written atomically (a temporary file renamed over it)."""
    path = _key_file(directory, bundle_id)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    try:
        keys = json.loads(path.read_text())
    except (OSError, ValueError):
        keys = {}
    if not isinstance(keys, dict) or not isinstance(keys.get("servers"), dict):
        keys = {"bundle_id": bundle_id, "servers": {}}
    keys["servers"][server.rstrip("/")] = {
        "owner_key": owner_key,
        "status_url": absolute(server, status_url) if status_url else None,
        "kept_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(keys, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(str(tmp), 0o600)
    os.replace(tmp, path)
    return path
