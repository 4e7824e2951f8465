"""Turn a validated bundle into a Run with its Results, in one transaction.

The server's numbers come from the raw tool outputs a bundle carries, parsed
on the server with the agent's own parsers, never from what a (possibly
older or modified) agent computed; a better parser can re-ingest old
submissions.  The API's check (``benchdb_agent.contract.check``) decodes and
parses every raw output of an upload once, and keeps what it parsed with the
submission (``parsed_of``, ``Submission.parsed``); the worker stores those
records instead of parsing the same outputs again, and parses them itself
when a submission has none or they came from other parsers
(``parser_fingerprint``).  Records are taken as sent only where there is no
raw output (published reference figures, which come from a document, not a
tool run).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
from collections import defaultdict
from pathlib import Path

from django.db import connection, models, transaction
from django.utils import timezone

from benchdb.results import overheads, refresh, stats
from benchdb.results.metrics import aggregate_repeat
from benchdb.results.models import (
    METRIC_FIELDS,
    CpuModel,
    DiskModel,
    Hardware,
    Measurement,
    RawOutput,
    Result,
    Run,
    read_json,
)
from benchdb.results.vocab import SETTINGS, DiskType, Role, Source, Visibility
from benchdb_agent import contract, parsers
from benchdb_agent import detect as agent_detect
from benchdb_agent import suite as agent_suite
from benchdb_agent import vocab as agent_vocab
from benchdb_agent.contract import parse_direction

# Tags copied onto Run columns as they are (already vocabulary-checked).
RUN_TAG_COLUMNS = tuple(
    s.name
    for s in SETTINGS
    if s.tag and s.column == "run" and s.vocabulary is not agent_vocab.YES_NO
)

# What each disk class can plausibly do, per device (rough upper bounds well
# above any real device of the class).  A result beyond them was served by a
# cache, not by the disk, and marks the run suspect instead of mixing it in.
PLAUSIBLE_LIMITS = {
    DiskType.HDD: {"iops_random": 2_000, "bw_bytes": 600e6},
    DiskType.SATA_SSD: {"iops_random": 200_000, "bw_bytes": 1_200e6},
    DiskType.NVME_SSD: {"iops_random": 3_000_000, "bw_bytes": 30e9},
    DiskType.OPTANE: {"iops_random": 3_000_000, "bw_bytes": 30e9},
}

# /sys/block/X/queue/write_cache as the guest sees it, against cache modes
# (QEMU reports a volatile write cache to the guest unless writethrough or
# directsync): see shared research, "cache modes as three flags".
WRITE_CACHE_COMPATIBLE = {
    "write back": {"none", "writeback", "unsafe"},
    "write through": {"writethrough", "directsync"},
}


class IngestError(ValueError):
    """A bundle that validated but cannot be stored (e.g. unparseable raw)."""

    def __init__(self, errors: list[dict]):
        super().__init__("; ".join(f"{e['pointer']}: {e['message']}" for e in errors))
        self.errors = errors


def decode_raw(raw: dict) -> str:
    """The text of a bundle's ``raw`` object (``gzip+base64`` or ``plain``)."""
    encoding = raw.get("encoding", "plain")
    if encoding == "gzip+base64":
        return gzip.decompress(base64.b64decode(raw["data"])).decode("utf-8")
    if encoding == "plain":
        return raw["data"]
    raise ValueError(f"unknown raw encoding {encoding!r}")


_COLUMN_TYPES: dict[tuple[str, tuple[str, ...]], list[int]] = {}


def _column_types(cursor, table: str, columns: list[str]) -> list[int]:
    """The type oids of a table's columns, in ``columns`` order (looked up
    once per process), for a binary COPY."""
    key = (table, tuple(columns))
    if key not in _COLUMN_TYPES:
        cursor.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
            "%s::regclass AND attnum > 0 AND NOT attisdropped",
            [table],
        )
        oids = dict(cursor.fetchall())
        _COLUMN_TYPES[key] = [oids[c] for c in columns]
    return _COLUMN_TYPES[key]


