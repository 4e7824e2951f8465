"""An interleaved cache-mode sweep on a real QEMU guest (tests.guests'
harness and test_vm_command's helpers): two modes, two rounds, each round in
the random order of its seed; QEMU is watched on its own QMP socket, so the
order checked is the order QEMU really ran, and every stored guest run
carries its round and place, shown on the sweep page with the modes paired
by round; and every guest run carries what its I/O cost the host's CPU
(QEMU's user + system time while it ran): non-zero, below the host's total
CPU time over the run, and shown per I/O on the run page.  About 8 minutes
under software emulation."""

from __future__ import annotations

import os
import re

import pytest
from rest_framework.test import APIClient

from benchdb.results import hostcost
from benchdb.results.models import Run
from benchdb_agent import vm as vm_mod
from tests.guests import harness
from tests.guests.test_vm_command import (  # noqa: F401
    SWEEP_TIMEOUT,
    Agent,
    Vm,
    Watcher,
    _stored,
    _vm_args,
    assert_restored,
    guest_build,
)

pytestmark = [
    pytest.mark.guest,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

MODES = ["none", "writeback"]
# Two rounds whose random orders alternate (none, writeback, none,
# writeback): QEMU is restarted into a different mode every time, so the
# watcher sees each run (it merges repeats of one mode).
SEED = 0


def test_two_modes_two_rounds_interleaved_and_recorded(
    guest_build,  # noqa: F811
    served_pyz,
    celery_worker_process,
    live_server,
    tmp_path,
):
    plan = vm_mod.sweep_plan(MODES, 2, SEED)
    order = [mode for _round, mode in plan]
    assert order == ["none", "writeback", "none", "writeback"]
    workdir = harness.cache_root() / "runs" / f"vm-rounds-{os.getpid()}"
    vm = Vm(guest_build, workdir, "writethrough")
    watcher = Watcher(workdir / "test-qmp.sock")
    watcher.start()
    try:
        agent = Agent(
            served_pyz,
            tmp_path,
            vm,
            *_vm_args(vm, vm.proc.pid, live_server.url, tmp_path),
            "--cache-modes",
            ",".join(MODES),
            "--rounds",
            "2",
            "--sweep-seed",
            str(SEED),
            "--yes",
        )
        code, out, err = agent.finish(SWEEP_TIMEOUT)
        assert code == 0, f"{err[-3000:]}\n{watcher.diagnosis()}"
        assert_restored(vm, watcher, 6, "writethrough")
    finally:
        watcher.stop.set()
        vm.close()
    assert watcher.seen == ["writethrough", *order, "writethrough"], watcher.seen
    assert f"sweep order (--sweep-seed {SEED}): r1 none, r1 writeback" in err
    sweep_id = re.search(r"/sweeps/(sweep-[A-Za-z0-9._-]+)", err).group(1)
    _stored(APIClient(), celery_worker_process, 5, sweep_id=sweep_id)
    guests = list(
        Run.objects.filter(sweep_id=sweep_id, role="guest").order_by("sweep_position")
    )
    assert [(g.sweep_round, g.sweep_position, g.cache_mode) for g in guests] == [
        (round_, i, mode) for i, (round_, mode) in enumerate(plan, 1)
    ]
    page = APIClient().get(f"/sweeps/{sweep_id}/").content.decode()
    shown = re.findall(
        r'data-position="(\d)" data-round="(\d)" data-mode="(\w+)"', page
    )
    assert shown == [(str(i), str(r), m) for i, (r, m) in enumerate(plan, 1)]
    assert "2 rounds, every mode once per round" in page
    # writeback against none, paired by round, for each test of the run.
    assert re.search(
        r'<tr data-mode="writeback"[^>]*>.*?r1 [\d.]+, r2 [\d.]+', page, re.S
    )
    # What each guest run's I/O cost the host: QEMU's CPU time while it ran.
    for g in guests:
        cpu = g.environment["host_cpu"]
        used = cpu["user_s"] + cpu["system_s"]
        assert 0 < used < cpu["host_total_s"], cpu
        assert 0 < cpu["host_busy_s"] <= cpu["host_total_s"]
        assert cpu["qemu_pid"] > 0 and cpu["threads"]
        cost = hostcost.run_host_cost(g)
        assert cost["us_per_io"] > 0 and cost["us_per_mb"] > 0
        run_page = APIClient().get(f"/runs/{g.pk}/").content.decode()
        assert 'id="host-cost"' in run_page and "Per I/O" in run_page
