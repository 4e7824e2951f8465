"""A script payload in every free-text field a submitter controls."""

from __future__ import annotations

from django.core.management import call_command

from benchdb.results.models import Comparison, CpuModel, DiskModel, Hardware, Run

PAYLOAD = '"><img src=x onerror=alert(16)><script>alert(17)</script>'


def poison_reference() -> dict:
    """Load the reference data, then put PAYLOAD into every stored string of
    the first CentOS 7 run, its hardware, a result and a saved comparison."""
    call_command("load_reference")
    runs = list(Run.objects.filter(title__contains="CentOS 7").order_by("pk"))
    first = runs[0]
    first.title = "T" + PAYLOAD
    first.notes = "N" + PAYLOAD
    first.tags = {"k" + PAYLOAD: "v" + PAYLOAD, "items": "x"}
    first.hypervisor_version = "H" + PAYLOAD[:80]
    first.os_name = "O" + PAYLOAD
    first.kernel = "K" + PAYLOAD
    first.guest_filesystem = PAYLOAD[:50]
    first.citation = "C" + PAYLOAD
    first.warnings = [{"code": "x" + PAYLOAD, "message": "W" + PAYLOAD}]
    first.suspect = True
    first.suspect_reasons = ["S" + PAYLOAD]
    cpu = CpuModel.objects.create(name="cpu" + PAYLOAD)
    disk = DiskModel.objects.create(name="disk" + PAYLOAD)
    hw = first.hardware
    if hw is None:
        hw = first.hardware = Hardware(fingerprint="xss")
    hw.cpu_model = cpu
    hw.disk_model = disk
    hw.raid_controller = "R" + PAYLOAD
    hw.save()
    first.save()
    result = first.results.first()
    result.title = "Res" + PAYLOAD
    result.save()
    saved = Comparison.objects.create(
        slug="xss-test",
        run_ids=[r.pk for r in runs[:3]],
        title="Cmp" + PAYLOAD,
    )
    return {"runs": runs, "saved": saved}
