"""The real-guest matrix: every cache mode, several buses and formats, one pair.

For each planned boot (cache mode, bus, image format) the guest from
:mod:`tests.guests.harness` boots paused; ``benchdb-agent host-config --pid``
reads the tags from the running QEMU; the guest then runs ``detect`` and a
shortened ``quick`` profile of the agent against an ext4 filesystem on its
second disk, with those tags and the matrix's pair id.  The same suite runs
natively on the host, on the directory that holds the images, as the
baseline with the same pair id.

Everything lands in one output directory: ``<label>.bundle.json`` per guest,
``host.bundle.json``, and ``matrix.json`` (timings, host-config tags, what the
guest saw in sysfs/DMI/CPUID, what ``detect`` said), so a later step can upload
the bundles to a running benchdb (``--server``) and check the pages.

Command line: ``python -m tests.guests.matrix --out DIR [--server URL] [--all]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tests.guests import harness

# What CI runs: all five cache modes on virtio-blk/raw (the cache-mode report
# needs them side by side), plus one boot per other bus and a qcow2 image.
CI_PLAN = (
    ("none", "virtio-blk", "raw"),
    ("writethrough", "virtio-blk", "raw"),
    ("writeback", "virtio-blk", "raw"),
    ("directsync", "virtio-blk", "raw"),
    ("unsafe", "virtio-blk", "raw"),
    ("none", "virtio-scsi", "qcow2"),
    ("writeback", "sata", "raw"),
    ("writethrough", "ide", "qcow2"),
)
FULL_PLAN = tuple(
    (mode, bus, fmt)
    for bus in harness.BUSES
    for fmt in ("raw", "qcow2")
    for mode in harness.CACHE_MODES
)

# The shortened quick profile run under software emulation, inside and on the
# host alike (size and runtime are part of the comparability key, so guest and
# host must match): a small file, 1 s per fio test, two kept repeats without
# adaptive extras, and in CI a subset of the quick tests (one per tool and
# pattern) so that eight guests fit the CI budget.
SHORT_RUN = [
    "--size",
    "64M",
    "--runtime",
    "1",
    "--repeats",
    "2",
    "--max-repeats",
    "2",
    "--ioping-count",
    "5",
]
CI_TESTS = (
    "fio-rand-read-4k-q32t1",
    "fio-rand-write-4k-q32t1",
    "ioping-read-4k",
    "dd-write-1m-fdatasync",
)
# A bound per agent step (detect, the run), not an expectation: the run takes
# ~20 s in a guest on idle cores, minutes on loaded ones (README.md).
AGENT_STEP_TIMEOUT = 900


def label_of(cache_mode: str, bus: str, fmt: str) -> str:
    """A file-name friendly name for one boot."""
    return f"{bus}-{fmt}-{cache_mode}"


def run_options(all_tests: bool = False) -> list[str]:
    """The agent ``run`` options of the shortened profile."""
    options = list(SHORT_RUN)
    if not all_tests:
        for test_id in CI_TESTS:
            options += ["--test", test_id]
    return options


def parse_tags(text: str) -> dict:
    """Tags printed by ``host-config``: a JSON object (or {"tags": {...}}) or
    ``key=value`` lines."""
    text = text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        tags = data.get("tags", data)
        if isinstance(tags, list):  # one entry per disk: take the bench disk
            tags = next(
                (t.get("tags", t) for t in tags if "bench" in json.dumps(t)), tags[0]
            )
        return {str(k): str(v) for k, v in tags.items() if not isinstance(v, dict)}
    tags = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("--tag"):
            line = line[len("--tag") :].strip()
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            tags[key.strip()] = value.strip()
    return tags


def host_config(pyz: Path, pid: int) -> tuple[dict, list[str]]:
    """Run ``host-config --qemu-pid`` on a running QEMU; returns tags and argv.

    ``--disk bench`` names the drive id of the disk under test (the guest has
    a second, internal disk for its input and output).
    """
    argv = [
        sys.executable,
        str(pyz),
        "host-config",
        "--qemu-pid",
        str(pid),
        "--disk",
        "bench",
        "--format",
        "json",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise harness.GuestError(
            f"host-config --qemu-pid {pid} failed ({proc.returncode}): {proc.stderr}"
        )
    return parse_tags(proc.stdout), argv


def run_matrix(
    out: Path,
    plan=CI_PLAN,
    server: str | None = None,
    log=print,
    all_tests: bool = False,
    pyz: Path | None = None,
) -> dict:
    """Build the guest, boot the plan, run the host baseline; write to ``out``.

    ``pyz`` is the agent to run (the tests pass the file the server serves);
    by default it is built with the agent's own builder, the same bytes."""
    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    guest = harness.build_guest()
    log(f"guest build: {guest['seconds']} s (cached: {guest['cached']})")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    pair_id = f"guests-{stamp}-{uuid.uuid4().hex[:6]}"
    # One folder per matrix run, so two runs on one machine never share
    # images; removed at the end (the images are large and worth nothing).
    scratch = harness.cache_root() / "runs" / pair_id
    scratch.mkdir(parents=True)
    try:
        if pyz is None:
            pyz = harness.agent_zipapp(scratch / "benchdb-agent.pyz")
        summary = _run_plan(guest, pyz, scratch, out, plan, pair_id, all_tests, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if server:
        summary["uploads"] = upload_all(out, server)
    summary["total_s"] = round(time.monotonic() - started, 3)
    (out / "matrix.json").write_text(json.dumps(summary, indent=1))
    log(f"matrix: {summary['total_s']} s in all; results in {out}")
    return summary


def _run_plan(guest, pyz, scratch, out, plan, pair_id, all_tests, log) -> dict:
    """Boot every planned guest, then run the host baseline."""
    accel = harness.choose_accel(guest, scratch)
    short = run_options(all_tests)
    summary = {
        "pair_id": pair_id,
        "accel": accel,
        "build": guest,
        "run_options": short,
        "boots": [],
    }
    for cache_mode, bus, fmt in plan:
        label = label_of(cache_mode, bus, fmt)
        record = _boot_one(guest, pyz, accel, pair_id, short, scratch, out, label)
        record.update(cache_mode=cache_mode, bus=bus, format=fmt)
        summary["boots"].append(record)
        log(
            f"{label}: {record['wall_s']} s wall, agent from {record['agent_start_s']}"
            f" s uptime, write_cache {record['write_cache']!r}, errors "
            f"{record['errors']}"
        )
    summary["host"] = _host_baseline(pyz, pair_id, short, scratch, out)
    log(f"host baseline: {summary['host']['seconds']} s rc {summary['host']['rc']}")
    return summary


def _boot_one(guest, pyz, accel, pair_id, short, scratch, out, label) -> dict:
    """One boot: host-config on the paused QEMU, then detect + run inside."""
    seen = {}

    def before_start(pid, argv, commands):
        # A host-config failure is recorded, not fatal: the guest still boots
        # and proves its own side, and the tests name what failed.
        try:
            tags, hc_argv = host_config(pyz, pid)
        except (harness.GuestError, subprocess.TimeoutExpired) as exc:
            tags, hc_argv = {}, None
            seen["error"] = str(exc)
        seen["tags"], seen["argv"], seen["pid"] = tags, hc_argv, pid
        tag_args = []
        for key, value in sorted(tags.items()):
            tag_args += ["--tag", f"{key}={value}"]
        agent = ["python3", "/run/io/benchdb-agent.pyz"]
        return [
            {
                "name": "detect",
                "argv": [*agent, "detect", "--target", "{target}"],
                "timeout": AGENT_STEP_TIMEOUT,
            },
            {
                "name": "run",
                "argv": [
                    *agent,
                    "run",
                    "--profile",
                    "quick",
                    "--target",
                    "{target}",
                    "--role",
                    "guest",
                    "--pair",
                    pair_id,
                    *short,
                    *tag_args,
                    "--out",
                    "{out}/bundle.json",
                ],
                "timeout": AGENT_STEP_TIMEOUT,
            },
        ]

    result = harness.boot_guest(
        guest,
        *_split(label),
        scratch / label,
        agent_pyz=pyz,
        before_start=before_start,
        accel=accel,
        timeout=2 * AGENT_STEP_TIMEOUT + 300,  # detect, the run, the boot
    )
    files = result["files"]
    guest_result = result["guest"] or {}
    for name in ("detect.stdout", "detect.stderr", "run.stderr", "capture.json"):
        if name in files:
            (out / f"{label}.{name}").write_bytes(files[name])
    (out / f"{label}.console.log").write_text(result["console"])
    if "bundle.json" in files:
        (out / f"{label}.bundle.json").write_bytes(files["bundle.json"])
    detect = None
    if files.get("detect.stdout"):
        try:
            detect = json.loads(files["detect.stdout"])
        except ValueError:
            detect = None
    steps = {s["step"]: s["seconds"] for s in guest_result.get("steps", [])}
    return {
        "label": label,
        "qemu_argv": result["argv"],
        "qemu_rc": result["qemu_rc"],
        "wall_s": result["wall_s"],
        "agent_start_s": guest_result.get("agent_started_uptime_s"),
        "step_seconds": steps,
        "host_config_tags": seen.get("tags"),
        "host_config_argv": seen.get("argv"),
        "qemu_pid": seen.get("pid"),
        "host_config_error": seen.get("error"),
        "write_cache": guest_result.get("disk", {}).get("write_cache"),
        "guest_disk": guest_result.get("disk"),
        "guest_environment": guest_result.get("environment"),
        "detect": detect,
        "bundle": f"{label}.bundle.json" if "bundle.json" in files else None,
        "errors": guest_result.get("errors", ["the guest returned nothing"]),
    }


def _split(label: str) -> tuple[str, str, str]:
    """(cache_mode, bus, fmt) back from a label."""
    head, cache_mode = label.rsplit("-", 1)
    bus, fmt = head.rsplit("-", 1)
    return cache_mode, bus, fmt


def _host_baseline(pyz, pair_id, short, scratch, out) -> dict:
    """The same suite natively on the directory that holds the images."""
    target = scratch / "host-baseline"
    target.mkdir(exist_ok=True)
    bundle = out / "host.bundle.json"
    argv = [
        sys.executable,
        str(pyz),
        "run",
        "--profile",
        "quick",
        "--target",
        str(target),
        "--role",
        "host",
        # This machine is itself a KVM guest (nested): measured, marked.
        "--allow-virtual-host",
        "--pair",
        pair_id,
        *short,
        "--out",
        str(bundle),
    ]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=AGENT_STEP_TIMEOUT
        )
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"").decode(errors="replace") if exc.stderr else ""
        rc, stderr = None, f"{stderr}\nkilled after {AGENT_STEP_TIMEOUT} s"
    (out / "host.run.stderr").write_text(stderr)
    try:
        detect = subprocess.run(
            [sys.executable, str(pyz), "detect", "--target", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    except subprocess.TimeoutExpired:
        detect = ""
    (out / "host.detect.json").write_text(detect)
    return {
        "argv": argv,
        "rc": rc,
        "seconds": round(time.monotonic() - started, 3),
        "bundle": bundle.name if bundle.exists() else None,
        "stderr_tail": stderr.strip().splitlines()[-10:],
    }


def upload_all(out: Path, server: str) -> list[dict]:
    """POST every bundle in ``out`` to a benchdb; returns the answers.

    Each answer is the server's JSON (``id``, ``status``, ``status_url``...)
    plus ``file`` and ``http_status`` (202 new, 200 seen before, 4xx refused).
    """
    answers = []
    url = server.rstrip("/") + "/api/v1/submissions/"
    for path in sorted(out.glob("*.bundle.json")):
        request = urllib.request.Request(
            url,
            data=path.read_bytes(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body = json.loads(response.read())
                answers.append(
                    {**body, "file": path.name, "http_status": response.status}
                )
        except urllib.error.HTTPError as exc:
            answers.append(
                {
                    "file": path.name,
                    "http_status": exc.code,
                    "error": exc.read().decode(errors="replace"),
                }
            )
    return answers


def main(argv: list[str] | None = None) -> int:
    """Run the matrix from the command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.guests.matrix")
    parser.add_argument("--out", required=True, help="folder for bundles and facts")
    parser.add_argument("--server", help="benchdb URL to upload the bundles to")
    parser.add_argument(
        "--all", action="store_true", help="every bus x format x cache mode"
    )
    parser.add_argument(
        "--all-tests",
        action="store_true",
        help="every test of the quick profile (CI runs a subset)",
    )
    args = parser.parse_args(argv)
    try:
        summary = run_matrix(
            Path(args.out),
            FULL_PLAN if args.all else CI_PLAN,
            args.server,
            all_tests=args.all_tests,
        )
    except harness.GuestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    failed = [b["label"] for b in summary["boots"] if b["errors"]]
    if summary["host"]["rc"] != 0:
        failed.append("host")
    for answer in summary.get("uploads", []):
        if answer["http_status"] not in (200, 202):
            failed.append(f"upload of {answer['file']}: {answer.get('error')}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
