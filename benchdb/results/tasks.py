"""Celery tasks: ingest submissions, write the public dump.

Tasks take primary keys and re-fetch their rows: a message may be delivered
twice (late acknowledgement), so each task returns quietly when its work is
already done.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
import shutil
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from benchdb.lib.collector import paused_gc
from benchdb.results import exports
from benchdb.results.ingest import IngestError, store_bundle
from benchdb.results.models import Run, Submission

log = logging.getLogger(__name__)

# The errors worth another attempt: the database went away or a concurrent
# transaction lost a serialization/deadlock race.  Anything else is a bad
# bundle or a bug, and trying again would only fail again.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
MAX_RETRIES = 5


def _fail(submission_id: int, errors: list[dict]) -> None:
    Submission.objects.filter(pk=submission_id).exclude(
        status=Submission.Status.DONE
    ).update(
        status=Submission.Status.FAILED,
        errors=errors,
        last_error="; ".join(e["message"] for e in errors)[:1000],
    )


@shared_task(bind=True, max_retries=MAX_RETRIES)
def ingest(self, submission_id: int) -> None:
    """Turn a queued Submission into a Run, exactly once.

    Two transactions: the first marks the row ``processing`` (visible on the
    status URL at once); the second locks the row again, re-checks it, and
    stores the run and the ``done`` status together, so a worker that dies in
    between leaves no half-written run and the redelivered message starts
    over.  Two deliveries at the same time queue on the row lock; the second
    finds ``done`` and returns.
    """
    try:
        with transaction.atomic():
            # The mark needs no WAL flush of its own (0.3-1.3 ms a bundle on
            # the bench machine, far more while another process keeps the
            # disk busy): the run's commit below
            # flushes it too, and a mark lost with a crash of PostgreSQL
            # before that leaves the row queued, as if the task had not
            # started (its retry, a redelivery or requeue_stale takes it
            # again).  SET LOCAL: this transaction only; the run's commit
            # is flushed as always.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
            # Not the bundle (a few hundred KiB of JSON): only the second
            # transaction reads it.
            sub = (
                Submission.objects.select_for_update()
                .only("pk", "status", "attempts")
                .filter(pk=submission_id)
                .first()
            )
            if sub is None or sub.status in (
                Submission.Status.DONE,
                Submission.Status.FAILED,
            ):
                return
            sub.status = Submission.Status.PROCESSING
            sub.attempts += 1
            sub.save(update_fields=["status", "attempts", "updated"])
        # The bundle decoded from its row and its rows built: no collector
        # walks in between (benchdb/lib/collector.py).
        with paused_gc(), transaction.atomic():
            sub = Submission.objects.select_for_update().get(pk=submission_id)
            if sub.status != Submission.Status.PROCESSING:
                return
            run = Run.objects.only("pk").filter(uuid=sub.bundle_id).first()
            if run is None:
                run = store_bundle(
                    sub.bundle,
                    owner=sub.submitted_by,
                    owner_key_hash=sub.owner_key_hash,
                    visibility=sub.visibility,
                    parsed=sub.parsed,
                )
            sub.run = run
            sub.status = Submission.Status.DONE
            sub.errors = []
            sub.save(update_fields=["run", "status", "errors", "updated"])
    except Submission.DoesNotExist:
        return
    except IngestError as exc:
        _fail(submission_id, exc.errors)
        log.warning("submission %s failed: %s", submission_id, exc)
        return
    except TRANSIENT_ERRORS as exc:
        if self.request.retries >= MAX_RETRIES:
            _fail(submission_id, [{"pointer": None, "message": f"gave up: {exc}"}])
            raise
        log.warning("submission %s: transient error, retrying: %s", submission_id, exc)
        raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 1)) from exc
    except SoftTimeLimitExceeded:
        _fail(
            submission_id,
            [{"pointer": None, "message": "ingest took longer than the time limit"}],
        )
        raise
    except Exception:
        # A bug, not the submitter's fault: say so on the status URL instead
        # of leaving it "processing" forever, and keep the traceback in the log.
        log.exception("submission %s: internal error", submission_id)
        _fail(
            submission_id,
            [{"pointer": None, "message": "internal error while storing the run"}],
        )
        raise
    log.info("submission %s ingested as run %s", sub.bundle_id, run.pk)


# Fail fast when the broker is down (settings.PUBLISH_RETRY_POLICY says why).
PUBLISH_RETRY_POLICY = settings.PUBLISH_RETRY_POLICY


def enqueue(submission_id: int) -> bool:
    """Send the ingest message for a stored submission; False if the broker
    could not be reached (the row says so, and stays queued for a resend or
    ``requeue_stale``)."""
    try:
        ingest.apply_async(
            args=[submission_id], retry=True, retry_policy=PUBLISH_RETRY_POLICY
        )
    except Exception as exc:  # kombu/redis/amqp each raise their own kinds
        log.warning("submission %s: could not queue the ingest: %s", submission_id, exc)
        Submission.objects.filter(pk=submission_id).update(
            enqueued=None,
            last_error=f"could not queue the ingest (broker unreachable): {exc}"[:1000],
            updated=timezone.now(),
        )
        return False
    Submission.objects.filter(pk=submission_id).update(enqueued=timezone.now())
    return True


@shared_task
def requeue_stale() -> int:
    """Queue again the submissions no worker will otherwise finish.

    Run by beat every ``SUBMISSION_REQUEUE_INTERVAL_S``: rows ``queued`` whose
    message never reached the broker (``enqueued`` is NULL), ``queued`` ones
    whose message was sent longer than ``SUBMISSION_QUEUED_STALE_AFTER_S`` ago
    (a broker restarted without its queue), and ``processing`` ones untouched
    for ``SUBMISSION_PROCESSING_STALE_AFTER_S`` (a worker killed mid-task;
    more than the task time limit, so a live task is never doubled, and a
    doubled one would find the row done and return).  A row that has had
    ``SUBMISSION_MAX_ATTEMPTS`` attempts is failed instead, with the reason.
    Then a summary refresh lost the same ways is queued again
    (``refresh.recover``).  Returns how many submissions were queued.
    """
    from benchdb.results import refresh

    count = _requeue_submissions()
    try:
        refresh.recover()
    except Exception as exc:  # the broker or database is still down
        log.warning("could not check the summary refresh: %s", exc)
    return count


def _requeue_submissions() -> int:
    now = timezone.now()
    queued_before = now - timedelta(seconds=settings.SUBMISSION_QUEUED_STALE_AFTER_S)
    processing_before = now - timedelta(
        seconds=settings.SUBMISSION_PROCESSING_STALE_AFTER_S
    )
    stale = Submission.objects.filter(
        Q(status=Submission.Status.QUEUED, enqueued__isnull=True)
        | Q(status=Submission.Status.QUEUED, enqueued__lt=queued_before)
        | Q(status=Submission.Status.PROCESSING, updated__lt=processing_before)
    ).order_by("created")
    count = 0
    for sub in stale.only("pk", "status", "attempts").iterator():
        if sub.attempts >= settings.SUBMISSION_MAX_ATTEMPTS:
            _fail(
                sub.pk,
                [
                    {
                        "pointer": None,
                        "message": f"gave up after {sub.attempts} attempts "
                        "(the worker was lost each time)",
                    }
                ],
            )
            continue
        if sub.status == Submission.Status.PROCESSING:
            Submission.objects.filter(pk=sub.pk).update(
                last_error="the worker was lost during the ingest; queued again",
                updated=now,
            )
        if not enqueue(sub.pk):
            break  # the broker is still down: the next round tries again
        count += 1
    if count:
        log.info("requeued %d stale submission(s)", count)
    return count


# Columns of the public dump's results.csv: one row per run and test, the same
# as every other run-list export (benchdb/results/exports.py).
DUMP_COLUMNS = exports.EXPORT_COLUMNS
DUMP_PREFIX = "benchdb-public-"
DUMP_SUFFIXES = ("csv.gz", "jsonl.gz")
# Only one dump is written at a time (beat's daily dump and a regeneration
# after a removal may meet): a PostgreSQL advisory lock, across machines.
DUMP_LOCK = 0x62646475  # "bddu"


def dump_dir() -> Path:
    path = Path(getattr(settings, "PUBLIC_DUMP_DIR", "") or _default_dump_dir())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _default_dump_dir() -> Path:
    from benchdb import embedded

    return embedded.var_dir() / "dumps"


def _data_versions() -> tuple[int, int]:
    """(version, removed) of ``results_dataversion`` (``answer_cache``): a
    dump written from a snapshot taken at ``version`` holds no run that left
    the public set while ``removed`` is at most that version."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT version, removed FROM results_dataversion WHERE id = 1")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, 0)


