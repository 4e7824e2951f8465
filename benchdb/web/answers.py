"""The reports' setup form, around their stored answers.

"Which cache mode should I use on my host with these disks?" and "how much
do I lose in a VM against bare metal?" for the setup a reader picks
(platform, disk type, storage, bus, workload).  The answers are computed in
``results.reports`` and read stored through ``results.answers``; this module
only turns the query string into a setup, labels the workloads and says
which agent command would measure a setup that has no data yet.
"""

from __future__ import annotations

from django.http import QueryDict

from benchdb.results import answers, reports
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


def workload_options(question: str, setup: dict) -> tuple[list[dict], list]:
    """The stored ``workloads`` of a question ("cache" or "overhead"), the
    setup's best first (``reports.choose_workload``), each labelled for the
    form with what the setup has under it (``coverage``); and the stored
    answers' freshness."""
    options, found = answers.workloads.with_freshness(question)
    coverage, covered = answers.workload_coverage.with_freshness(question, setup)
    labelled = []
    for w in reports.choose_workload(question, options, coverage):
        have = coverage.get(w["test_id"]) or {"runs": 0, "modes": {}, "complete": 0}
        label = f"{w['title']} — {metric_words(w['metric'])}"
        label += f" ({have['runs']} run{'s' if have['runs'] != 1 else ''}"
        if question == "cache" and have["complete"]:
            n = have["complete"]
            label += f", {n} system{'s' if n != 1 else ''} in every mode"
        labelled.append({**w, "label": label + ")", "coverage": have})
    return labelled, [found, covered]


def elsewhere(options: list[dict], workload: dict, mode: str | None = None) -> list:
    """The other workloads the setup has runs under (of cache mode ``mode``
    and of cache=none, when given), most first: where to look instead of
    "no data"."""
    out = []
    for w in options:
        if w["test_id"] == workload["test_id"] or not w["coverage"]["runs"]:
            continue
        modes = w["coverage"]["modes"]
        if mode is not None and not (modes.get(mode) and modes.get("none")):
            continue
        out.append(w)
    return out


def setup_links(question: str, path: str) -> tuple[list[dict], object]:
    """The setups with most data as one-click links (``setups_with_data``)."""
    found, freshness = answers.setups_with_data.with_freshness(question)
    platforms = dict(FACETS["platform"].choices)
    disks = dict(HARDWARE_FACETS["disk_type"].choices)
    out = []
    for s in found:
        query = QueryDict(mutable=True)
        query.update({"platform": s["platform"], "disk_type": s["disk_type"]})
        out.append(
            {
                **s,
                "label": f"{platforms.get(s['platform'], s['platform'])} on "
                f"{disks.get(s['disk_type'], s['disk_type'])}",
                "url": f"{path}?{query.urlencode()}",
            }
        )
    return out, freshness


def chosen_setup(params) -> dict:
    """The reader's setup from the query string: only known values kept."""
    setup = {}
    for field in setup_choices():
        value = params.get(field["name"], "")
        if value in {v for v, _label in field["choices"]}:
            setup[field["name"]] = value
    return setup


def chosen_workload(params, options: list[dict]) -> dict | None:
    """The workload asked for (else the first: the setup's best), as the
    stored answers take it (``reports.workload_arg``): without the form's
    label and coverage, nor its number of runs."""
    wanted = params.get("workload", "")
    chosen = next((w for w in options if w["test_id"] == wanted), None) or (
        options[0] if options else None
    )
    if chosen is None:
        return None
    return reports.workload_arg(chosen)


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
