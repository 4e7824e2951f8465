"""vm's host CPU sampling, on real processes read from the real /proc: a
child that burns CPU in two named threads for about a second shows that
time as user time, in its threads by name, within the host's total CPU
time over the same interval; a process that cannot be read is said so."""

from __future__ import annotations

import subprocess
import sys
import time

from benchdb_agent import vm

# Two threads named like QEMU's (prctl PR_SET_NAME through ctypes), each
# spinning until it has used 0.3 s of CPU (however busy the machine), then
# they and the process sleep until killed.
BURN = r"""
import ctypes, threading, time
libc = ctypes.CDLL(None)
spun = threading.Barrier(3)
def spin(name):
    libc.prctl(15, name.encode(), 0, 0, 0)
    while time.thread_time() < 0.3:
        pass
    spun.wait()
    time.sleep(60)  # alive, as QEMU's iothreads and vCPUs are
ts = [threading.Thread(target=spin, args=(n,), daemon=True)
      for n in ("IO iothread1", "CPU 0/KVM")]
[t.start() for t in ts]
spun.wait()
print("done", flush=True)
time.sleep(60)
"""


def test_a_busy_process_is_measured_by_thread_within_the_host_total():
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True
    )
    try:
        sampler = vm.HostCpuSampler(child.pid, interval=0.1).begin()
        assert child.stdout.readline().strip() == "done"
        out = sampler.finish()
    finally:
        child.kill()
        child.wait()
    cpu = out["user_s"] + out["system_s"]
    assert 0.55 < cpu  # two threads used 0.3 s each (clock ticks of 10 ms)
    assert cpu <= out["host_busy_s"] <= out["host_total_s"]
    assert 0 < out["host_utilisation"] <= 1
    names = {t["name"]: t for t in out["threads"]}
    assert names["IO iothread1"]["kind"] == "iothread"
    assert names["CPU 0/KVM"]["kind"] == "vcpu"
    assert out["iothreads"] == ["IO iothread1"]
    # Their user + system time (two threads fighting over the GIL spend much
    # of it in futex calls).
    spun = sum(
        names[n]["user_s"] + names[n]["system_s"] for n in ("IO iothread1", "CPU 0/KVM")
    )
    assert 0.55 < spun <= out["user_s"] + out["system_s"] + 0.02
    assert out["voluntary_ctxt_switches"] + out["nonvoluntary_ctxt_switches"] > 0
    assert out["seconds"] > 0.3


def test_a_vm_whose_qemu_cannot_be_read_says_so():
    class Gone:
        pid = 0  # no pid: nothing to sample
        domain = None
        vmid = None

    assert vm.sample_host_cpu(Gone()) is None
    doc = {"warnings": [], "environment": {}}
    vm.record_host_cpu(doc, None)
    assert "host_cpu" not in doc["environment"]
    assert doc["warnings"][0]["code"] == "host-cpu-unmeasured"


def test_thread_kinds():
    assert vm.thread_kind("IO iothread0") == "iothread"
    assert vm.thread_kind("CPU 3/KVM") == "vcpu"
    assert vm.thread_kind("worker") == "other"
    assert vm.thread_kind("qemu-system-x86") == "other"
    busy, total = vm.host_cpu_ticks()
    time.sleep(0.05)
    assert 0 <= busy <= total