def _write_meta(path: Path, meta: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, path)


def read_meta(path: Path) -> dict | None:
    """A dump's meta (``stem``, ``version``: the data version it was read
    at), None when missing or unreadable (a dump of an older release)."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and "version" in meta else None


@shared_task
def public_dump() -> str:
    """Write all listed runs' results as gzip'd CSV and JSON Lines.

    Files are written under a temporary name and renamed into place, so a
    download never sees half a dump; ``latest.*`` always names a whole one,
    and ``latest.json`` the data version it was read at (``dump_is_current``).
    Timestamped dumps are pruned: the newest ``PUBLIC_DUMP_KEEP``, and none
    that may hold a run taken out of the public set since (deleted, hidden,
    made private or unlisted).  Returns the stem of the files written, or ""
    when another dump was being written (it is as fresh as this one would
    be).
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [DUMP_LOCK])
        if not cursor.fetchone()[0]:
            log.info("public dump: another one is being written")
            return ""
    try:
        return _write_dump()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [DUMP_LOCK])


def _write_dump() -> str:
    folder = dump_dir()
    stem = DUMP_PREFIX + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    # Read before the rows' snapshot, so a removal between the two makes the
    # dump look older than it is (filtered when served), never newer.
    version, _removed = _data_versions()
    tmps = {suffix: folder / f".{stem}.{suffix}.tmp" for suffix in DUMP_SUFFIXES}
    count = 0
    columns = exports.EXPORT_COLUMNS
    try:
        with (
            gzip.open(tmps["csv.gz"], "wt", newline="", compresslevel=6) as csv_out,
            gzip.open(tmps["jsonl.gz"], "wt", compresslevel=6) as jsonl_out,
        ):
            # One pass over a server-side cursor: constant memory at any size.
            writer = csv.writer(csv_out)
            writer.writerow(columns)
            for row in exports.result_rows(Run.objects.listed(), stats=True):
                writer.writerow([exports.csv_cell(v) for v in row[:-1]])
                doc = {
                    c: exports.json_value(v) for c, v in zip(columns, row, strict=False)
                }
                # The stats are PostgreSQL's JSON text, spliced in as they are.
                line = json.dumps(doc, default=str)[:-1] + ', "stats": ' + row[-1]
                jsonl_out.write(line + "}\n")
                count += 1
        for suffix, tmp in tmps.items():
            final = folder / f"{stem}.{suffix}"
            os.replace(tmp, final)
            latest_tmp = folder / f".latest.{suffix}.tmp"
            shutil.copyfile(final, latest_tmp)
            os.replace(latest_tmp, folder / f"latest.{suffix}")
    finally:
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    meta = {"stem": stem, "version": version, "results": count}
    _write_meta(folder / f"{stem}.json", meta)
    # Last: until now latest.json named an older dump, so a reader took the
    # new files for older than they are (filtered), never the reverse.
    _write_meta(folder / "latest.json", meta)
    _prune_dumps(folder, stem)
    log.info("public dump %s: %d results", stem, count)
    return stem


