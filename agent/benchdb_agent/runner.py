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
import stat
import subprocess
import sys
import tempfile
import threading
import time

from . import bundle as bundle_mod
from . import detect, parsers, safety, stats, suite, vocab

MiB = 2**20
GiB = 2**30
# Spread of the repeats (coefficient of variation of the test's main metric)
# above which more repeats are run, as the Phoronix Test Suite does.
CV_THRESHOLD = 0.10
# ioping: one request every 10 ms for as long as a fio test measures (its
# runtime), so a repeat holds enough requests (about 200 in the quick profile's
# 2 s, 1,000 in 10 s) for a stable figure; --ioping-count caps the number.
IOPING_INTERVAL = "0.01"
# ioping -J (JSON, exact nanoseconds) appeared in 1.2; older ones print text.
IOPING_JSON_SINCE = (1, 2)
# RAM-backed filesystems: recent tmpfs even accepts O_DIRECT, so the probe
# alone cannot tell.
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs", "devtmpfs", "hugetlbfs")
TOOL_PACKAGES = {"fio": "fio", "ioping": "ioping", "dd": "coreutils"}
# Mount options that make every write synchronous (mount(8)).
SYNC_MOUNT_OPTIONS = ("sync", "dirsync")


class RunError(RuntimeError):
    pass


class RoleRefused(RunError):
    """The role asked for contradicts what detection sees (exit 2)."""


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


class ToolClock:
    """The wall time of every tool process a run starts (fio, ioping, dd,
    their version probes), so the agent's own time is the rest: the bundle's
    ``timing`` and each repeat's ``tool_wall_s`` (bench --agent-overhead)."""

    def __init__(self):
        self.seconds = 0.0
        self.processes = 0

    def add(self, seconds: float) -> float:
        self.seconds += seconds
        self.processes += 1
        return seconds


def tool_version(tool: str, clock: ToolClock | None = None) -> str | None:
    started = time.monotonic()
    try:
        return _tool_version(tool)
    finally:
        if clock is not None:
            clock.add(time.monotonic() - started)


def _tool_version(tool: str) -> str | None:
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


