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
from datetime import UTC, datetime
from pathlib import Path

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError, transaction

from benchdb.results.ingest import IngestError, store_bundle
from benchdb.results.models import Result, Run, Submission

log = logging.getLogger(__name__)

# The errors worth another attempt: the database went away or a concurrent
# transaction lost a serialization/deadlock race.  Anything else is a bad
# bundle or a bug, and trying again would only fail again.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
MAX_RETRIES = 5


def _fail(submission_id: int, errors: list[dict]) -> None:
    Submission.objects.filter(pk=submission_id).exclude(
        status=Submission.Status.DONE
    ).update(status=Submission.Status.FAILED, errors=errors)


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
            sub = (
                Submission.objects.select_for_update().filter(pk=submission_id).first()
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
            run = Run.objects.filter(uuid=sub.bundle_id).first() or store_bundle(
                sub.bundle,
                owner=sub.submitted_by,
                owner_key_hash=sub.owner_key_hash,
                visibility=sub.visibility,
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


# Columns of the public dump's results.csv: one row per run and test.
DUMP_COLUMNS = (
    "run_id",
    "run_uuid",
    "created",
    "ran_at",
    "role",
    "platform",
    "virtualization",
    "cache_mode",
    "aio_mode",
    "iothread",
    "image_format",
    "storage_backend",
    "disk_bus",
    "disk_type",
    "disk_model",
    "cpu_model",
    "suite_id",
    "suite_version",
    "source",
    "suspect",
    "baseline_id",
    "test_id",
    "comparability_key",
    "tool",
    "repeat_count",
    "iops_mean",
    "bw_bytes_mean",
    "lat_mean_ns_mean",
)


def dump_dir() -> Path:
    path = Path(getattr(settings, "PUBLIC_DUMP_DIR", "") or _default_dump_dir())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _default_dump_dir() -> Path:
    from benchdb import embedded

    return embedded.var_dir() / "dumps"


def result_rows(runs=None):
    """One dict per (run, result) of ``runs`` (default: all visible runs).

    Stable order (run id, test id), streamed from the database in chunks;
    ``_stats`` carries the full statistics for JSON outputs.
    """
    runs = Run.objects.visible() if runs is None else runs
    results = (
        Result.objects.filter(run__in=runs.values("pk"))
        .select_related(
            "run",
            "run__baseline",
            "run__hardware",
            "run__hardware__disk_model",
            "run__hardware__cpu_model",
        )
        .order_by("run_id", "test_id")
    )
    for res in results.iterator(chunk_size=2000):
        run = res.run
        hw = run.hardware
        yield {
            "run_id": run.pk,
            "run_uuid": str(run.uuid),
            "created": run.created.isoformat(),
            "ran_at": run.ran_at.isoformat() if run.ran_at else "",
            "role": run.role,
            "platform": run.platform,
            "virtualization": run.virtualization,
            "cache_mode": run.cache_mode,
            "aio_mode": run.aio_mode,
            "iothread": "" if run.iothread is None else run.iothread,
            "image_format": run.image_format,
            "storage_backend": run.storage_backend,
            "disk_bus": run.disk_bus,
            "disk_type": hw.disk_type if hw else "",
            "disk_model": str(hw.disk_model or "") if hw else "",
            "cpu_model": str(hw.cpu_model or "") if hw else "",
            "suite_id": run.suite_id,
            "suite_version": run.suite_version,
            "source": run.source,
            "suspect": run.suspect,
            # A baseline's id only where the baseline is listed itself.
            "baseline_id": (
                run.baseline_id if run.baseline_id and run.baseline.is_listed() else ""
            ),
            "test_id": res.test_id,
            "comparability_key": res.comparability_key,
            "tool": res.tool,
            "repeat_count": res.repeat_count,
            "iops_mean": res.iops_mean,
            "bw_bytes_mean": res.bw_bytes_mean,
            "lat_mean_ns_mean": res.lat_mean_ns_mean,
            "_stats": res.stats,
        }


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
    with (
        gzip.open(csv_tmp, "wt", newline="") as csv_out,
        gzip.open(jsonl_tmp, "wt") as jsonl_out,
    ):
        writer = csv.DictWriter(csv_out, fieldnames=DUMP_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in result_rows():
            writer.writerow(row)
            stats = row.pop("_stats")
            jsonl_out.write(
                json.dumps({**row, "stats": stats}, cls=DjangoJSONEncoder) + "\n"
            )
            count += 1
    for tmp, suffix in ((csv_tmp, "csv.gz"), (jsonl_tmp, "jsonl.gz")):
        final = folder / f"{stem}.{suffix}"
        os.replace(tmp, final)
        latest_tmp = folder / f".latest.{suffix}.tmp"
        with open(final, "rb") as src, open(latest_tmp, "wb") as dst:
            dst.write(src.read())
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