def _prune_dumps(folder: Path, newest: str) -> None:
    """Keep the newest ``PUBLIC_DUMP_KEEP`` timestamped dumps (at least the
    one just written) that hold no run removed since they were read."""
    keep = max(1, int(getattr(settings, "PUBLIC_DUMP_KEEP", 7)))
    _version, removed = _data_versions()
    stems = sorted(
        {p.name.split(".", 1)[0] for p in folder.glob(DUMP_PREFIX + "*")}, reverse=True
    )
    kept = 0
    for stem in stems:
        meta = read_meta(folder / f"{stem}.json")
        fresh = meta is not None and meta["version"] >= removed
        if stem == newest or (fresh and kept < keep):
            kept += 1
            continue
        for path in folder.glob(stem + ".*"):
            path.unlink(missing_ok=True)


def dump_is_current() -> bool:
    """Whether the latest dump holds no run taken out of the public set
    since it was read: served as written; otherwise ``/api/v1/dump/``
    filters it as it serves it, until ``refresh_dump`` writes a new one."""
    meta = read_meta(dump_dir() / "latest.json")
    return meta is not None and meta["version"] >= _data_versions()[1]


@shared_task
def refresh_dump() -> str:
    """Beat's check, every ``PUBLIC_DUMP_CHECK_INTERVAL_S``: write the dump
    again when a run left the public set since the latest one was read (so
    a delete, a hide or a change of visibility is out of the files within
    minutes, not at the next daily dump).  Returns the stem written, or ""."""
    if not (dump_dir() / "latest.csv.gz").exists() or dump_is_current():
        return ""
    return public_dump()