def _copy_rows(
    model, columns: list[str], rows: list[tuple], *, binary: bool = True
) -> None:
    """Rows into a model's table with one COPY: values go to PostgreSQL as
    data, not as SQL literals built in Python (bulk_create's cost for
    hundreds of measurements and megabytes of gzip per bundle).  Constraints
    and foreign keys are checked as for an INSERT.  ``binary``: floats and
    the raw outputs' gzip bytes go as they are, not printed as text (and
    hex) here and read back by the server (bench/README.md, "Ingest at 50
    bundles/s")."""
    if not rows:
        return
    quote = connection.ops.quote_name
    table = model._meta.db_table
    cols = ", ".join(quote(c) for c in columns)
    with connection.cursor() as cursor, connection.wrap_database_errors:
        types = _column_types(cursor, table, columns) if binary else None
        options = " (FORMAT BINARY)" if binary else ""
        with cursor.cursor.copy(
            f"COPY {quote(table)} ({cols}) FROM STDIN{options}"
        ) as copy:
            if types:
                copy.set_types(types)
            for row in rows:
                copy.write_row(row)


_SEQUENCES: dict[str, str] = {}


def _id_sequence(cursor, table: str) -> str:
    """The sequence behind a table's id (looked up once per process: as a
    function of each row, ``pg_get_serial_sequence`` costs a catalog lookup
    per id)."""
    if table not in _SEQUENCES:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
        _SEQUENCES[table] = cursor.fetchone()[0]
    return _SEQUENCES[table]


def _copy_results(results: list[Result]) -> None:
    """Results with one COPY, their ids taken from the table's sequence first
    (in order, as ``bulk_create`` would number them).  ``bulk_create`` on
    PostgreSQL sends each column as an array, and psycopg escapes every
    quote of every JSON value with a regular expression: that was a third of
    a bundle's ingest."""
    if not results:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(%s::regclass) FROM generate_series(1, %s)",
            [_id_sequence(cursor, Result._meta.db_table), len(results)],
        )
        ids = sorted(row[0] for row in cursor.fetchall())
    fields = [f for f in Result._meta.concrete_fields if not f.primary_key]
    rows = []
    for pk, result in zip(ids, results, strict=True):
        result.pk = pk
        result._state.adding = False
        result._state.db = connection.alias
        row = [pk]
        for field in fields:
            value = getattr(result, field.attname)
            if isinstance(field, models.JSONField):
                # What the field itself sends: json.dumps with its encoder.
                value = json.dumps(value, cls=field.encoder)
            row.append(value)
        rows.append(tuple(row))
    # As text: the JSON columns' text goes as it is (binary, psycopg's jsonb
    # dumper took five times the client's CPU of the whole COPY).
    _copy_rows(Result, ["id", *(f.column for f in fields)], rows, binary=False)


def _gzip_of(raw: dict, text: str | None) -> bytes:
    """gzip bytes of a raw output: the bundle's own when it sent gzip."""
    if raw.get("encoding") == "gzip+base64":
        return base64.b64decode(raw["data"])
    data = (text if text is not None else decode_raw(raw)).encode("utf-8")
    return gzip.compress(data, compresslevel=6)


PARSED_VERSION = 1


