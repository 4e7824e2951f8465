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
from datetime import UTC, datetime, timedelta
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

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
        with transaction.atomic():
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


# Publishing to a broker that is down fails within about a second instead of
# holding the upload request (Celery's default retries for much longer).
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.3,
    "interval_max": 0.5,
}


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
    Returns how many were queued.
    """
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


def dump_dir() -> Path:
    path = Path(getattr(settings, "PUBLIC_DUMP_DIR", "") or _default_dump_dir())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _default_dump_dir() -> Path:
    from benchdb import embedded

    return embedded.var_dir() / "dumps"


@shared_task
def public_dump() -> str:
    """Write all public runs' results as gzip'd CSV and JSON Lines.

    Files are written under a temporary name and renamed into place, so a
    download never sees half a dump; ``latest.*`` always names a whole one.
    Returns the stem of the files written.
    """
    folder = dump_dir()
    stem = "benchdb-public-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    csv_tmp = folder / f".{stem}.csv.gz.tmp"
    jsonl_tmp = folder / f".{stem}.jsonl.gz.tmp"
    count = 0
    columns = exports.EXPORT_COLUMNS
    with (
        gzip.open(csv_tmp, "wt", newline="", compresslevel=6) as csv_out,
        gzip.open(jsonl_tmp, "wt", compresslevel=6) as jsonl_out,
    ):
        # One pass over a server-side cursor: constant memory at any size.
        writer = csv.writer(csv_out)
        writer.writerow(columns)
        for row in exports.result_rows(Run.objects.visible(), stats=True):
            writer.writerow([exports.csv_cell(v) for v in row[:-1]])
            doc = {c: exports.json_value(v) for c, v in zip(columns, row, strict=False)}
            # The stats are PostgreSQL's JSON text, spliced in as they are.
            line = json.dumps(doc, default=str)[:-1] + ', "stats": ' + row[-1] + "}"
            jsonl_out.write(line + "\n")
            count += 1
    for tmp, suffix in ((csv_tmp, "csv.gz"), (jsonl_tmp, "jsonl.gz")):
        final = folder / f"{stem}.{suffix}"
        os.replace(tmp, final)
        latest_tmp = folder / f".latest.{suffix}.tmp"
        shutil.copyfile(final, latest_tmp)
        os.replace(latest_tmp, folder / f"latest.{suffix}")
    keep = getattr(settings, "PUBLIC_DUMP_KEEP", 7)
    for suffix in ("csv.gz", "jsonl.gz"):
        old = sorted(folder.glob(f"benchdb-public-*.{suffix}"))[:-keep]
        for path in old:
            path.unlink(missing_ok=True)
    log.info("public dump %s: %d results", stem, count)
    return stem


def read_latest_dump(suffix: str) -> io.BufferedReader | None:
    path = dump_dir() / f"latest.{suffix}"
    return path.open("rb") if path.exists() else None


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
