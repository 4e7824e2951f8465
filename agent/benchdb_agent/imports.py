"""Results people already have, as a bundle: what ``benchdb-agent import`` and
the website's /submit/ both build from uploaded tool outputs.

Each job of each output (a CrystalDiskMark row, a fio job, a DiskSpd target)
becomes a test identified by its workload (``workload.identify``), never by
the file's name: the same workload in several files is one test with a
repeat per file.  Nothing in these outputs says how the VM's storage was
set up, so the facets the uploader declares are tagged as typed by a person
(``tag_sources``: "user"), and the bundle carries a warning saying that the
configuration was declared, not verified, and which checks were not made.
"""

from __future__ import annotations

from . import bundle, parsers, suite, vocab, workload

# The VM facets no imported format records: what the uploader is asked.
DECLARED_FACETS = (
    "platform",
    "cache_mode",
    "disk_bus",
    "storage_backend",
    "image_format",
    "disk_type",
    "disk_model",
)
NOT_CHECKED = (
    "the agent made no cache, load or stability check and did not read the "
    "VM's configuration"
)


def declared_warning(formats) -> dict:
    """The warning every imported bundle carries instead of "No warnings"."""
    names = ", ".join(sorted(set(formats)))
    return {
        "code": "declared-not-verified",
        "message": f"Imported from {names} output: its configuration is declared "
        f"by the uploader, not verified; {NOT_CHECKED}.",
    }


def read_output(data: bytes, name: str, fmt=None, direction=None) -> tuple:
    """(text, parsed) of one uploaded or read file; ParseError says what is
    wrong (encoding, size, format, a line).  ``direction``: for dd and
    ioping -B, which do not say it."""
    text = parsers.decode(data, name)
    parsed = parsers.parse(text, fmt, source=name, direction=direction)
    if any(r["direction"] is None for r in parsed["records"]):
        raise parsers.ParseError(name, parsed["notes"][0])
    return text, parsed


def _title_group(test_id: str, job: str | None, parsed: dict) -> tuple:
    """A suite test's title and group; else the job as the tool named it."""
    try:
        test = suite.get_test(test_id)
    except KeyError:
        origin = parsed.get("tool_version") or parsed["tool"]
        return (f"{job} ({origin})" if job else str(origin)), "imported"
    return test["title"], test["group"]


def add_output(tests: dict, name: str, text: str, parsed: dict, test_id=None):
    """Add one parsed output's jobs to ``tests`` (test id -> bundle test)."""
    fmt = parsed["format"]
    jobs: dict = {}
    for rec in parsed["records"]:
        jobs.setdefault(rec.get("job"), []).append(rec)
    for job, records in jobs.items():
        options = dict(records[0].get("options") or {})
        directions = [r["direction"] for r in records]
        tid = test_id or workload.identify(parsed["tool"], directions, options)
        if test_id and len(jobs) > 1:
            tid = f"{test_id}-{workload.identify(parsed['tool'], directions, options)}"
        single = sorted(set(directions))
        title, group = _title_group(tid, job, parsed)
        test = tests.setdefault(
            tid,
            {
                "test_id": tid,
                "tool": parsed["tool"],
                "direction": single[0] if len(single) == 1 else "mixed",
                "title": title,
                "group": group,
                "options": options,
                "tool_version": parsed.get("tool_version"),
                "comparability_key": "imported/1|"
                + tid
                + "|"
                + suite.tool_major(parsed.get("tool_version")),
                "comparable": True,
                "approximate": bool(parsed.get("approximate")),
                "repeats": [],
            },
        )
        raw = bundle.encode_raw(text, fmt, records[0]["direction"])
        if len(jobs) > 1:
            raw["job"] = job  # the server keeps only this job's records
        test["repeats"].append(
            {"index": len(test["repeats"]), "records": records, "raw": raw}
        )
    return tests


def build(
    outputs,
    *,
    role: str = "guest",
    tags: dict | None = None,
    pair_id: str | None = None,
    title: str | None = None,
    test_id: str | None = None,
) -> dict:
    """A bundle of ``outputs``, each (name, text, parsed)."""
    tags = dict(tags or {})
    doc = bundle.new_bundle(
        role=role,
        profile="custom",
        environment={},
        tags=tags,
        pair_id=pair_id,
        source="imported",
    )
    doc["suite"]["id"] = "imported"
    doc["suite"]["version"] = "1"
    doc["tag_sources"] = {key: "user" for key in tags}
    if title:
        doc["title"] = title
    tests: dict = {}
    for name, text, parsed in outputs:
        add_output(tests, name, text, parsed, test_id)
    doc["tests"] = list(tests.values())
    doc["warnings"].append(declared_warning(p["format"] for _n, _t, p in outputs))
    return doc


def undeclared(tags: dict) -> list:
    """The facets of ``DECLARED_FACETS`` the uploader has not declared."""
    return [f for f in DECLARED_FACETS if not tags.get(f)]


def choices(facet: str) -> tuple:
    """A declared facet's allowed values (empty for free text)."""
    allowed = vocab.TAG_VOCABULARIES.get(facet)
    return vocab.values(allowed) if allowed is not None else ()