@functools.cache
def parser_fingerprint() -> str:
    """What parsed a bundle's raw outputs: a digest of the parsers' and the
    contract's source.  Records parsed by other code (an upgrade between
    upload and ingest) are not used; the worker parses the outputs again."""
    digest = hashlib.sha256(str(PARSED_VERSION).encode())
    folder = Path(parsers.__file__).parent
    for path in [*sorted(folder.glob("*.py")), Path(contract.__file__)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def parsed_of(checked: contract.Checked) -> dict:
    """What ``contract.check`` parsed from each raw output of a valid bundle,
    as the worker needs it: per raw output's JSON pointer, the sha256 of its
    text and its records (selected by the raw's job), each as ``[direction,
    job, *METRIC_FIELDS]``.  Stored with the submission (``parsed``)."""
    return {
        "parsers": parser_fingerprint(),
        "raws": {
            pointer: [
                hashlib.sha256(text.encode("utf-8")).hexdigest(),
                [
                    [
                        rec["direction"],
                        rec.get("job"),
                        *(rec.get(f) for f in METRIC_FIELDS),
                    ]
                    for rec in records
                ],
            ]
            for pointer, (text, records) in checked.raws.items()
        },
    }


def _records_of(compact: list) -> list[dict]:
    return [
        {
            "direction": row[0],
            "job": row[1],
            **dict(zip(METRIC_FIELDS, row[2:], strict=True)),
        }
        for row in compact
    ]


def reparse_test(
    test: dict, pointer: str, parsed: dict | None = None
) -> list[tuple[int, list[dict], dict | None, str | None, str | None]]:
    """Every repeat of a bundle test as (index, records, raw, raw text, sha256
    of the text), the records parsed from the raw output.

    ``parsed``: ``parsed_of``'s ``raws`` for this bundle; a raw output found
    there is neither decoded nor parsed (text None, its sha256 and records
    from there).  Raises IngestError naming the repeat whose raw output does
    not parse.
    """
    out = []
    for i, repeat in enumerate(test.get("repeats", [])):
        raw = repeat.get("raw")
        index = repeat.get("index", i)
        if raw:
            where = f"{pointer}/repeats/{i}/raw"
            known = parsed.get(where) if parsed else None
            if known is not None:
                # Parsed by the API's check of this very bundle: the records
                # of the raw's job, each with a direction (the contract
                # refuses a raw output without one, or without a record).
                out.append((index, _records_of(known[1]), raw, None, known[0]))
                continue
            try:
                text = decode_raw(raw)
                # dd and ioping -B do not say whether they read or wrote: the
                # bundle names the direction of the test.
                parsed = parsers.parse(
                    text,
                    raw.get("format"),
                    source=where,
                    direction=parse_direction(raw, test),
                    loads=read_json,
                )
            except (ValueError, KeyError, OSError) as exc:
                raise IngestError([{"pointer": where, "message": str(exc)}]) from exc
            records = parsed["records"]
            if any(r.get("direction") is None for r in records):
                message = (parsed.get("notes") or ["direction unknown"])[0]
                raise IngestError([{"pointer": where, "message": message}])
            if raw.get("job") is not None:
                # One output of several fio jobs, imported as one test per job.
                records = [r for r in records if r.get("job") == raw["job"]]
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            out.append((index, records, raw, text, digest))
        else:
            out.append((index, repeat.get("records", []), None, None, None))
    return out


def repeat_series(repeats: list[tuple[int, list[dict]]]) -> dict:
    """Per direction and metric, the per-repeat values in repeat order: what
    ``metrics.repeat_values`` would build from the stored measurements."""
    per_dir: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for _index, records in sorted(repeats, key=lambda r: r[0]):
        for direction, metrics in aggregate_repeat(records).items():
            for f, v in metrics.items():
                if v is not None:
                    per_dir[direction][f].append(v)
    return {d: dict(m) for d, m in per_dir.items()}


def compute_stats(repeats: list[tuple[int, list[dict]]]) -> dict:
    """Per direction and metric, the summary over repeats (results.stats).

    Latency percentiles keep each repeat's value and the range, no mean.
    """
    return summarize_series([repeat_series(repeats)])[0]


def summarize_series(many: list[dict]) -> list[dict]:
    """``stats.summarize_metric`` of every direction and metric of each
    ``repeat_series``, in order: the summaries of a whole bundle at once
    (``stats.summaries``, one t-quantile call for all, value for value what
    ``summarize`` gives each)."""
    samples, slots = [], []
    out = []
    for series in many:
        test_stats: dict[str, dict] = {}
        for direction, metrics in series.items():
            per_metric = test_stats[direction] = {}
            for f, vals in metrics.items():
                if stats.is_percentile(f):
                    per_metric[f] = stats.summarize_metric(f, vals)
                else:
                    per_metric[f] = None  # filled below, keeping the order
                    samples.append(stats.Sample(vals))
                    slots.append((per_metric, f))
        out.append(test_stats)
    for (per_metric, f), summary in zip(slots, stats.summaries(samples), strict=True):
        per_metric[f] = summary
    return out


def main_direction(test_stats: dict, preferred: str | None) -> str | None:
    if preferred in test_stats:
        return preferred
    for direction in ("read", "write", "trim"):
        if direction in test_stats:
            return direction
    return None


def _hardware(bundle: dict) -> Hardware | None:
    env = bundle.get("environment") or {}
    tags = bundle.get("tags") or {}
    cpu = env.get("cpu") or {}
    target = env.get("target") or {}
    disk_type = tags.get("disk_type") or DiskType.UNKNOWN
    disk_model = tags.get("disk_model") or ""
    if bundle.get("role") == Role.HOST and not is_virtual_host(bundle):
        # On the host the agent sees the real disk; in a guest (or a "host"
        # inside a VM) it sees a virtual one whose model and rotational flag
        # say nothing of what backs it.
        disk_model = disk_model or (target.get("model") or "")
        if disk_type == DiskType.UNKNOWN:
            disk_type = agent_detect.disk_type_of(target) or DiskType.UNKNOWN
    battery = {"yes": True, "no": False}.get(tags.get("controller_battery", ""))
    fields = {
        "cpu_model": (cpu.get("model") or "")[:200],
        "cpu_sockets": cpu.get("sockets"),
        "cpu_cores": cpu.get("cores"),
        "cpu_threads": cpu.get("threads"),
        "memory_bytes": env.get("memory_bytes"),
        "disk_model": disk_model[:200],
        "disk_type": disk_type,
        "disk_count": _int_or_none(tags.get("disk_count")),
        "disk_size_bytes": target.get("size_bytes")
        if bundle.get("role") == Role.HOST
        else None,
        "raid_controller": (tags.get("raid_controller") or "")[:200],
        "raid_level": tags.get("raid_level") or "unknown",
        "controller_cache_bytes": _int_or_none(tags.get("controller_cache")),
        "controller_battery": battery,
    }
    if not any(v not in (None, "", "unknown") for v in fields.values()):
        return None
    fingerprint = Hardware.fingerprint_of(fields)
    # Most uploads come from hardware seen before: one read, not the CPU and
    # disk model lookups a new hardware row needs (two queries a bundle).
    known = Hardware.objects.filter(fingerprint=fingerprint).first()
    if known is not None:
        return known
    cpu_model = (
        CpuModel.objects.get_or_create(name=fields["cpu_model"])[0]
        if fields["cpu_model"]
        else None
    )
    disk = (
        DiskModel.objects.get_or_create(name=fields["disk_model"])[0]
        if fields["disk_model"]
        else None
    )
    values = {**fields, "cpu_model": cpu_model, "disk_model": disk}
    hw, _created = Hardware.objects.get_or_create(
        fingerprint=fingerprint, defaults=values
    )
    return hw


def _int_or_none(value) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def plausibility(run: Run, results: list[Result]) -> list[str]:
    """Reasons to mark a run suspect (empty when it looks like a disk figure)."""
    reasons = []
    evidence = (run.environment.get("target") or {}).get("write_cache")
    compatible = WRITE_CACHE_COMPATIBLE.get((evidence or "").strip().lower())
    if (
        run.role == Role.GUEST
        and compatible
        and run.cache_mode
        in {"none", "writeback", "unsafe", "writethrough", "directsync"}
        and run.cache_mode not in compatible
    ):
        reasons.append(
            f"declared cache mode {run.cache_mode!r} contradicts the guest's "
            f"write_cache {evidence!r} (compatible: {', '.join(sorted(compatible))})"
        )
    limits = PLAUSIBLE_LIMITS.get(run.hardware.disk_type) if run.hardware else None
    if limits:
        count = run.hardware.disk_count or 1
        kind = run.hardware.get_disk_type_display()
        for result in results:
            if not result.comparable:
                continue
            random = (
                "rand" in str(result.options.get("rw", "")) or "4k" in result.test_id
            )
            if (
                random
                and result.tool == "fio"
                and result.iops_mean
                and result.iops_mean > limits["iops_random"] * count
            ):
                reasons.append(
                    f"{result.test_id}: {result.iops_mean:.0f} IOPS is beyond what "
                    f"{count} {run.hardware.get_disk_type_display()} can do: a cache "
                    "answered, not the disk"
                )
            if (
                result.bw_bytes_mean
                and result.bw_bytes_mean > limits["bw_bytes"] * count
            ):
                reasons.append(
                    f"{result.test_id}: {result.bw_bytes_mean / 1e6:.0f} MB/s is "
                    f"beyond what {count} {kind} can do: a cache answered, not the disk"
                )
    return reasons


def is_virtual_host(bundle: dict) -> bool:
    """A host run inside a virtual machine, as the agent marks it
    (``virtual_host``: --allow-virtual-host; the agent refuses such a host
    run without it)."""
    return bundle.get("role") == Role.HOST and bundle.get("virtual_host") is True


def first_host(run: Run) -> Run | None:
    """A guest run's host baseline: the first host run of its pair id and
    owner (the same account, or both anonymous, so that nobody can attach
    a baseline to someone else's run by reusing their pair id); None for a
    host or a run without pair id.  A bare-metal host comes before a host
    run made inside a VM (``virtual_host``), which pairs only when it is
    the pair's one host: its guest's overhead is against that VM, and
    never enters what is said of bare metal (``Run.objects.bare_metal``)."""
    if not run.pair_id or run.role != Role.GUEST:
        return None
    return (
        Run.objects.filter(pair_id=run.pair_id, owner_id=run.owner_id, role=Role.HOST)
        .order_by("virtual_host", "created", "id")
        .first()
    )


def link_pair(run: Run, attached_to: int | None = None) -> None:
    """Link a guest run and its host baseline, whichever arrived first, with
    the guest results' overheads against it (``overheads.store_overheads``).

    ``attached_to``: the host run the guest's results' overheads were
    computed against before they were inserted (``overheads.attach_overheads``),
    kept if it is still the first host.  Two workers storing the two halves
    of a pair at the same moment would each miss the other's uncommitted
    run; a transaction-scoped advisory lock on the pair id, taken here at
    the end of the transaction, makes the second wait for the first to
    commit, and then see it.
    """
    if not run.pair_id:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))",
            [f"benchdb-pair:{run.pair_id}"],
        )
    if run.role == Role.GUEST:
        host = first_host(run)
        if host:
            run.baseline = host
            run.save(update_fields=["baseline", "updated"])
        if (host.pk if host else None) != attached_to:
            overheads.store_overheads([run.pk])
        return
    # Guests without a host yet; a bare-metal host also takes over the
    # guests paired with a virtual host of the same pair.
    unpaired = models.Q(baseline__isnull=True)
    if not run.virtual_host:
        unpaired |= models.Q(baseline__virtual_host=True)
    guests = list(
        Run.objects.filter(
            unpaired, pair_id=run.pair_id, owner_id=run.owner_id, role=Role.GUEST
        ).values_list("pk", flat=True)
    )
    if guests:
        Run.objects.filter(pk__in=guests).update(baseline=run, updated=timezone.now())
        overheads.store_overheads(guests)


