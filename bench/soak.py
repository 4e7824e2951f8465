"""Soak: benchdb's embedded defaults used for a while on a busy machine.

``make soak`` (``python -m bench.soak --minutes 30``):

1. starts ``manage.py serve`` as ``make run`` does (embedded PostgreSQL and
   broker, the reference data) in a fresh folder;
2. starts a second process that keeps every core busy (one spinning child
   per CPU);
3. for the duration, one client does what people do: uploads the real
   bundles of ``tests/samples/bundles`` (each with a new bundle id), makes
   runs unlisted and public again, hides and shows runs (a staff token),
   opens the home page, the run list, run pages, comparisons and the
   reports, and compares the home page's count of public runs with the
   list's;
4. stops sending, waits (bounded) for every submission to be stored, then
   prints: crashes and restarts seen by process (serve's own lines), the
   submissions sent, stored and failed, the longest time one waited between
   its upload and ``done``, and the longest time the home page's count
   disagreed with the list.

Exit status 0 when the targets hold: no crash, every submission stored, and
no disagreement longer than ``--stale-limit`` seconds (one minute).  Figures
printed, for a person; the 3-minute version in the test suite
(tests/service/test_soak.py) asserts the same targets.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "tests" / "samples" / "bundles"
HOME_COUNT = re.compile(r"<strong>([\d,]+)</strong> public runs?")
LIST_COUNT = re.compile(r"<p>([\d,]+) runs?\. Tick runs")
RESTART = re.compile(
    r"serve: the (.+?) \(pid \d+\) (killed by \w+|exited with status -?\d+)"
)
CRASH = re.compile(r"CRITICAL|Unrecoverable error|Traceback")


def spin() -> None:  # pragma: no cover - a busy loop
    while True:
        pass


def burn(cores: int) -> None:
    """Keep ``cores`` CPUs busy until killed (the 'second process')."""
    os.setpgrp()
    procs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(cores)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


@dataclass
class Figures:
    sent: dict = field(default_factory=dict)  # bundle id -> (sent at, status url)
    runs: dict = field(default_factory=dict)  # bundle id -> its run's id
    refused: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # pages answering 5xx
    requests: int = 0
    checks: int = 0
    disagree_since: float | None = None
    longest_disagreement: float = 0.0
    disagreement_note: str = ""


class Client:
    def __init__(self, port: int, token: str):
        self.port = port
        self.token = token

    def call(self, method: str, path: str, body=None, timeout: float = 120):
        headers = {"Authorization": f"Token {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def page(self, path: str) -> tuple[int, str]:
        """A page as an anonymous visitor sees it."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()


def manage(env: dict, *args: str, timeout: float = 600) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    ).stdout


def staff_token(env: dict) -> str:
    code = (
        "from django.contrib.auth import get_user_model\n"
        "from benchdb.results.models import ApiToken\n"
        "u, _ = get_user_model().objects.get_or_create(username='soak', "
        "defaults={'is_staff': True})\n"
        "print(ApiToken.issue(u, 'soak')[1])"
    )
    return manage(env, "shell", "-c", code).strip().splitlines()[-1]


