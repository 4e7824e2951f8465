"""The reports' setup form, around their stored answers.

"Which cache mode should I use on my host with these disks?" and "how much
do I lose in a VM against bare metal?" for the setup a reader picks
(platform, disk type, storage, bus, workload).  The answers are computed in
``results.reports`` and read stored through ``results.answers``; this module
only turns the query string into a setup, labels the workloads and says
which agent command would measure a setup that has no data yet.
"""

from __future__ import annotations

from benchdb.results import answers
from benchdb.results.vocab import FACETS, HARDWARE_FACETS, LABELS
from benchdb.web.templatetags.benchdb_format import metric_words

# The setup a reader describes, in form order.
SETUP_FIELDS = ("platform", "disk_type", "storage_backend", "disk_bus")


def setup_choices() -> list[dict]:
    """The form's select boxes: name, words, [(value, label)]."""
    out = []
    for name in SETUP_FIELDS:
        choices = (FACETS.get(name) or HARDWARE_FACETS[name]).choices
        out.append(
            {
                "name": name,
                "label": LABELS[name],
                "choices": [(v, label) for v, label in choices if v != "unknown"],
            }
        )
    return out


def workload_options(question: str) -> tuple[list[dict], object]:
    """The stored ``workloads`` of a question ("cache" or "overhead"), each
    labelled for the form, with their freshness."""
    options, found = answers.workloads.with_freshness(question)
    labelled = [
        {**w, "label": f"{w['title']} — {metric_words(w['metric'])}"} for w in options
    ]
    return labelled, found


def chosen_setup(params) -> dict:
    """The reader's setup from the query string: only known values kept."""
    setup = {}
    for field in setup_choices():
        value = params.get(field["name"], "")
        if value in {v for v, _label in field["choices"]}:
            setup[field["name"]] = value
    return setup


def chosen_workload(params, options: list[dict]) -> dict | None:
    """The workload asked for (else the first), as the stored answers take
    it: without the form's label."""
    wanted = params.get("workload", "")
    chosen = next((w for w in options if w["test_id"] == wanted), None) or (
        options[0] if options else None
    )
    return None if chosen is None else {k: v for k, v in chosen.items() if k != "label"}


def agent_command(setup: dict, server: str, cache_sweep: bool) -> str:
    """The one command that would measure this setup: ``benchdb-agent vm`` on
    the host, which runs the guest and its host baseline (and, for the cache
    question, every cache mode in turn) and uploads them."""
    platform = setup.get("platform", "")
    which = {
        "proxmox": "--proxmox VMID --disk scsi1",
        "libvirt": "--libvirt DOMAIN --disk vdb",
    }.get(platform, "--qemu-pid PID --qmp /path/to/qmp.sock --disk drive-virtio-disk1")
    parts = [
        "python3 benchdb-agent.pyz vm",
        which,
        "--guest-dir /mnt/test --host-dir /path/on/the/same/storage",
    ]
    if cache_sweep:
        parts.append("--cache-modes all")
    parts.append(f"--profile standard --upload {server}")
    return " ".join(parts)


def published(runs) -> list[dict]:
    """The published data sets among ``runs``: citation, link, run count."""
    out = {}
    for run in runs:
        if run.source != "published" or not run.citation:
            continue
        entry = out.setdefault(
            run.citation,
            {"citation": run.citation, "url": run.citation_url, "runs": []},
        )
        entry["runs"].append(run)
    return list(out.values())