def _test_meta(test: dict) -> dict:
    """Catalogue facts about a test id (title, group, main direction)."""
    try:
        info = agent_suite.get_test(test["test_id"])
    except (KeyError, LookupError, AttributeError):
        info = None
    info = info or {}
    return {
        "title": test.get("title") or info.get("title") or test["test_id"],
        "group": test.get("group") or info.get("group") or "",
        "direction": info.get("direction"),
    }


def describe(run: Run, env: dict, tags: dict) -> None:
    """Set a run's environment columns from detection, then declared tags.

    Declared tags win over detection: they say what the guest cannot see.
    Used at ingest and again when an owner edits the tags of a run.
    """
    target = env.get("target") or {}
    defaults = Run()
    for key in (*RUN_TAG_COLUMNS, "iothread"):
        setattr(run, key, getattr(defaults, key))
    detected_virt = (env.get("virtualization") or {}).get("type")
    if detected_virt:
        run.virtualization = detected_virt
    detected_platform = (env.get("platform") or {}).get("value")
    if detected_platform:
        run.platform = detected_platform
    if target.get("disk_bus") and run.role == Role.GUEST:
        run.disk_bus = target["disk_bus"]
    if target.get("filesystem"):
        if run.role == Role.GUEST:
            run.guest_filesystem = target["filesystem"][:50]
        else:
            run.host_filesystem = target["filesystem"][:50]
    if run.role == Role.HOST:
        run.storage_backend = "native"
        run.cache_mode = "unknown"
    for key in RUN_TAG_COLUMNS:
        if tags.get(key):
            setattr(run, key, tags[key])
    if tags.get("iothread") in ("yes", "no"):
        run.iothread = tags["iothread"] == "yes"