def submissions(env: dict, ids: list[str]) -> dict[str, dict]:
    """Each sent bundle's status and seconds from upload to its last change
    (``done``), read from the database."""
    code = (
        "import json, sys\n"
        "from benchdb.results.models import Submission\n"
        "ids = json.loads(sys.stdin.read())\n"
        "rows = Submission.objects.filter(bundle_id__in=ids)"
        ".values_list('bundle_id', 'status', 'created', 'updated', 'run_id')\n"
        "print(json.dumps({str(b): {'status': s, 'seconds': (u - c)"
        ".total_seconds(), 'run': r} for b, s, c, u, r in rows}))"
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        input=json.dumps(ids),
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def count(pattern: re.Pattern, text: str) -> int | None:
    m = pattern.search(text)
    return int(m.group(1).replace(",", "")) if m else None


def check_counts(client: Client, figures: Figures) -> None:
    """The home page's public runs against the list's count; track how long
    they disagree."""
    _, home = client.page("/")
    _, listing = client.page("/runs/")
    a, b = count(HOME_COUNT, home), count(LIST_COUNT, listing)
    figures.checks += 1
    now = time.monotonic()
    if a is None or b is None or a == b:
        figures.disagree_since = None
        return
    if figures.disagree_since is None:
        figures.disagree_since = now
    lasted = now - figures.disagree_since
    if lasted > figures.longest_disagreement:
        figures.longest_disagreement = lasted
        figures.disagreement_note = f"home {a}, list {b}"


def one_round(client: Client, bundles: list[dict], figures: Figures, rng) -> None:
    """Upload one bundle, then the other things people do."""
    bundle = dict(rng.choice(bundles))
    bundle["bundle_id"] = str(uuid.uuid4())
    bundle["pair_id"] = None
    status, body = client.call("POST", "/api/v1/submissions/", bundle)
    figures.requests += 1
    if status in (200, 201, 202):
        figures.sent[bundle["bundle_id"]] = (
            time.time(),
            json.loads(body)["status_url"],
        )
    else:
        figures.refused.append(f"upload answered {status}: {body[:200]!r}")
    # The runs of the oldest uploads not yet known (their status URL says).
    for bundle_id in [b for b in figures.sent if b not in figures.runs][:3]:
        url = urllib.parse.urlsplit(figures.sent[bundle_id][1])
        status, body = client.call("GET", url.path)
        figures.requests += 1
        if status == 200 and json.loads(body).get("run"):
            figures.runs[bundle_id] = json.loads(body)["run"]
    runs = list(figures.runs.values())
    if len(runs) >= 2:
        a, b = rng.sample(runs, 2)
        # Visibility and moderation, undone at once: the counts move.
        for method, path, payload in (
            ("PATCH", f"/api/v1/runs/{a}/", {"visibility": "unlisted"}),
            (
                "POST",
                f"/api/v1/runs/{b}/moderate/",
                {"action": "hide", "reason": "soak"},
            ),
            ("PATCH", f"/api/v1/runs/{a}/", {"visibility": "public"}),
            ("POST", f"/api/v1/runs/{b}/moderate/", {"action": "unhide"}),
        ):
            status, body = client.call(method, path, payload)
            figures.requests += 1
            if status >= 500:
                figures.errors.append(f"{method} {path}: {status}")
        pages = [
            f"/runs/{a}/",
            f"/compare/?runs={a},{b}",
            f"/api/v1/compare/?runs={a},{b}",
            "/reports/cache-modes/",
            "/reports/overhead/",
        ]
        for path in pages:
            status, _ = client.page(path)
            figures.requests += 1
            if status >= 500:
                figures.errors.append(f"GET {path}: {status}")
    check_counts(client, figures)


def restarts(log: str) -> tuple[dict, dict]:
    """(restarts by process, crash lines by process) from serve's output."""
    by_process: dict[str, int] = {}
    for m in RESTART.finditer(log):
        by_process[m.group(1)] = by_process.get(m.group(1), 0) + 1
    crashes = [line for line in log.splitlines() if CRASH.search(line)]
    return by_process, crashes


def run(
    minutes: float,
    folder: Path,
    stale_limit: float = 60,
    drain_minutes: float = 10,
    burn_cores: int | None = None,
    say=print,
) -> dict:
    """The soak; returns its figures (and prints them with ``say``)."""
    bundles = [
        json.loads(gzip.decompress(p.read_bytes())) for p in BUNDLES.glob("*.json.gz")
    ]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "BENCHDB_BROKER_DIR")
    }
    env.update(
        BENCHDB_VAR_DIR=str(folder / "var"),
        DEBUG=env.get("DEBUG", "true"),
        # A soak of the service, not of its throttles.
        SUBMISSION_THROTTLE="1000000/hour",
        ANON_THROTTLE="1000000/hour",
        COMPARISON_THROTTLE="1000000/hour",
    )
    from tests.service.serving import Serve  # the tests' own launcher

    burner = multiprocessing.get_context("fork").Process(
        target=burn, args=(burn_cores or os.cpu_count() or 2,), daemon=False
    )
    serve = Serve(folder, env, concurrency=2, reference=True)
    figures = Figures()
    started = time.monotonic()
    try:
        serve.wait_up(timeout=900)
        say(f"soak: benchdb up in {time.monotonic() - started:.0f} s at {serve.url}")
        client = Client(serve.port, staff_token(env))
        burner.start()
        say(f"soak: a second process keeps {burn_cores or os.cpu_count()} CPUs busy")
        rng = random.Random(1)
        end = time.monotonic() + minutes * 60
        last_report = time.monotonic()
        while time.monotonic() < end:
            if serve.proc.poll() is not None:
                figures.errors.append(f"serve exited with {serve.proc.returncode}")
                break
            try:
                one_round(client, bundles, figures, rng)
            except OSError as exc:  # connection refused, reset, timed out
                figures.errors.append(f"request failed: {exc}")
                time.sleep(1)
            if time.monotonic() - last_report > 60:
                last_report = time.monotonic()
                say(
                    f"soak: {(time.monotonic() - end) / 60 + minutes:.0f} min, "
                    f"{len(figures.sent)} sent, {figures.requests} requests"
                )
        # Every submission stored, within a bound.
        ids = list(figures.sent)
        deadline = time.monotonic() + drain_minutes * 60
        while True:
            states = submissions(env, ids) if ids else {}
            waiting = [
                b
                for b in ids
                if states.get(b, {}).get("status") not in ("done", "failed")
            ]
            check_counts(client, figures)
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(5)
        # The counts after the last write: agree within the limit.
        settle = time.monotonic() + stale_limit + 5
        while figures.disagree_since is not None and time.monotonic() < settle:
            time.sleep(2)
            check_counts(client, figures)
    finally:
        if burner.pid is not None:
            try:
                os.killpg(burner.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            burner.join(10)
        serve.stop()
        try:
            manage(env, "embedded", "stop", timeout=120)
        except (subprocess.SubprocessError, OSError) as exc:
            say(f"soak: could not stop the embedded PostgreSQL: {exc}")
    restarted, crashes = restarts(serve.text())
    done = [s for s in states.values() if s["status"] == "done"]
    failed = [b for b, s in states.items() if s["status"] == "failed"]
    result = {
        "minutes": minutes,
        "requests": figures.requests,
        "sent": len(figures.sent),
        "stored": len(done),
        "failed": len(failed),
        "not_stored": len(ids) - len(done),
        "refused": figures.refused[:5],
        "server_errors": figures.errors[:10],
        "longest_wait_s": max((s["seconds"] for s in done), default=0.0),
        "restarts": restarted,
        "crash_lines": crashes[:10],
        "crashes": len(crashes),
        "count_checks": figures.checks,
        "longest_disagreement_s": round(figures.longest_disagreement, 1),
        "disagreement": figures.disagreement_note,
        "log": str(serve.log),
    }
    result["ok"] = (
        not crashes
        and not restarted
        and not figures.errors
        and not figures.refused
        and result["not_stored"] == 0
        and figures.longest_disagreement <= stale_limit
    )
    say(
        f"soak: {minutes:g} min, {figures.requests} requests; crashes "
        f"{len(crashes)}, restarts {restarted or 'none'}; submissions sent "
        f"{len(ids)}, stored {len(done)}, failed {len(failed)}, not stored "
        f"{result['not_stored']}; longest wait {result['longest_wait_s']:.1f} s; "
        f"home count against the list: {figures.checks} checks, longest "
        f"disagreement {figures.longest_disagreement:.0f} s "
        f"{'(' + figures.disagreement_note + ')' if figures.disagreement_note else ''}"
        f"; server errors {len(figures.errors)}; {'OK' if result['ok'] else 'FAILED'}"
    )
    for line in crashes[:10] + figures.errors[:10] + figures.refused[:5]:
        say(f"soak:   {line}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=30, help="default 30")
    parser.add_argument(
        "--folder", help="where var/ and the log go (default: a new temporary folder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the folder")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    folder = Path(args.folder or tempfile.mkdtemp(prefix="benchdb-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"soak: {args.minutes:g} minutes in {folder}", flush=True)
    result = run(args.minutes, folder, say=lambda s: print(s, flush=True))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if not args.keep and result["ok"]:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"soak: the folder and serve's log are kept in {folder}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
