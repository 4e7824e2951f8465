"""A guest run measured by `vm` shows what its I/O cost the host's CPU: µs
per I/O and per MB from the QEMU process's CPU time and the run's own
records (real fio outputs, tests/api/factories); a run without it says so."""

from __future__ import annotations

import html
import re

import pytest

from benchdb.results import hostcost, refresh
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Measurement
from tests.api.conftest import fio  # noqa: F401
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

HOST_CPU = {
    "qemu_pid": 4242,
    "seconds": 61.5,
    "clock_ticks_per_s": 100,
    "user_s": 1.25,
    "system_s": 2.5,
    "voluntary_ctxt_switches": 12000,
    "nonvoluntary_ctxt_switches": 340,
    "iothreads": ["IO iothread0"],
    "threads": [
        {
            "name": "IO iothread0",
            "kind": "iothread",
            "threads": 1,
            "user_s": 0.5,
            "system_s": 1.5,
            "voluntary_ctxt_switches": 9000,
            "nonvoluntary_ctxt_switches": 100,
        }
    ],
    "host_cpus": 2,
    "host_busy_s": 90.0,
    "host_total_s": 123.0,
    "host_utilisation": 90.0 / 123.0,
}


def text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_run_page_shows_cpu_per_io_and_per_mb(fio, client):  # noqa: F811
    doc = make_bundle(fio, environment={"host_cpu": HOST_CPU})
    run = store_bundle(doc)
    ms = list(Measurement.objects.filter(result__run=run))
    ios = sum(m.iops * m.runtime_s for m in ms)
    io_bytes = sum(m.io_bytes for m in ms)
    cost = hostcost.run_host_cost(run)
    assert cost["us_per_io"] == pytest.approx(3.75e6 / ios)
    assert cost["us_per_mb"] == pytest.approx(3.75e6 / (io_bytes / 1e6))
    words = text(client.get(f"/runs/{run.pk}/").content.decode())
    assert f"Per I/O {cost['us_per_io']:.1f} µs" in words
    assert f"Per MB {cost['us_per_mb']:.0f} µs" in words
    assert "1.25 s user, 2.50 s system in 62 s; 12340 context switches" in words
    assert "IO iothread0 0.50 s user, 1.50 s system" in words
    assert "Host busy 73% of all CPUs" in words


def test_a_guest_run_without_it_says_so(fio, client):  # noqa: F811
    run = store_bundle(make_bundle(fio))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="host-cost-missing"' in page
    assert "The host's CPU time was not measured for this run" in text(page)
    host = store_bundle(make_bundle(fio, role="host"))
    assert 'id="host-cost"' not in client.get(f"/runs/{host.pk}/").content.decode()


def test_the_overhead_report_gains_host_cpu_per_io(client):
    from django.core.management import call_command

    from benchdb.results.models import Run

    call_command("load_reference")
    page = text(client.get("/reports/overhead/").content.decode())
    assert "Host CPU per I/O: not measured for this setup yet" in page
    guest = Run.objects.filter(role="guest", baseline__isnull=False).first()
    # The published runs record bandwidth only: one record with IOPS and
    # its runtime makes the run's I/O count.
    Measurement.objects.create(
        result=guest.results.first(),
        repeat=99,
        direction="read",
        iops=1000.0,
        runtime_s=10.0,
    )
    guest.environment = {**guest.environment, "host_cpu": HOST_CPU}
    guest.save(update_fields=["environment"])
    # Said as benchdb's write functions say it: in this test's one
    # transaction, which announced the reference data, the data version's
    # backstop does not log a second, unnamed change.
    refresh.announce(False, guest.pk)
    expected = hostcost.run_host_cost(guest)["us_per_io"]
    # The worker's refresh recomputes the stored answer after a change.
    refresh.refresh()
    page = text(client.get("/reports/overhead/").content.decode())
    assert f"Host CPU per I/O: {expected:.1f} µs (median of 1 guest run" in page, page[
        page.find("Host CPU") - 300 : page.find("Host CPU") + 300
    ]
