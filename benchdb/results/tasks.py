"""Celery tasks: ingest submissions, recompute statistics.

Tasks take primary keys and re-fetch their rows: a message may be delivered
twice (late acknowledgement), so each task returns quietly when its work is
already done.
"""

from __future__ import annotations

import logging
import os

from celery import shared_task
from django.db import OperationalError, transaction

from benchdb.results.ingest import IngestError, store_bundle
from benchdb.results.models import Run, Submission

log = logging.getLogger(__name__)


# Retries only for transient database trouble; a bad bundle fails for good.
@shared_task(
    bind=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def ingest(self, submission_id: int) -> None:
    with transaction.atomic():
        sub = Submission.objects.select_for_update().filter(pk=submission_id).first()
        if sub is None or sub.status in (
            Submission.Status.DONE,
            Submission.Status.FAILED,
        ):
            return
        sub.status = Submission.Status.PROCESSING
        sub.attempts += 1
        sub.save(update_fields=["status", "attempts", "updated"])
        existing = Run.objects.filter(uuid=sub.bundle_id).first()
        try:
            run = existing or store_bundle(
                sub.bundle,
                owner=sub.submitted_by,
                owner_key_hash=sub.owner_key_hash,
                visibility=sub.visibility,
            )
        except IngestError as exc:
            sub.status = Submission.Status.FAILED
            sub.errors = exc.errors
            sub.save(update_fields=["status", "errors", "updated"])
            log.warning("submission %s failed: %s", sub.bundle_id, exc)
            return
        sub.run = run
        sub.status = Submission.Status.DONE
        sub.save(update_fields=["run", "status", "updated"])
    log.info("submission %s ingested as run %s", sub.bundle_id, run.pk)


@shared_task
def ping(marker_path: str) -> None:
    """Round-trip check: the worker writes its pid to ``marker_path``.

    Used by ``manage.py embedded check-worker`` and the tests, to prove a
    message went through the broker to a real worker process.
    """
    from pathlib import Path

    Path(marker_path).write_text(str(os.getpid()))
