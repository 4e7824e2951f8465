"""Run the suite: every test with a discarded warm-up and kept repeats.

fio runs with direct I/O, fio's default random buffer contents (never zeros, so
compressing storage cannot flatter it) and JSON output; ioping with O_DIRECT
against the same test file; dd with LC_ALL=C and conv=fdatasync.  The test
file is laid out once before the first test (the preconditioning pass: first
writes allocate on thin and sparse storage) and removed on success, failure,
Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from . import bundle as bundle_mod
from . import detect, parsers, safety, suite

MiB = 2**20
GiB = 2**30
# Spread of the repeats (coefficient of variation of the test's main metric)
# above which more repeats are run, as the Phoronix Test Suite does.
CV_THRESHOLD = 0.10
IOPING_INTERVAL = "0.1"
# RAM-backed filesystems: recent tmpfs even accepts O_DIRECT, so the probe
# alone cannot tell.
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs", "devtmpfs", "hugetlbfs")
TOOL_PACKAGES = {"fio": "fio", "ioping": "ioping", "dd": "coreutils"}


class RunError(RuntimeError):
    pass


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([kKmMgGtT]?)(i?B?)?", str(text).strip())
    if not m:
        raise ValueError(f"{text!r} is not a size like 512M or 4G")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2).lower()]
    return int(m.group(1)) * scale


def default_size(memory_bytes: int | None) -> int:
    """Twice the RAM (so the guest's page cache cannot hold it), 1..16 GiB."""
    if not memory_bytes:
        return 4 * GiB
    return min(max(2 * memory_bytes, 1 * GiB), 16 * GiB)


def tool_version(tool: str) -> str | None:
    try:
        if tool == "fio":
            out = subprocess.run(
                ["fio", "--version"], capture_output=True, text=True, timeout=10
            )
            return out.stdout.strip() or None
        if tool == "ioping":
            out = subprocess.run(
                ["ioping", "-v"], capture_output=True, text=True, timeout=10
            )
            return (out.stdout or out.stderr).strip().splitlines()[0] or None
        if tool == "dd":
            out = subprocess.run(
                ["dd", "--version"], capture_output=True, text=True, timeout=10
            )
            first = (out.stdout or out.stderr).strip().splitlines()
            return first[0] if first and out.returncode == 0 else "dd"
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return None


class Progress:
    """Test i of N, elapsed and an estimate; plain lines when not a terminal."""

    def __init__(self, total_units: int, stream=None):
        self.total = max(total_units, 1)
        self.done = 0
        self.start = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def step(self, label: str) -> None:
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        text = f"[{self.done + 1}/{self.total}] {label}  elapsed {_clock(elapsed)}"
        if eta is not None:
            text += f"  about {_clock(eta)} left"
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.done += 1

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def fio_command(test: dict, path: str, size: int, runtime: int) -> list:
    opts = test["options"]
    cmd = [
        "fio",
        f"--name={test['test_id']}",
        f"--filename={path}",
        f"--size={size}",
        f"--runtime={runtime}",
        "--time_based=1",
        "--group_reporting=1",
        "--output-format=json",
    ]
    for key in ("rw", "bs", "iodepth", "numjobs", "ioengine", "direct", "fsync"):
        if key in opts:
            cmd.append(f"--{key}={opts[key]}")
    return cmd


def ioping_command(test: dict, path: str, count: int) -> list:
    opts = test["options"]
    cmd = ["ioping", "-c", str(count), "-i", IOPING_INTERVAL, "-D", "-s", opts["size"]]
    if opts.get("linear") == "1":
        cmd.append("-L")
    if opts.get("write") == "1":
        # Our own test file: ioping asks for -WWW before it writes to a file.
        cmd.append("-WWW")
    cmd.append(path)
    return cmd


def dd_command(path: str, size: int) -> list:
    count = max(1, size // MiB)
    return [
        "dd",
        "if=/dev/zero",
        f"of={path}",
        "bs=1M",
        f"count={count}",
        "conv=fdatasync",
    ]


def run_tool(cmd: list, timeout: float) -> str:
    env = dict(os.environ, LC_ALL="C", LANG="C")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RunError(f"{cmd[0]} failed (exit {proc.returncode}): {' / '.join(tail)}")
    return proc.stderr if cmd[0] == "dd" else proc.stdout


def main_metric_values(records_per_repeat: list, metric: str, direction: str) -> list:
    values = []
    for records in records_per_repeat:
        total = [r.get(metric) for r in records if r["direction"] == direction]
        if total and None not in total:
            values.append(sum(total) if metric in ("iops", "bw_bytes") else total[0])
    return values


def coefficient_of_variation(values: list) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    if mean == 0:
        return None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return sd / mean


class Cleanup:
    """Remove the agent's files whatever happens, SIGTERM included."""

    def __init__(self):
        self.paths = []
        self.previous = {}

    def add(self, path: str) -> None:
        self.paths.append(path)

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self.previous[sig] = signal.signal(sig, self._raise)
            except (ValueError, OSError):  # not the main thread
                pass
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def __exit__(self, *exc):
        for path in self.paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as err:
                sys.stderr.write(f"benchdb-agent: could not remove {path}: {err}\n")
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


def _warnings_for(env: dict, tags: dict, size: int, direct: bool) -> list:
    out = []

    def add(code, *parts):
        out.append({"code": code, "message": "".join(parts)})

    mem = env.get("memory_bytes")
    if mem and size < 2 * mem:
        add(
            "small-test-file",
            f"the test file ({size // MiB} MiB) is smaller than twice ",
            f"the RAM ({mem // MiB} MiB): caches can hold it",
        )
    if not direct:
        add(
            "buffered-io",
            "the target does not support O_DIRECT: figures include the ",
            "page cache and are not disk figures",
        )
    mode = tags.get("cache_mode")
    if mode == "unsafe":
        add(
            "cache-unsafe",
            "cache=unsafe ignores the guest's flushes: write figures are ",
            "not disk figures, and a host crash loses data",
        )
    elif mode in ("writeback", "writethrough"):
        add(
            "host-read-cache",
            f"cache={mode} lets the host's page cache serve reads: read figures ",
            "may be RAM figures unless the file is larger than the host's RAM",
        )
    thin = ("lvm-thin", "zfs", "ceph-rbd")
    if tags.get("image_format") == "qcow2" or tags.get("storage_backend") in thin:
        add(
            "thin-storage",
            "thin or sparse storage: first writes allocate, so the test file ",
            "was laid out (preconditioned) before measuring",
        )
    compressing = tags.get("host_filesystem") in ("zfs", "btrfs")
    if compressing or tags.get("storage_backend") == "zfs":
        add(
            "compression",
            "compressing storage: fio writes random data, which does not ",
            "compress, but dd writes zeros, which do",
        )
    problem = detect.check_declared_cache_mode(mode, env.get("cache_mode_evidence"))
    if problem:
        add("cache-mode-contradiction", problem)
    return out


def _steal_and_load() -> tuple:
    steal = total = None
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
        values = [int(v) for v in fields]
        total = sum(values)
        steal = values[7] if len(values) > 7 else 0
    except (OSError, ValueError):
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return steal, total, load


def run_suite(
    target: str | None,
    profile: str = "quick",
    *,
    role: str = "guest",
    pair_id: str | None = None,
    tags: dict | None = None,
    repeats: int | None = None,
    max_repeats: int | None = None,
    runtime: int | None = None,
    size: int | None = None,
    only: list | None = None,
    allow_buffered: bool = False,
    include_identifiers: bool = False,
    ioping_count: int | None = None,
    progress_stream=None,
    device: str | None = None,
) -> dict:
    """Run a profile against a target directory and return the bundle.

    With ``device`` (already passed by safety.check_device), the tests run on
    that blank block device instead of a file in ``target``.
    """
    tags = dict(tags or {})
    tests = suite.tests_for(profile)
    if only:
        unknown = sorted(set(only) - {t["test_id"] for t in tests})
        if unknown:
            raise RunError(f"not in the {profile} profile: {', '.join(unknown)}")
        tests = [t for t in tests if t["test_id"] in only]
    defaults = suite.PROFILE_DEFAULTS[profile]
    repeats = repeats or defaults["repeats"]
    max_repeats = max_repeats or max(repeats * 2, 5)
    runtime = runtime or defaults["runtime"]
    ioping_count = ioping_count or defaults["ioping_count"]
    if device:
        plan = {
            "profile": profile,
            "role": role,
            "pair_id": pair_id,
            "tags": tags,
            "repeats": repeats,
            "max_repeats": max_repeats,
            "runtime": runtime,
            "size": size,
            "include_identifiers": include_identifiers,
            "ioping_count": ioping_count,
            "progress_stream": progress_stream,
        }
        return _run_device(device, tests, plan)
    if not target or not os.path.isdir(target):
        raise RunError(f"{target} is not a directory (use --device for a block device)")
    env = detect.detect(target, include_identifiers=include_identifiers)
    needed = sorted({t["tool"] for t in tests})
    missing = [TOOL_PACKAGES[t] for t in needed if shutil.which(t) is None]
    if missing:
        hint = safety.install_hint(missing, env["os"].get("id"))
        raise RunError(f"missing {', '.join(missing)}: install with `{hint}`")
    fs = (env.get("target") or {}).get("filesystem")
    if fs in MEMORY_FILESYSTEMS and not allow_buffered:
        raise RunError(
            f"{target} is on {fs}, which lives in RAM: the figures would be memory "
            "figures, not disk figures; choose a target on a disk filesystem"
        )
    direct = safety.supports_o_direct(target) and fs not in MEMORY_FILESYSTEMS
    if not direct and not allow_buffered:
        raise RunError(
            f"{target} ({fs}) does not support O_DIRECT, so the page cache would be "
            "measured instead of the disk; choose a target on a disk filesystem "
            "(or --allow-buffered to record buffered figures, marked as such)"
        )
    size = size or default_size(env.get("memory_bytes"))
    safety.check_free_space(
        target, size + (min(size, GiB) if any(t["tool"] == "dd" for t in tests) else 0)
    )
    doc = bundle_mod.new_bundle(
        role=role, profile=profile, environment=env, tags=tags, pair_id=pair_id
    )
    doc["warnings"] = _warnings_for(env, tags, size, direct)
    doc["environment"]["test_file_bytes"] = size
    versions = {tool: tool_version(tool) for tool in needed}
    path = os.path.join(target, f"benchdb-test.{os.getpid()}.bin")
    dd_path = os.path.join(target, f"benchdb-dd.{os.getpid()}.bin")
    progress = Progress(1 + len(tests) * (1 + repeats), progress_stream)
    layout = [
        "fio",
        "--name=layout",
        f"--filename={path}",
        f"--size={size}",
        "--rw=write",
        "--bs=1m",
        "--direct=1" if direct else "--direct=0",
        "--ioengine=psync",
        "--output-format=json",
    ]
    settings = (size, runtime, repeats, max_repeats, ioping_count, direct)
    with Cleanup() as cleanup:
        cleanup.add(path)
        cleanup.add(dd_path)
        progress.step(f"laying out the {size // MiB} MiB test file")
        run_tool(layout, timeout=3600)
        _run_all(doc, tests, path, dd_path, settings, versions, progress)
    return doc


def _run_device(device: str, tests: list, plan: dict) -> dict:
    """The suite on a blank block device: the tests write the device itself."""
    with open(device, "rb") as fh:
        device_bytes = fh.seek(0, os.SEEK_END)
    size = min(plan["size"] or device_bytes, device_bytes)
    env = detect.detect(None, include_identifiers=plan["include_identifiers"])
    name = os.path.basename(os.path.realpath(device))
    env["target"] = {
        "path": device,
        "device": name,
        "kind": "block-device",
        "size_bytes": device_bytes,
    }
    if os.path.exists(f"/sys/block/{name}"):
        env["target"]["disk_bus"] = detect.disk_bus(name, detect.Path("/"))[0]
        env["target"]["write_cache"] = detect.read(
            detect.Path("/"), f"/sys/block/{name}/queue/write_cache"
        )
    env["cache_mode_evidence"] = detect.cache_mode_evidence(env["target"])
    doc = bundle_mod.new_bundle(
        role=plan["role"],
        profile=plan["profile"],
        environment=env,
        tags=plan["tags"],
        pair_id=plan["pair_id"],
    )
    doc["warnings"] = _warnings_for(env, plan["tags"], size, True)
    doc["environment"]["test_file_bytes"] = size
    versions = {tool: tool_version(tool) for tool in sorted({t["tool"] for t in tests})}
    progress = Progress(len(tests) * (1 + plan["repeats"]), plan["progress_stream"])
    settings = (
        size,
        plan["runtime"],
        plan["repeats"],
        plan["max_repeats"],
        plan["ioping_count"],
        True,
    )
    _run_all(doc, tests, device, device, settings, versions, progress)
    return doc


def _run_all(doc, tests, path, dd_path, settings, versions, progress) -> None:
    steal0, total0, _ = _steal_and_load()
    for test in tests:
        doc["tests"].append(
            _run_test(test, path, dd_path, settings, versions, progress)
        )
    progress.close()
    steal1, total1, load = _steal_and_load()
    if steal0 is not None and steal1 is not None and total1 and total1 > total0:
        share = (steal1 - steal0) / (total1 - total0)
        doc["environment"]["steal_share"] = round(share, 4)
        if share > 0.05:
            doc["warnings"].append(
                {
                    "code": "cpu-steal",
                    "message": f"{share:.0%} of CPU time was stolen by the hypervisor "
                    "during the run: the host was busy",
                }
            )
    if load is not None:
        doc["environment"]["load_average"] = load


def _run_test(test, path, dd_path, settings, versions, progress) -> dict:
    size, runtime, repeats, max_repeats, ioping_count, direct = settings
    tool = test["tool"]
    if tool == "fio":
        cmd = fio_command(test, path, size, runtime)
        if not direct:
            cmd = [c if c != "--direct=1" else "--direct=0" for c in cmd]
        fmt, timeout = "fio-json", runtime * 10 + 120
    elif tool == "ioping":
        cmd = ioping_command(test, path, ioping_count)
        if not direct:
            cmd.remove("-D")
        fmt, timeout = "ioping-human", 600
    else:
        dd_size = min(size, GiB)
        cmd = dd_command(dd_path, dd_size)
        fmt, timeout = "dd", 3600
    options = dict(test["options"])
    if tool == "fio":
        options.update({"size": str(size), "runtime": str(runtime), "time_based": "1"})
    elif tool == "ioping":
        options.update(
            {
                "count": str(ioping_count),
                "interval": IOPING_INTERVAL,
                "direct": "1" if direct else "0",
            }
        )
    else:
        options.update({"count": str(max(1, min(size, GiB) // MiB))})
    result = {
        "test_id": test["test_id"],
        "tool": tool,
        "direction": test["direction"],
        "title": test["title"],
        "group": test["group"],
        "options": options,
        "command": cmd,
        "tool_version": versions.get(tool),
        "comparability_key": suite.comparability_key(
            test["test_id"], tool, options, versions.get(tool)
        ),
        "preconditioned": test["direction"] == "write",
        "warmup_discarded": True,
        "extra_repeats": 0,
        "repeats": [],
    }

    def once(label):
        progress.step(f"{test['test_id']} {label}")
        started = bundle_mod.now()
        text = run_tool(cmd, timeout)
        if tool == "dd" and dd_path != path:
            os.unlink(dd_path)  # its own file; on a device dd wrote the device
        parsed = parsers.parse(
            text, fmt, source=test["test_id"], direction=test["direction"]
        )
        return started, text, parsed["records"]

    once("warm-up (discarded)")
    records_per_repeat = []
    index = 0
    while True:
        started, text, records = once(f"repeat {index + 1}")
        result["repeats"].append(
            {
                "index": index,
                "started": started,
                "records": records,
                "raw": bundle_mod.encode_raw(text, fmt, test["direction"]),
            }
        )
        records_per_repeat.append(records)
        index += 1
        if index < repeats:
            continue
        cv = coefficient_of_variation(
            main_metric_values(records_per_repeat, test["metric"], test["direction"])
        )
        if cv is not None and cv > CV_THRESHOLD and index < max_repeats:
            result["extra_repeats"] += 1
            progress.total += 1
            continue
        break
    return result