def read_latest_dump(suffix: str) -> io.BufferedReader | None:
    path = dump_dir() / f"latest.{suffix}"
    return path.open("rb") if path.exists() else None


def filtered_dump(handle: io.BufferedReader, suffix: str) -> Iterator[bytes]:
    """The dump in ``handle`` less what is no longer listed, gzip'd again as
    it streams: rows of runs that left the public set since it was read are
    dropped, and a baseline id that is no longer listed is blanked (as a
    fresh dump writes it).  What ``/api/v1/dump/`` serves while the latest
    dump is not current (``dump_is_current``), for the minute or so until
    ``refresh_dump`` writes it again.  Closes ``handle``."""
    listed = set(Run.objects.listed().values_list("pk", flat=True))
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip
    with handle, gzip.open(handle, "rt", newline="") as text:
        for chunk in exports._chunks(_listed_lines(text, suffix, listed)):
            yield packer.compress(chunk)
    yield packer.flush()


def _listed_lines(text: io.TextIOBase, suffix: str, listed: set) -> Iterator[str]:
    """``filtered_dump``'s lines: those of listed runs, baselines not listed
    blanked."""
    run_col = DUMP_COLUMNS.index("run_id")
    baseline_col = DUMP_COLUMNS.index("baseline_id")
    if suffix == "jsonl.gz":
        for line in text:
            doc = json.loads(line)
            if doc["run_id"] in listed:
                if doc["baseline_id"] not in listed:
                    doc["baseline_id"] = None
                yield json.dumps(doc) + "\n"
        return
    writer = csv.writer(exports._Line())
    reader = csv.reader(text)
    yield writer.writerow(next(reader, DUMP_COLUMNS))
    for row in reader:
        if int(row[run_col]) in listed:
            if row[baseline_col] and int(row[baseline_col]) not in listed:
                row[baseline_col] = ""
            yield writer.writerow(row)


@shared_task
def ping(marker_path: str) -> None:
    """Round-trip check: the worker writes its pid to ``marker_path``.

    Used by ``manage.py embedded check-worker`` and the tests, to prove a
    message went through the broker to a real worker process.
    """
    Path(marker_path).write_text(str(os.getpid()))


# The refresh of the stored across-runs answers: its task, and the signals
# that queue it after ingest and moderation (benchdb/results/refresh.py).
from benchdb.results import refresh as _refresh  # noqa: E402, F401
