"""``benchdb-agent vm`` on real QEMU guests, checked through benchdb's API.

Each test starts a plain QEMU VM (tests.guests.harness.start_qga_vm: the
Debian kernel + initramfs guest with Debian's qemu-guest-agent on its
virtio-serial port, a blank 1 GiB bench disk with drive id ``bench``), and
runs the agent's ``vm`` command on it as the README tells users to:
``python3 benchdb-agent.pyz vm ...`` with the file the server serves for
download (tests/conftest.py's ``served_pyz``), uploading to a live benchdb
with a real worker.  The test watches QEMU on its own QMP socket
(``query-block``) the whole time, so what it compares the stored runs with
is what QEMU really ran, not what the agent says.

Under software emulation each boot takes ~10-20 s and each guest run of the
shortened profile ~20 s: the three tests take about 8 minutes on 2 cores.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from benchdb.results.models import Run
from benchdb_agent import detect, qga, vocab
from benchdb_agent import vm as vm_mod
from tests.conftest import wait_for
from tests.guests import harness
from tests.waits import finish, log_tail

pytestmark = [
    pytest.mark.guest,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

# The shortened quick profile (as tests.guests.matrix runs it), two tests: a
# read and a write, where the cache modes differ most.
SHORT = [
    "--size",
    "64M",
    "--runtime",
    "1",
    "--repeats",
    "2",
    "--max-repeats",
    "2",
    "--test",
    "fio-rand-read-4k-q32t1",
    "--test",
    "fio-rand-write-4k-q32t1",
]
# Bounds, not expectations (measured in tests/guests/README.md): under TCG a
# boot reaches the guest agent in ~10-20 s on idle cores and ~100 s on cores
# loaded ~8 times over; a guest run of SHORT takes about a minute idle and
# minutes when loaded.  Past a bound the test fails with what it waited for,
# the agent's last lines and the guest's console, never hangs.
BOOT_TIMEOUT = 300
GUEST_TIMEOUT = ["--guest-timeout", "900"]
PAIR_TIMEOUT = 1800  # a boot, the host baseline, one guest run
SWEEP_TIMEOUT = 3600  # five restarts and guest runs (the write test only)
ABORT_TIMEOUT = 1200  # two restarts, one guest run, the restore


@pytest.fixture(scope="module")
def guest_build():
    return harness.build_guest()


class Watcher(threading.Thread):
    """Polls QEMU's query-block on the test's own QMP socket: the sequence
    of cache modes QEMU ran for the bench disk, consecutive repeats merged."""

    def __init__(self, sock: Path):
        super().__init__(daemon=True)
        self.sock = sock
        self.console = sock.parent / "console.log"
        self.seen = []
        self.stop = threading.Event()
        # For a failure's diagnosis: each boot's last console lines (QEMU
        # empties the file when the agent restarts it) and the bench disk's
        # virtqueue as QEMU last saw it.
        self.consoles = [""]
        self.queue = None

    def current(self) -> str | None:
        """The bench disk's cache mode now, once the guest has booted.

        query-block's ``writeback`` flag is the guest-visible write cache,
        which the guest's driver negotiates: while the guest boots (before
        virtio-blk has set its features) QEMU reports it off, so ``none``
        reads as directsync for a few seconds.  The guest prints "guest
        agent on" after its drivers are loaded; QEMU truncates the console
        log at each start, so the line is always this boot's.
        """
        try:
            booted = "guest agent on" in (self.console).read_text(errors="replace")
            blocks = harness.qmp(self.sock, "query-block", timeout=5)
        except (OSError, ValueError, harness.GuestError):
            return None  # QEMU is restarting
        if not booted:
            return None
        for block in blocks:
            if block["device"] == "bench" and block.get("inserted"):
                return harness.cache_mode_of(block)
        return None

    def run(self) -> None:
        polls = 0
        while not self.stop.is_set():
            mode = self.current()
            if mode and (not self.seen or self.seen[-1] != mode):
                self.seen.append(mode)
            self.keep_console()
            if polls % 10 == 0:
                self.queue = self.virtqueue() or self.queue
            polls += 1
            time.sleep(0.5)

    def keep_console(self) -> None:
        text = log_tail(self.console, 15)
        previous = self.consoles[-1]
        if len(text) < len(previous) and not text.startswith(previous[:40]):
            self.consoles.append(text)  # a new boot's console
        else:
            self.consoles[-1] = text

    def virtqueue(self) -> dict | None:
        """QEMU's view of the bench disk's request queue: a request the guest
        published but QEMU never took shows as the guest's avail index ahead
        of ``last-avail-idx`` with nothing ``inuse``."""
        try:
            for device in harness.qmp(self.sock, "x-query-virtio", timeout=5):
                if device["name"] == "virtio-blk":
                    return harness.qmp(
                        self.sock,
                        "x-query-virtio-queue-status",
                        {"path": device["path"], "queue": 0},
                        timeout=5,
                    )
        except (OSError, ValueError, KeyError, harness.GuestError):
            return None
        return None

    def diagnosis(self) -> str:
        boots = "\n--- next boot ---\n".join(self.consoles[-3:])
        return (
            f"modes QEMU ran: {self.seen}; the bench disk's virtqueue as QEMU "
            f"last saw it: {self.queue}\n--- the last boots' consoles ---\n{boots}"
        )


class Vm:
    """A plain QEMU VM the test starts; the agent may restart it."""

    def __init__(self, build: dict, workdir: Path, cache_mode: str):
        self.workdir = workdir
        self.proc = harness.start_qga_vm(build, workdir, cache_mode)
        self.argv = harness.qga_vm_command(build, workdir, cache_mode)
        guest = qga.Guest(qga.SocketChannel(str(workdir / "qga.sock")))
        try:
            guest.wait(BOOT_TIMEOUT)
        except BaseException as exc:
            said = self.diagnosis(f"the guest agent ({exc})")
            self.close()  # removes the console: said first
            if isinstance(exc, qga.QgaError):
                raise AssertionError(said) from None
            raise
        finally:
            guest.close()

    def diagnosis(self, what: str) -> str:
        """What was waited for, with the last lines of the guest's console
        and of QEMU's own output."""
        return (
            f"{what}\n--- guest console ---\n"
            f"{log_tail(self.workdir / 'console.log')}\n--- QEMU ---\n"
            f"{log_tail(self.workdir / 'qemu.log')}"
        )

    def pids(self) -> list[int]:
        """QEMU processes running this VM (ours, or restarted by the agent)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            argv = [a.decode() for a in raw.split(b"\0") if a]
            if cwd == str(self.workdir) and argv[:1] == ["qemu-system-x86_64"]:
                found.append((int(entry), argv))
        return found

    def close(self) -> None:
        self.proc.poll()
        for pid, _ in self.pids():
            os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        # A 1 GiB sparse image per VM: worth nothing once the test is done.
        shutil.rmtree(self.workdir, ignore_errors=True)


class Agent:
    """``python3 benchdb-agent.pyz vm ...`` as the README writes it, with the
    served file, in a folder of its own; output kept in files (a long sweep's
    progress lines would fill a pipe nobody reads)."""

    def __init__(self, pyz: Path, logs: Path, vm: Vm, *args: str):
        shutil.copy(pyz, logs / "benchdb-agent.pyz")
        self.vm = vm
        self.out, self.err = logs / "vm.stdout", logs / "vm.stderr"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                ["python3", "benchdb-agent.pyz", "vm", *args],
                cwd=logs,
                stdout=out,
                stderr=err,
            )

    def finish(self, timeout: float) -> tuple[int, str, str]:
        """Its exit code and output; past ``timeout`` it is killed and the
        test fails with the agent's last lines and the guest's console."""
        try:
            finish(self.proc, timeout, "benchdb-agent vm", [self.err])
        except AssertionError as exc:
            said = self.vm.diagnosis(str(exc))
            # The agent's restarted QEMU is a session of its own.
            self.vm.close()
            raise AssertionError(said) from None
        return self.proc.returncode, self.out.read_text(), self.err.read_text()


def assert_restored(vm: Vm, watcher: Watcher, least: int, mode: str) -> None:
    """QEMU ran its original ``mode`` again as the ``least``-th mode seen,
    and exactly one QEMU runs, with exactly the original command line."""
    wait_for(
        lambda: len(watcher.seen) >= least and watcher.seen[-1] == mode,
        120,
        what=f"QEMU restored to cache={mode} as mode {least} seen",
        logs=[vm.workdir / "console.log"],
    )
    watcher.stop.set()
    watcher.join(30)
    assert [argv for _, argv in vm.pids()] == [vm.argv]


def _runs(client: APIClient, **params) -> list[dict]:
    return client.get("/api/v1/runs/", {**params, "page_size": 100}).json()["results"]


def _stored(client: APIClient, worker, count: int, **params) -> list[dict]:
    return wait_for(
        lambda: (r := _runs(client, **params)) and len(r) >= count and r,
        timeout=180,
        what=f"{count} runs with {params} stored",
        logs=[worker.log_path],
    )


def _vm_args(vm: Vm, pid: int, server: str, out: Path, *extra: str) -> list:
    """The vm command's options; a sweep measures only the write test (the
    one cache modes change most), to keep six boots within a few minutes."""
    short = SHORT if "--cache-modes" not in extra else SHORT[:-4] + SHORT[-2:]
    return [
        *GUEST_TIMEOUT,
        "--qemu-pid",
        str(pid),
        "--disk",
        "bench",
        "--guest-device",
        "/dev/vda",
        *short,
        "--upload",
        server,
        "--out-dir",
        str(out),
        # A sweep's saved original configuration: not in /var/lib here.
        "--state-dir",
        str(out / "state"),
        *extra,
    ]


def test_paired_guest_and_host_runs_tagged_from_the_running_qemu(
    guest_build, served_pyz, celery_worker_process, live_server, tmp_path
):
    workdir = harness.cache_root() / "runs" / f"vm-pair-{os.getpid()}"
    vm = Vm(guest_build, workdir, "none")
    try:
        watcher = Watcher(workdir / "test-qmp.sock")
        ran = watcher.current()
        agent = Agent(
            served_pyz,
            tmp_path,
            vm,
            *_vm_args(vm, vm.proc.pid, live_server.url, tmp_path),
        )
        code, out, err = agent.finish(PAIR_TIMEOUT)
        assert code == 0, vm.diagnosis(f"the paired run (exit {code}): {err}")
        # The VM was not touched: same process, same configuration.
        assert vm.proc.poll() is None
        assert [argv for _, argv in vm.pids()] == [vm.argv]
        # The baseline ran next to the image and left nothing there.
        assert os.listdir(workdir / "disks") == ["bench.raw"]
    finally:
        vm.close()
    assert ran == "none"
    assert "guest vs host" in out and "fio-rand-write-4k-q32t1" in out
    client = APIClient()
    runs = _stored(client, celery_worker_process, 2)
    host = next(r for r in runs if r["role"] == "host")
    guest = next(r for r in runs if r["role"] == "guest")
    # Paired, even where this host is itself a VM (then marked virtual_host:
    # its guest's overhead is against it, no report takes it for bare metal).
    assert guest["pair_id"] == host["pair_id"] and guest["baseline"] == host["id"]
    here = detect.detect(None)["virtualization"]["type"]
    assert Run.objects.get(pk=host["id"]).virtual_host is vocab.is_virtual_machine(here)
    assert guest["cache_mode"] == ran  # what query-block said QEMU ran
    assert (guest["disk_bus"], guest["image_format"]) == ("virtio-blk", "raw")
    assert (guest["aio_mode"], guest["storage_backend"]) == ("threads", "file")
    assert guest["sweep_id"] == "" and host["sweep_id"] == ""
    detail = client.get(guest["url"]).json()
    assert detail["tag_sources"]["cache_mode"] == "host-config"
    assert set(detail["tag_sources"]) == set(detail["tags"])
    assert detail["environment"]["vm_host"]["qmp_cache_mode"] == "none"
    assert detail["environment"]["target"]["write_cache"] == "write back"
    for test in detail["tests"]:
        assert test["overhead"]["baseline_run"] == host["id"], test["test_id"]
    host_detail = client.get(host["url"]).json()
    assert host_detail["environment"]["target"]["path"].startswith(
        str(workdir / "disks" / ".benchdb-baseline-")
    )


SWEEP_SEED = 3
# A seed whose one-round order of none,unsafe is none first (checked below).
NONE_FIRST_SEED = 0


def test_sweep_of_all_five_cache_modes_restores_the_vm(
    guest_build, served_pyz, celery_worker_process, live_server, tmp_path
):
    modes = list(harness.CACHE_MODES)
    workdir = harness.cache_root() / "runs" / f"vm-sweep-{os.getpid()}"
    vm = Vm(guest_build, workdir, "writeback")
    watcher = Watcher(workdir / "test-qmp.sock")
    watcher.start()
    try:
        agent = Agent(
            served_pyz,
            tmp_path,
            vm,
            *_vm_args(vm, vm.proc.pid, live_server.url, tmp_path),
            "--cache-modes",
            "all",
            # One round in a known random order: every mode once.
            "--rounds",
            "1",
            "--sweep-seed",
            str(SWEEP_SEED),
            "--yes",
        )
        code, out, err = agent.finish(SWEEP_TIMEOUT)
        assert code == 0, f"{err[-3000:]}\n{watcher.diagnosis()}"
        # Every mode and back.
        assert_restored(vm, watcher, 7, "writeback")
    finally:
        watcher.stop.set()
        vm.close()
    order = [mode for _round, mode in vm_mod.sweep_plan(modes, 1, SWEEP_SEED)]
    assert watcher.seen == ["writeback", *order, "writeback"], watcher.seen
    assert "restored" in err and "/sweeps/sweep-" in err
    for mode in modes:
        assert f"\n{mode} " in "\n" + out  # a table row per mode
    client = APIClient()
    sweep_id = re.search(r"/sweeps/(sweep-[A-Za-z0-9._-]+)", err).group(1)
    runs = _stored(client, celery_worker_process, 6, sweep_id=sweep_id)
    assert {r["sweep_id"] for r in runs} == {sweep_id}
    host = [r for r in runs if r["role"] == "host"]
    guests = sorted((r for r in runs if r["role"] == "guest"), key=lambda r: r["id"])
    assert len(host) == 1 and len(guests) == 5
    # In the order QEMU ran them, each with the cache mode QEMU ran.
    assert [g["cache_mode"] for g in guests] == order
    for guest in guests:
        assert guest["baseline"] == host[0]["id"]
        detail = client.get(guest["url"]).json()
        assert detail["environment"]["vm_host"]["qmp_cache_mode"] == guest["cache_mode"]
        assert detail["tag_sources"]["cache_mode"] == "host-config"
        expected = harness.EXPECTED_WRITE_CACHE[guest["cache_mode"]]
        assert detail["environment"]["target"]["write_cache"] == expected
    page = client.get(f"/sweeps/{sweep_id}/")
    assert page.status_code == 200
    ids = [host[0]["id"]] + [g["id"] for g in guests]
    assert f"runs={'%2C'.join(str(i) for i in ids)}&amp;ref={host[0]['id']}" in (
        page.content.decode()
    )


def test_ctrl_c_in_the_middle_of_a_sweep_restores_the_vm(
    guest_build, served_pyz, celery_worker_process, live_server, tmp_path
):
    plan = vm_mod.sweep_plan(["none", "unsafe"], 1, NONE_FIRST_SEED)
    assert plan == [(1, "none"), (1, "unsafe")]
    workdir = harness.cache_root() / "runs" / f"vm-abort-{os.getpid()}"
    vm = Vm(guest_build, workdir, "writethrough")
    watcher = Watcher(workdir / "test-qmp.sock")
    watcher.start()
    agent = None
    try:
        agent = Agent(
            served_pyz,
            tmp_path,
            vm,
            *_vm_args(vm, vm.proc.pid, live_server.url, tmp_path),
            "--cache-modes",
            "none,unsafe",
            # One round whose random order is none, then unsafe.
            "--rounds",
            "1",
            "--sweep-seed",
            str(NONE_FIRST_SEED),
            "--yes",
        )
        # Interrupt once QEMU runs the second mode (the first is stored).
        wait_for(
            lambda: "unsafe" in watcher.seen,
            ABORT_TIMEOUT,
            what="QEMU to run the second mode",
            logs=[agent.err, workdir / "console.log"],
        )
        time.sleep(5)
        agent.proc.send_signal(signal.SIGINT)
        code, out, err = agent.finish(ABORT_TIMEOUT)
        assert code == 4, err[-3000:]  # stopped by a signal: partial (agent/README)
        assert_restored(vm, watcher, 4, "writethrough")
    finally:
        watcher.stop.set()
        if agent is not None and agent.proc.poll() is None:
            agent.proc.kill()  # the wait above ran out: no agent outlives it
            agent.proc.wait(30)
        vm.close()
    assert watcher.seen == ["writethrough", "none", "unsafe", "writethrough"]
    assert "restored" in err and "COULD NOT RESTORE" not in err
    client = APIClient()
    runs = _stored(client, celery_worker_process, 2)
    assert sorted(r["role"] for r in runs) == ["guest", "host"]
    assert [r["cache_mode"] for r in runs if r["role"] == "guest"] == ["none"]