def retag(run: Run, tags: dict) -> Run:
    """Replace a run's tags: columns, hardware and plausibility follow."""
    listed = run.is_listed()
    with transaction.atomic():
        run.tags = dict(tags)
        describe(run, run.environment or {}, run.tags)
        run.hardware = _hardware(
            {"environment": run.environment, "tags": run.tags, "role": run.role}
        )
        reasons = plausibility(run, list(run.results.all()))
        run.suspect = bool(reasons)
        run.suspect_reasons = reasons
        run.save()
        # New facets can take a listed run out of a population.
        refresh.announce(removal=listed, run=run.pk, moved=True)
    return run


@transaction.atomic
def store_bundle(
    bundle: dict,
    *,
    owner=None,
    owner_key_hash: str = "",
    visibility: str = Visibility.PUBLIC,
    parsed: dict | None = None,
) -> Run:
    """Create the Run, its Results, Measurements and RawOutputs from a bundle.

    All or nothing: any error rolls the whole run back.  The caller handles
    idempotency (the Submission's unique bundle id, and ``Run.uuid``).
    ``parsed``: ``parsed_of`` the check of this bundle (used only if the same
    parsers made it; else every raw output is parsed here).
    """
    raws = (
        parsed.get("raws")
        if parsed and parsed.get("parsers") == parser_fingerprint()
        else None
    )
    tags = dict(bundle.get("tags") or {})
    env = bundle.get("environment") or {}
    suite = bundle.get("suite") or {}
    source = bundle.get("source") or Source.MEASURED
    run = Run(
        uuid=bundle["bundle_id"],
        title=(bundle.get("title") or "")[:200],
        role=bundle.get("role") or Role.GUEST,
        suite_id=suite.get("id", ""),
        suite_version=str(suite.get("version", "")),
        profile=suite.get("profile", ""),
        agent_version=(bundle.get("agent") or {}).get("version", ""),
        ran_at=bundle.get("created"),
        source=source,
        citation=bundle.get("citation") or "",
        citation_url=bundle.get("citation_url") or "",
        notes=bundle.get("notes") or tags.get("note", ""),
        owner=owner,
        owner_key_hash=owner_key_hash,
        visibility=visibility,
        pair_id=bundle.get("pair_id") or "",
        sweep_id=bundle.get("sweep_id") or "",
        sweep_round=bundle.get("sweep_round"),
        sweep_position=bundle.get("sweep_position"),
        environment=env,
        tags=tags,
        tag_sources={
            k: v for k, v in (bundle.get("tag_sources") or {}).items() if k in tags
        },
        warnings=bundle.get("warnings") or [],
        os_name=((env.get("os") or {}).get("name") or "")[:200],
        kernel=((env.get("os") or {}).get("kernel") or "")[:200],
        virtual_host=is_virtual_host(bundle),
    )
    describe(run, env, tags)
    run.hardware = _hardware(bundle)
    run.save()

    # Set-based: every result in one INSERT, then every measurement and every
    # raw output in one INSERT each, whatever the number of tests and repeats.
    tests = bundle.get("tests") or []
    repeats_of = [
        reparse_test(test, f"/tests/{t_index}", raws)
        for t_index, test in enumerate(tests)
    ]
    series_of = [
        repeat_series([(i, recs) for i, recs, *_raw in repeats])
        for repeats in repeats_of
    ]
    results = []
    for test, repeats, series, test_stats in zip(
        tests, repeats_of, series_of, summarize_series(series_of), strict=True
    ):
        meta = _test_meta(test)
        direction = main_direction(test_stats, meta["direction"])
        main = test_stats.get(direction, {}) if direction else {}
        comparable = test.get("comparable", test.get("tool") != "other")
        results.append(
            Result(
                run=run,
                test_id=test["test_id"],
                tool=test.get("tool", "other"),
                title=meta["title"][:200],
                group=meta["group"][:64],
                comparability_key=test.get("comparability_key")
                or f"external|{test['test_id']}",
                comparable=comparable,
                approximate=bool(test.get("approximate")),
                options=test.get("options") or {},
                command=test.get("command") or [],
                tool_version=(test.get("tool_version") or "")[:64],
                preconditioned=bool(test.get("preconditioned")),
                extra_repeats=test.get("extra_repeats") or 0,
                repeat_count=len(repeats),
                stats={
                    "main_direction": direction,
                    "directions": test_stats,
                    # The per-repeat values, computed once here: comparisons
                    # and overheads read them instead of re-aggregating the
                    # measurements on every request (metrics.repeat_values).
                    "values": series,
                    # What the agent said about the test (issue 12): complete,
                    # partial or failed (with its error), buffered (not
                    # O_DIRECT), and the spread of its main metric.
                    **{
                        k: test[k]
                        for k in ("status", "error", "buffered", "cv")
                        if test.get(k) is not None
                    },
                },
                # The run's figure as its pages show it (``stats.centre``),
                # so a list, a rank or a report reads the run page's number.
                iops_mean=stats.centre(main.get("iops") or {}),
                bw_bytes_mean=stats.centre(main.get("bw_bytes") or {}),
                lat_mean_ns_mean=stats.centre(main.get("lat_mean_ns") or {}),
            )
        )
    # A guest whose host came first (the agent's ``vm`` command sends the
    # host first): its results are stored with their overheads, which
    # link_pair keeps if that host is still the first under its lock.
    host = first_host(run)
    attached = (
        host.pk
        if host is not None and overheads.attach_overheads(results, host.pk)
        else None
    )
    _copy_results(results)
    measurements, raw_outputs = [], []
    for result, repeats in zip(results, repeats_of, strict=True):
        for index, records, raw, text, digest in repeats:
            for rec in records:
                measurements.append(
                    (
                        result.pk,
                        index,
                        (rec.get("job") or "")[:200],
                        rec["direction"],
                        *(rec.get(f) for f in METRIC_FIELDS),
                    )
                )
            if raw:
                raw_outputs.append(
                    (
                        result.pk,
                        index,
                        raw.get("format") or "",
                        # The bundle's own gzip stream when it sent one (the
                        # same bytes decompressed; no second compression).
                        _gzip_of(raw, text),
                        digest,
                    )
                )
    _copy_rows(
        Measurement,
        ["result_id", "repeat", "job", "direction", *METRIC_FIELDS],
        measurements,
    )
    _copy_rows(
        RawOutput, ["result_id", "repeat", "format", "data_gzip", "sha256"], raw_outputs
    )

    reasons = plausibility(run, results)
    if reasons:
        run.suspect = True
        run.suspect_reasons = reasons
        run.save(update_fields=["suspect", "suspect_reasons", "updated"])
    link_pair(run, attached)
    # A new run (and guests given their first baseline, reached through it,
    # ``results.changes``): nothing left a population; the refresh adds them.
    refresh.announce(removal=False, run=run.pk)
    return run