def ioping_json(version: str | None) -> bool:
    """Whether this ioping (``ioping -v``'s line, "ioping 1.3") prints -J."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= IOPING_JSON_SINCE


def ioping_command(
    test: dict, path: str, count: int | None, seconds: int, json_out: bool
) -> list:
    """ioping for ``seconds`` (``-w``, as fio's --runtime), at most ``count``
    requests if given, with -J where the installed ioping has it."""
    opts = test["options"]
    cmd = ["ioping", "-w", str(seconds), "-i", IOPING_INTERVAL, "-D"]
    if count:
        cmd += ["-c", str(count)]
    cmd += ["-s", opts["size"]]
    if json_out:
        cmd.append("-J")
    if opts.get("linear") == "1":
        cmd.append("-L")
    if opts.get("write") == "1":
        # Our own test file: ioping asks for -WWW before it writes to a file.
        cmd.append("-WWW")
    cmd.append(path)
    return cmd


def dd_command(path: str, size: int, conv: str = "fdatasync") -> list:
    count = max(1, size // MiB)
    return [
        "dd",
        "if=/dev/zero",
        f"of={path}",
        "bs=1M",
        f"count={count}",
        f"conv={conv}",
    ]


class Stopped(BaseException):
    """The run was told to stop (SIGTERM, SIGHUP, SIGINT): finish nothing
    more, keep what is done."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


SIGNAL_NAMES = {
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
    signal.SIGINT: "SIGINT (Ctrl-C)",
}


def kill_group(proc, grace: float = 3.0) -> None:
    """Stop a tool and everything it started (its own process group):
    SIGTERM, then SIGKILL, and wait until the group is empty."""
    pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def _stop_with_agent():
    """A ``preexec_fn`` that has the kernel send SIGTERM to the tool when the
    agent dies, however it dies (Linux ``PR_SET_PDEATHSIG``): after a
    SIGKILL nothing of the agent runs to stop fio, which would otherwise
    measure on to its own runtime.  None where the call is unavailable
    (not Linux, no libc): the tool then ends at its runtime, as before."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:  # the agent died before the call
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def run_tool(cmd: list, timeout: float, clock: ToolClock | None = None) -> str:
    """Run a tool in its own process group (start_new_session) and return
    what it printed (stderr for dd).  Whatever ends this call (a signal, an
    exception, a timeout) stops the whole group before it returns.  The
    process's wall time, start to exit, is added to ``clock``."""
    env = dict(os.environ, LC_ALL="C", LANG="C")
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_stop_with_agent(),
    )
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RunError(
                f"{cmd[0]} did not finish within {timeout:.0f} s and was stopped"
            ) from None
    finally:
        if clock is not None:
            clock.add(time.monotonic() - started)
        kill_group(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    if proc.returncode != 0:
        tail = (err or out).strip().splitlines()[-3:]
        raise RunError(f"{cmd[0]} failed (exit {proc.returncode}): {' / '.join(tail)}")
    return err if cmd[0] == "dd" else out


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


# Seconds without a touch of the heartbeat file after which a run started by
# `vm` stops as on SIGTERM: the host side that watches it is gone (killed).
HEARTBEAT_TIMEOUT = 60.0


class Heartbeat:
    """Stop the run (SIGTERM to itself, so it ends in order: tools stopped,
    files removed, a partial bundle) when ``path`` has not been touched for
    ``timeout`` seconds.  `vm` touches it in the guest while it watches the
    run, so a `vm` killed on the host does not leave fio running in the
    guest."""

    def __init__(self, path: str, timeout: float = HEARTBEAT_TIMEOUT):
        self.path = path
        self.timeout = timeout
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        return False

    def _loop(self) -> None:
        while not self._stop.wait(min(5.0, self.timeout / 4)):
            try:
                age = time.time() - os.stat(self.path).st_mtime
            except OSError:
                age = float("inf")
            if age > self.timeout:
                self.fired = True
                sys.stderr.write(
                    f"benchdb-agent: {self.path} not touched for {self.timeout:.0f} s: "
                    "the host side that started this run is gone; stopping\n"
                )
                os.kill(os.getpid(), signal.SIGTERM)
                return


class Cleanup:
    """Remove the agent's files whatever happens, and turn SIGTERM, SIGHUP
    and SIGINT into ``Stopped`` so a run ends in order: the tool's process
    group stopped, the test files removed, the finished tests kept."""

    def __init__(self):
        self.paths = []
        self.previous = {}
        self.late = None

    def add(self, path: str) -> None:
        self.paths.append(path)

    def __enter__(self):
        for sig in SIGNAL_NAMES:
            try:
                self.previous[sig] = signal.signal(sig, self._raise)
            except (ValueError, OSError):  # not the main thread
                pass
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Stopped(SIGNAL_NAMES.get(signum, f"signal {signum}"))

    def _remember(self, signum, frame):
        self.late = SIGNAL_NAMES.get(signum, f"signal {signum}")

    def quiet(self) -> None:
        """From now on a signal is noted, not raised: what is measured is
        being put together and must not be lost."""
        for sig in self.previous:
            signal.signal(sig, self._remember)

    def remove_files(self) -> None:
        for path in self.paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as err:
                sys.stderr.write(f"benchdb-agent: could not remove {path}: {err}\n")

    def __exit__(self, *exc):
        self.quiet()
        self.remove_files()
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


def _warnings_for(env: dict, tags: dict, size: int, buffered: bool) -> list:
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
    if buffered:
        add(
            "buffered-io",
            "the target is served from RAM or does not support O_DIRECT: the ",
            "tests ran buffered (direct=0) and the figures include the page ",
            "cache; they are not disk figures and are compared only with other ",
            "buffered results",
        )
    options = (env.get("target") or {}).get("mount_options") or []
    synchronous = [o for o in options if o in SYNC_MOUNT_OPTIONS]
    if synchronous:
        add(
            "sync-mount",
            f"the target's filesystem is mounted with {','.join(synchronous)}: ",
            "every write waits for the disk, so write figures are not those of ",
            "an ordinary mount (environment.target.mount_options)",
        )
    virt = (env.get("virtualization") or {}).get("type")
    if vocab.is_virtual_machine(virt) and not tags.get("disk_type"):
        add(
            "disk-type-unseen",
            f"inside a virtual machine ({virt}) the disk's type cannot be seen ",
            "(a virtual disk's rotational flag says nothing of what backs it), ",
            "so none is recorded: tag it with --tag disk_type=nvme-ssd (or ",
            "sata-ssd, hdd, network...), or run `benchdb-agent vm` on the host, ",
            "which tags it from the host's disk",
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


def _cpu_times():
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
        values = [int(v) for v in fields]
    except (OSError, ValueError):
        return None
    return sum(values[:8]), (values[7] if len(values) > 7 else 0)


def _loadavg():
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class LoadSampler:
    """Load average and CPU steal sampled through the run (every second)."""

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self.loads = []
        self.steal_peaks = []
        self.start_times = _cpu_times()
        self.end_times = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        last = _cpu_times()
        while not self._stop.wait(self.interval):
            load = _loadavg()
            if load is not None:
                self.loads.append(load)
            now_t = _cpu_times()
            if last and now_t and now_t[0] > last[0]:
                self.steal_peaks.append((now_t[1] - last[1]) / (now_t[0] - last[0]))
            last = now_t

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.end_times = _cpu_times()
        load = _loadavg()
        if load is not None:
            self.loads.append(load)

    def summary(self) -> dict:
        out = {"samples": len(self.loads), "cpus": os.cpu_count()}
        if self.loads:
            out["loadavg_1m_max"] = max(self.loads)
            out["loadavg_1m_mean"] = round(sum(self.loads) / len(self.loads), 2)
        a, b = self.start_times, self.end_times
        out["steal_share"] = (
            round((b[1] - a[1]) / (b[0] - a[0]), 4) if a and b and b[0] > a[0] else None
        )
        out["steal_share_max_1s"] = (
            round(max(self.steal_peaks), 4) if self.steal_peaks else None
        )
        return out


# Thresholds past which the run gets a warning: steal (share of CPU time),
# and the one-minute load average beyond the CPUs plus the agent's own tool.
STEAL_WARN = 0.05
LOAD_MARGIN = 1.0


def _load_warnings(load: dict) -> list:
    out = []
    steal = load.get("steal_share")
    if steal is not None and steal > STEAL_WARN:
        out.append(
            {
                "code": "cpu-steal",
                "message": f"{steal:.1%} of CPU time was stolen by the hypervisor "
                "during the run: the host was busy, figures may be low and noisy",
            }
        )
    peak, cpus = load.get("loadavg_1m_max"), load.get("cpus")
    if peak is not None and cpus and peak > cpus + LOAD_MARGIN:
        out.append(
            {
                "code": "high-load",
                "message": f"the load average reached {peak:.2f} on {cpus} CPUs "
                "during the run (the benchmark itself adds about 1): other work "
                "competed with it, figures may be low and noisy",
            }
        )
    return out


def check_memory_target(path: str, is_block: bool, allow_buffered: bool) -> list:
    """Why the target is served from RAM (empty: it is not); refuses unless
    ``allow_buffered``."""
    if is_block:
        st = os.stat(path)
        reasons = safety.block_memory_backing(
            f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        )
    else:
        reasons = safety.memory_backing(path)
    if reasons and not allow_buffered:
        raise RunError(
            f"{'; '.join(reasons)}: the figures would be memory figures, not disk "
            "figures. Choose a target on a disk (or --allow-buffered to record "
            "them marked as buffered, compared only with other buffered results)"
        )
    return reasons


def probe_dd(directory: str, clock: ToolClock | None = None) -> tuple:
    """(conv flag, None) for a dd that works here, or (None, why not).

    GNU dd takes conv=fdatasync; busybox and BSD dd may not, and take
    conv=fsync instead; a dd that prints no statistics line cannot be
    measured at all.  Asked before the run, on a 1 MiB file."""
    probe = os.path.join(directory, f".benchdb-ddprobe-{os.getpid()}")
    problems = []
    try:
        for conv in ("fdatasync", "fsync"):
            cmd = ["dd", "if=/dev/zero", f"of={probe}", "bs=1M", "count=1"]
            try:
                text = run_tool(cmd + [f"conv={conv}"], timeout=60, clock=clock)
            except (RunError, OSError) as exc:
                problems.append(f"conv={conv}: {exc}")
                continue
            try:
                parsers.parse(text, "dd", direction="write")
            except parsers.ParseError:
                return None, (
                    "it prints no statistics line (a busybox built without "
                    "FEATURE_DD_THIRD_STATUS_LINE?), so there is nothing to measure"
                )
            return conv, None
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
    return None, "; ".join(problems)


class Context:
    """Where and how the tests run."""

    def __init__(self, **kw):
        self.path = None
        self.dd_path = None
        self.size = 0
        self.runtime = 0
        self.repeats = 0
        self.max_repeats = 0
        self.ioping_count = 0
        self.buffered = False
        self.dd_conv = "fdatasync"
        self.unusable = {}
        self.versions = {}
        self.preconditioned = False
        self.device = False
        self.clock = ToolClock()
        self.__dict__.update(kw)


def plan_for(profile: str, runtime=None, repeats=None, max_repeats=None, size=None):
    d = suite.PROFILE_DEFAULTS[profile]
    repeats = repeats or d["repeats"]
    return {
        "profile": profile,
        "runtime_s": runtime or d["runtime"],
        "repeats": repeats,
        "max_repeats": max(max_repeats or d.get("max_repeats") or repeats * 2, repeats),
        "ioping_count": d["ioping_count"],
        "size": size or d.get("size"),
        "size_choice": None if size else d.get("size_choice"),
        "warmup_runtime": min(d.get("warmup_runtime") or 10**9, runtime or 10**9)
        if d.get("warmup_runtime")
        else None,
    }


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
    precondition: bool = True,
    allow_virtual_host: bool = False,
    heartbeat: str | None = None,
    heartbeat_timeout: float = HEARTBEAT_TIMEOUT,
) -> dict:
    """Run a profile against a target directory (or a blank ``device``
    already passed by safety.check_device) and return the bundle.

    The bundle comes back even when the run was stopped by a signal or some
    tests failed: ``partial`` is then true, ``stop_reason`` says why, and
    every test that did not run is in ``not_run`` with its error.  A
    ``Stopped`` or ``RunError`` escapes only before the first measurement.
    """
    began = time.monotonic()
    tags = dict(tags or {})
    tests = suite.tests_for(profile)
    if only:
        unknown = sorted(set(only) - {t["test_id"] for t in tests})
        if unknown:
            raise RunError(f"not in the {profile} profile: {', '.join(unknown)}")
        tests = [t for t in tests if t["test_id"] in only]
    plan = plan_for(profile, runtime, repeats, max_repeats, size)
    if ioping_count:
        plan["ioping_count"] = ioping_count
    plan["allow_virtual_host"] = allow_virtual_host
    with Cleanup() as cleanup:
        if device:
            doc, ctx = _prepare_device(
                device,
                tests,
                plan,
                tags,
                role,
                pair_id,
                include_identifiers,
                allow_buffered,
                precondition,
            )
        else:
            doc, ctx = _prepare_target(
                target,
                tests,
                plan,
                tags,
                role,
                pair_id,
                include_identifiers,
                allow_buffered,
                cleanup,
            )
        if heartbeat:
            with Heartbeat(heartbeat, heartbeat_timeout) as watch:
                _measure(doc, tests, ctx, cleanup, progress_stream)
            if watch.fired:
                doc["warnings"].append(
                    {
                        "code": "host-gone",
                        "message": f"stopped: {heartbeat} was not touched for "
                        f"{watch.timeout:.0f} s (the host side that started "
                        "this run was gone)",
                    }
                )
        else:
            _measure(doc, tests, ctx, cleanup, progress_stream)
        if ctx.device:
            _blank_ends(device, doc)
    doc["timing"] = {
        "run_s": round(time.monotonic() - began, 6),
        "tool_s": round(ctx.clock.seconds, 6),
        "tool_processes": ctx.clock.processes,
    }
    return doc


def _blank_ends(device: str, doc: dict) -> None:
    """Zero the first and last MiB of a device the agent wrote (it was blank:
    the safety check passed), so it reads as blank again for the next run."""
    try:
        with open(device, "r+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            span = min(MiB, size)
            for offset in (0, size - span):
                fh.seek(offset)
                fh.write(b"\0" * span)
            fh.flush()
            os.fsync(fh.fileno())
        doc["environment"]["target"]["left_blank"] = True
    except OSError as exc:
        sys.stderr.write(
            f"benchdb-agent: could not blank the ends of {device}: {exc}\n"
        )


def check_role(env: dict, role: str, allow_virtual_host: bool) -> None:
    """A host baseline is bare metal: refuse ``role`` host where detection
    finds a hypervisor, unless allowed (the bundle is then marked
    ``virtual_host`` and the server never uses it as a baseline)."""
    virt = (env.get("virtualization") or {}).get("type")
    if role != "host" or not vocab.is_virtual_machine(virt) or allow_virtual_host:
        return
    evidence = "; ".join((env.get("virtualization") or {}).get("evidence") or [])[:300]
    raise RoleRefused(
        f"--role host, but this machine is a virtual machine ({virt}: {evidence}): "
        "a host baseline must run on the host itself, where the real disk is. "
        "Run it there, or pass --allow-virtual-host to measure this VM as a host "
        "anyway (marked virtual_host: never used as a bare-metal baseline)"
    )


# The agent's own files in a target: its test file and dd's, named with the
# PID of the run that made them, and its short-lived probes.
OWN_FILE = re.compile(r"^(?:benchdb-(?:test|dd)\.|\.benchdb-(?:ddprobe|odirect)-)(\d+)")


def _agent_alive(pid: int) -> bool:
    """Whether ``pid`` is a running benchdb agent (not a reused PID)."""
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"benchdb" in fh.read()
    except OSError:
        return False


def remove_leftovers(target: str) -> list:
    """Remove what an earlier run on ``target`` left behind (it was killed
    with SIGKILL, or the machine stopped); return what was removed, as
    phrases.  A file of a run still going is left alone."""
    removed = []
    try:
        names = sorted(os.listdir(target))
    except OSError:
        return removed
    for name in names:
        m = OWN_FILE.match(name)
        if not m or _agent_alive(int(m.group(1))):
            continue
        path = os.path.join(target, name)
        try:
            size = os.stat(path).st_size
            os.unlink(path)
        except OSError:
            continue
        removed.append(f"{name} ({size // MiB} MiB, left by run {m.group(1)})")
    if removed:
        sys.stderr.write(
            "benchdb-agent: removed what an earlier run that was killed left in "
            f"{target}: {', '.join(removed)}\n"
        )
    return removed


def _new_doc(env, tags, role, pair_id, plan, ctx) -> dict:
    doc = bundle_mod.new_bundle(
        role=role,
        profile=plan["profile"],
        environment=env,
        tags=tags,
        pair_id=pair_id,
    )
    doc["warnings"] = _warnings_for(env, tags, ctx.size, ctx.buffered)
    if role == "host" and vocab.is_virtual_machine(
        (env.get("virtualization") or {}).get("type")
    ):
        doc["virtual_host"] = True
        doc["warnings"].append(
            {
                "code": "virtual-host",
                "message": "a host run inside a virtual machine "
                "(--allow-virtual-host): not a bare-metal baseline, kept out of "
                "pairing and the overhead report",
            }
        )
    doc["environment"]["test_file_bytes"] = ctx.size
    doc["partial"] = False
    doc["stop_reason"] = None
    doc["not_run"] = []
    doc["buffered"] = ctx.buffered
    doc["plan"] = {
        "runtime_s": ctx.runtime,
        "repeats": ctx.repeats,
        "max_repeats": ctx.max_repeats,
        "ioping_count": ctx.ioping_count,
        "ioping_time_s": ctx.runtime,
        "test_file_bytes": ctx.size,
        "warmup_runtime_s": ctx.warmup_runtime or ctx.runtime,
        "size_choice": plan.get("size_choice")
        or "set with --size: the file is as large as asked",
    }
    return doc


def _prepare_target(
    target,
    tests,
    plan,
    tags,
    role,
    pair_id,
    include_identifiers,
    allow_buffered,
    cleanup,
):
    if not target or not os.path.isdir(target):
        raise RunError(f"{target} is not a directory (use --device for a block device)")
    env = detect.detect(target, include_identifiers=include_identifiers)
    check_role(env, role, plan["allow_virtual_host"])
    needed = sorted({t["tool"] for t in tests})
    missing = [TOOL_PACKAGES[t] for t in needed if shutil.which(t) is None]
    if missing:
        hint = safety.install_hint(missing, env["os"].get("id"))
        raise RunError(f"missing {', '.join(missing)}: install with `{hint}`")
    reasons = check_memory_target(target, False, allow_buffered)
    fs = (env.get("target") or {}).get("filesystem")
    direct_ok = safety.supports_o_direct(target) and fs not in MEMORY_FILESYSTEMS
    if not direct_ok and not allow_buffered:
        raise RunError(
            f"{target} ({fs}) does not support O_DIRECT, so the page cache would be "
            "measured instead of the disk: the figures would not be disk figures; "
            "choose a target on a disk filesystem (or --allow-buffered to record "
            "buffered figures, marked as such)"
        )
    if not direct_ok:
        reasons = reasons + [f"{target} ({fs}) does not support O_DIRECT"]
    leftovers = remove_leftovers(target)
    size = plan["size"] or default_size(env.get("memory_bytes"))
    ctx = _context(plan, size, buffered=bool(reasons))
    ctx.memory_reasons = reasons
    if any(t["tool"] == "dd" for t in tests):
        _probe_dd_into(ctx, target)
    runs_dd = any(t["tool"] == "dd" for t in tests) and "dd" not in ctx.unusable
    safety.check_free_space(target, size, min(size, GiB) if runs_dd else 0)
    ctx.versions = {tool: tool_version(tool, ctx.clock) for tool in needed}
    ctx.path = os.path.join(target, f"benchdb-test.{os.getpid()}.bin")
    ctx.dd_path = os.path.join(target, f"benchdb-dd.{os.getpid()}.bin")
    cleanup.add(ctx.path)
    cleanup.add(ctx.dd_path)
    ctx.precondition_cmd = [
        "fio",
        "--name=layout",
        f"--filename={ctx.path}",
        f"--size={size}",
        "--rw=write",
        "--bs=1m",
        "--direct=0" if ctx.buffered else "--direct=1",
        "--ioengine=psync",
        "--output-format=json",
    ]
    ctx.precondition_label = f"laying out the {size // MiB} MiB test file"
    doc = _new_doc(env, tags, role, pair_id, plan, ctx)
    doc["preconditioning"] = {
        "done": False,
        "method": "the whole test file written sequentially once (1 MiB blocks) "
        "before the first test, so no test reads unwritten blocks",
        "bytes": size,
    }
    _note_memory(doc, ctx)
    if leftovers:
        doc["warnings"].append(
            {
                "code": "leftovers-removed",
                "message": "removed what an earlier, killed run left in the "
                f"target: {', '.join(leftovers)}",
            }
        )
    return doc, ctx


def _prepare_device(
    device,
    tests,
    plan,
    tags,
    role,
    pair_id,
    include_identifiers,
    allow_buffered,
    precondition,
):
    with open(device, "rb") as fh:
        device_bytes = fh.seek(0, os.SEEK_END)
    size = min(plan["size"] or device_bytes, device_bytes)
    is_block = stat.S_ISBLK(os.stat(device).st_mode)
    reasons = check_memory_target(device, is_block, allow_buffered)
    env = detect.detect(None, include_identifiers=include_identifiers)
    check_role(env, role, plan["allow_virtual_host"])
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
    needed = sorted({t["tool"] for t in tests})
    missing = [TOOL_PACKAGES[t] for t in needed if shutil.which(t) is None]
    if missing:
        hint = safety.install_hint(missing, env["os"].get("id"))
        raise RunError(f"missing {', '.join(missing)}: install with `{hint}`")
    ctx = _context(plan, size, buffered=bool(reasons), device=True)
    ctx.memory_reasons = reasons
    if any(t["tool"] == "dd" for t in tests):
        _probe_dd_into(ctx, tempfile.gettempdir())
    ctx.versions = {tool: tool_version(tool, ctx.clock) for tool in needed}
    ctx.path = ctx.dd_path = device
    doc = _new_doc(env, tags, role, pair_id, plan, ctx)
    method = (
        f"the measured range (the first {size} bytes) written sequentially once "
        "(1 MiB blocks, queue depth 8) before the first test, as SNIA PTS's "
        "workload-independent preconditioning does (one pass, not two)"
    )
    if precondition:
        ctx.precondition_cmd = [
            "fio",
            "--name=precondition",
            f"--filename={device}",
            f"--size={size}",
            "--rw=write",
            "--bs=1m",
            "--iodepth=8",
            "--ioengine=libaio",
            "--direct=0" if ctx.buffered else "--direct=1",
            "--output-format=json",
        ]
        ctx.precondition_label = f"preconditioning: writing {size // MiB} MiB"
    else:
        method = "not done (--no-precondition): read tests may read unwritten blocks"
        doc["warnings"].append(
            {
                "code": "not-preconditioned",
                "message": "the device was not preconditioned: reads of blocks "
                "never written may be served without touching the medium",
            }
        )
    doc["preconditioning"] = {"done": False, "method": method, "bytes": size}
    _note_memory(doc, ctx)
    return doc, ctx


def _note_memory(doc, ctx) -> None:
    if ctx.memory_reasons:
        doc["environment"]["memory_backing"] = ctx.memory_reasons
        doc["warnings"].append(
            {
                "code": "ram-backed-target",
                "message": "the target is served from RAM: "
                + "; ".join(ctx.memory_reasons),
            }
        )
    if "dd" in ctx.unusable:
        doc["warnings"].append(
            {
                "code": "tool-unusable",
                "message": f"dd is unusable here: {ctx.unusable['dd']}",
            }
        )


def _context(plan, size, buffered, device=False) -> Context:
    return Context(
        size=size,
        runtime=plan["runtime_s"],
        repeats=plan["repeats"],
        max_repeats=plan["max_repeats"],
        ioping_count=plan["ioping_count"],
        warmup_runtime=plan.get("warmup_runtime"),
        buffered=buffered,
        device=device,
        precondition_cmd=None,
        precondition_label="",
        memory_reasons=[],
    )


def _probe_dd_into(ctx, directory) -> None:
    conv, why = probe_dd(directory, ctx.clock)
    if conv is None:
        ctx.unusable["dd"] = why
        sys.stderr.write(
            f"benchdb-agent: dd is unusable here, its test will not run: {why}\n"
        )
    else:
        ctx.dd_conv = conv


def _measure(doc, tests, ctx, cleanup, progress_stream) -> None:
    runs = len(tests) * (1 + ctx.repeats) + (1 if ctx.precondition_cmd else 0)
    progress = Progress(runs, progress_stream)
    sampler = LoadSampler()
    sampler.start()
    stop = None
    try:
        if ctx.precondition_cmd:
            progress.step(ctx.precondition_label)
            try:
                seconds = ctx.clock.seconds
                run_tool(ctx.precondition_cmd, timeout=24 * 3600, clock=ctx.clock)
                doc["preconditioning"]["wall_s"] = round(ctx.clock.seconds - seconds, 6)
            except Stopped as exc:
                stop = exc.reason
            else:
                ctx.preconditioned = True
                doc["preconditioning"]["done"] = True
        for test in tests:
            if stop is None:
                stop = _one_test(doc, test, ctx, progress)
            else:
                doc["not_run"].append(
                    _not_run(test, "not-run", f"not run: the run was stopped by {stop}")
                )
    finally:
        cleanup.quiet()
        sampler.stop()
        progress.close()
    load = sampler.summary()
    doc["environment"]["load"] = load
    doc["environment"]["steal_share"] = load.get("steal_share")
    if load.get("loadavg_1m_max") is not None:
        doc["environment"]["load_average"] = load["loadavg_1m_max"]
    doc["warnings"] += _load_warnings(load)
    if stop is not None:
        doc["partial"] = True
        doc["stop_reason"] = (
            f"stopped by {stop}: {len(doc['tests'])} of {len(tests)} tests have results"
        )
    elif doc["not_run"] or any(t.get("status") != "complete" for t in doc["tests"]):
        failed = len(doc["not_run"]) + sum(
            1 for t in doc["tests"] if t.get("status") != "complete"
        )
        doc["partial"] = True
        doc["stop_reason"] = f"{failed} of {len(tests)} tests failed or did not run"
    if doc["partial"]:
        doc["warnings"].append({"code": "partial-run", "message": doc["stop_reason"]})


def _not_run(test, status, error) -> dict:
    return {
        "test_id": test["test_id"],
        "tool": test["tool"],
        "title": test["title"],
        "status": status,
        "error": error,
    }


def _one_test(doc, test, ctx, progress):
    """Run one test into the bundle; return the stop reason if stopped."""
    if test["tool"] in ctx.unusable:
        why = f"{test['tool']} is unusable here: {ctx.unusable[test['tool']]}"
        doc["not_run"].append(_not_run(test, "failed", why))
        progress.total -= 1 + ctx.repeats
        return None
    result = _new_result(test, ctx)
    stop = error = None
    try:
        _run_repeats(result, test, ctx, progress)
        status = "complete"
    except Stopped as exc:
        stop, status, error = exc.reason, "partial", f"stopped by {exc.reason}"
    except (RunError, parsers.ParseError, OSError, subprocess.SubprocessError) as exc:
        status, error = "failed", str(exc)
    result["status"] = status
    if error:
        result["error"] = error
    if result["repeats"]:
        doc["tests"].append(result)
        if status == "failed":
            doc["warnings"].append(
                {
                    "code": "test-failed",
                    "test_id": test["test_id"],
                    "message": f"{test['title']}: failed after "
                    f"{len(result['repeats'])} repeat(s): {error}",
                }
            )
    else:
        doc["not_run"].append(
            _not_run(test, "failed" if stop is None else "not-run", error)
        )
        if stop is None:
            doc["warnings"].append(
                {
                    "code": "test-failed",
                    "test_id": test["test_id"],
                    "message": f"{test['title']}: {error}",
                }
            )
    if result.get("unstable"):
        doc["warnings"].append(result.pop("unstable"))
    return stop


def _commands(test, ctx):
    tool = test["tool"]
    options = dict(test["options"])
    if tool == "fio":
        cmd = fio_command(test, ctx.path, ctx.size, ctx.runtime)
        if ctx.buffered:
            cmd = [c if c != "--direct=1" else "--direct=0" for c in cmd]
            options["direct"] = "0"
        options.update(
            {"size": str(ctx.size), "runtime": str(ctx.runtime), "time_based": "1"}
        )
        return cmd, options, "fio-json", ctx.runtime * 10 + 120
    if tool == "ioping":
        json_out = ioping_json(ctx.versions.get("ioping"))
        cmd = ioping_command(test, ctx.path, ctx.ioping_count, ctx.runtime, json_out)
        if ctx.buffered:
            cmd.remove("-D")
        options.update(
            {
                "work_time_s": str(ctx.runtime),
                "interval": IOPING_INTERVAL,
                "direct": "0" if ctx.buffered else "1",
            }
        )
        if ctx.ioping_count:
            options["count"] = str(ctx.ioping_count)
        fmt = "ioping-json" if json_out else "ioping-human"
        return cmd, options, fmt, ctx.runtime * 10 + 120
    dd_size = min(ctx.size, GiB)
    cmd = dd_command(ctx.dd_path, dd_size, ctx.dd_conv)
    options.update({"count": str(max(1, dd_size // MiB)), "conv": ctx.dd_conv})
    return cmd, options, "dd", 3600


def _new_result(test, ctx) -> dict:
    cmd, options, _fmt, _timeout = _commands(test, ctx)
    tool = test["tool"]
    key = suite.comparability_key(
        test["test_id"], tool, options, ctx.versions.get(tool)
    )
    if ctx.buffered:
        key += "|buffered"
    # dd writes a file of its own, new each time (except on a device).
    preconditioned = ctx.preconditioned and (tool != "dd" or ctx.device)
    return {
        "test_id": test["test_id"],
        "tool": tool,
        "direction": test["direction"],
        "title": test["title"],
        "group": test["group"],
        "options": options,
        "command": cmd,
        "tool_version": ctx.versions.get(tool),
        "comparability_key": key,
        "preconditioned": preconditioned,
        "buffered": ctx.buffered,
        "warmup_discarded": True,
        "extra_repeats": 0,
        "status": "complete",
        "cv": None,
        "repeats": [],
    }


def _run_repeats(result, test, ctx, progress) -> None:
    """The warm-up and the repeats of one test.  dd's own file is kept from
    one repeat to the next (dd truncates it before its clock starts, so each
    repeat writes a new file's blocks, as a rerun of the same dd command
    does) and removed when the test ends."""
    own_dd_file = test["tool"] == "dd" and not ctx.device
    try:
        _repeats(result, test, ctx, progress)
    finally:
        if own_dd_file:
            try:
                os.unlink(ctx.dd_path)
            except FileNotFoundError:
                pass


def _repeats(result, test, ctx, progress) -> None:
    cmd, _options, fmt, timeout = _commands(test, ctx)

    def once(label, command=cmd):
        progress.step(f"{test['test_id']} {label}")
        started = bundle_mod.now()
        before = ctx.clock.seconds
        text = run_tool(command, timeout, clock=ctx.clock)
        parsed = parsers.parse(
            text, fmt, source=test["test_id"], direction=test["direction"]
        )
        return started, text, parsed["records"], round(ctx.clock.seconds - before, 6)

    warm = cmd
    if test["tool"] == "fio" and ctx.warmup_runtime:
        warm = [
            f"--runtime={ctx.warmup_runtime}" if c.startswith("--runtime=") else c
            for c in cmd
        ]
    elif test["tool"] == "ioping" and ctx.warmup_runtime:
        at = cmd.index("-w") + 1
        warm = cmd[:at] + [str(ctx.warmup_runtime)] + cmd[at + 1 :]
    result["warmup_wall_s"] = once("warm-up (discarded)", warm)[3]
    records_per_repeat = []
    index = 0
    while True:
        started, text, records, wall = once(f"repeat {index + 1}")
        result["repeats"].append(
            {
                "index": index,
                "started": started,
                "tool_wall_s": wall,
                "records": records,
                "raw": bundle_mod.encode_raw(text, fmt, test["direction"]),
            }
        )
        records_per_repeat.append(records)
        index += 1
        cv = coefficient_of_variation(
            main_metric_values(records_per_repeat, test["metric"], test["direction"])
        )
        result["cv"] = None if cv is None else round(cv, 4)
        if index < ctx.repeats:
            continue
        if cv is not None and cv > CV_THRESHOLD and index < ctx.max_repeats:
            result["extra_repeats"] += 1
            progress.total += 1
            continue
        break
    if cv is not None and cv > CV_THRESHOLD:
        result["unstable"] = {
            "code": "unstable",
            "test_id": test["test_id"],
            "message": f"{test['title']}: the spread of the {len(result['repeats'])} "
            f"repeats stayed high (coefficient of variation {cv:.0%} of "
            f"{test['metric']}, above {CV_THRESHOLD:.0%}) up to the repeat cap: "
            "the figure is not stable",
        }


# What the figures of the agent's tables are (``summary_table``, vm's
# ``overhead_table``): the statistic the run page, lists and API show.
STATISTIC_LEGEND = (
    "geomean: the geometric mean of the repeats (stats.summarize), the figure "
    "benchdb's pages show"
)


def summary_table(doc: dict) -> str:
    """What was measured, for people: one line per test, each figure the
    geometric mean of the repeats with its 95% interval (``stats.summarize``),
    exactly what the run page will show for the same run."""
    tests = (
        suite.tests_for(doc["suite"]["profile"])
        if doc["suite"]["profile"] in (suite.PROFILES)
        else []
    )
    metric_of = {t["test_id"]: t["metric"] for t in tests}
    codes = {}
    for w in doc.get("warnings") or []:
        if w.get("test_id"):
            codes.setdefault(w["test_id"], []).append(w["code"])
    rows = [("test", "geomean", "95% interval", "latency", "repeats", "CV", "status")]
    for test in doc.get("tests") or []:
        metric = metric_of.get(test["test_id"]) or (
            "bw_bytes" if test["tool"] == "dd" else "iops"
        )
        series = repeat_series(test)
        figure = stats.summarize(series.get(metric, []))
        if stats.too_wide(figure["ci95_low"], figure["ci95_high"]):
            interval = stats.too_noisy_text(figure["n"])
        elif figure["ci95_low"] is not None:
            interval = (
                f"{stats.human(figure['ci95_low'], metric)} - "
                f"{stats.human(figure['ci95_high'], metric)}"
            )
        elif figure["min"] is not None:
            interval = (
                f"{stats.human(figure['min'], metric)} - "
                f"{stats.human(figure['max'], metric)} (min-max)"
            )
        else:
            interval = "-"
        lat_key = "lat_mean_ns" if series.get("lat_mean_ns") else "clat_mean_ns"
        latency = stats.summarize(series.get(lat_key, []))["gmean"]
        cv = test.get("cv")
        flags = [test.get("status", "complete")] + codes.get(test["test_id"], [])
        if test.get("buffered"):
            flags.append("buffered")
        rows.append(
            (
                test.get("title") or test["test_id"],
                # The run page's figure, said so where it is not a geometric
                # mean (present.result_cells).
                stats.human(stats.centre(figure), metric)
                + (
                    " (arithmetic mean)"
                    if figure["gmean"] is None and figure["mean"] is not None
                    else ""
                ),
                interval,
                stats.human(latency, lat_key),
                str(len(test["repeats"])),
                "-" if cv is None else f"{cv:.1%}",
                ", ".join(flags),
            )
        )
    for nr in doc.get("not_run") or []:
        rows.append(
            (
                nr.get("title") or nr["test_id"],
                "-",
                "-",
                "-",
                "0",
                "-",
                f"{nr['status']}: {nr.get('error') or ''}",
            )
        )
    last = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(last)]
    lines = []
    for r in rows:
        cells = [
            r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i])
            for i in range(last)
        ]
        lines.append("  ".join(cells) + "  " + r[last])
    lines.append(
        STATISTIC_LEGEND + ", with its 95% interval (log scale; "
        f"min-max below {stats.MIN_REPEATS} repeats); latency: its geometric mean"
    )
    general = [w for w in doc.get("warnings") or [] if not w.get("test_id")]
    if general:
        lines.append("")
        lines += [f"warning [{w['code']}]: {w['message']}" for w in general]
    if doc.get("partial"):
        lines.append(f"PARTIAL RUN: {doc.get('stop_reason')}")
    return "\n".join(lines)


def repeat_series(test: dict) -> dict:
    """Per metric, the test's per-repeat values in its own direction, as the
    server combines them (results.compare.aggregate_repeat): iops and
    bandwidth add up across jobs, a latency only where one record holds it."""
    direction = test.get("direction")
    out = {}
    for rep in test["repeats"]:
        recs = [r for r in rep["records"] if r["direction"] == direction]
        if not recs:
            continue
        for key in ("iops", "bw_bytes", "lat_mean_ns", "clat_mean_ns"):
            vals = [r.get(key) for r in recs]
            if None in vals or (len(vals) > 1 and key not in ("iops", "bw_bytes")):
                continue
            out.setdefault(key, []).append(sum(vals))
    return out
