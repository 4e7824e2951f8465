"""The Celery application: ingestion and statistics run in worker processes."""

import gc
import os
import warnings

from celery import Celery
from celery.exceptions import SecurityWarning
from celery.signals import task_postrun, task_prerun, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")

# Celery warns "You're running the worker with superuser privileges" when
# started as root (a fresh VM, a container without USER).  What it guards
# against is a message that runs code when it is unpickled; benchdb accepts
# JSON only (CELERY_ACCEPT_CONTENT), and Celery itself refuses to start as
# root with pickle enabled, so the warning says nothing a user can act on
# here (the Docker image runs as an unprivileged user anyway).
warnings.filterwarnings("ignore", category=SecurityWarning)

app = Celery("benchdb")
# All Celery settings live in benchdb/settings.py under the CELERY_ prefix.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def keep_database_connection(**_kwargs) -> None:
    """A worker process keeps its connection (``WORKER_DB_CONN_MAX_AGE``)."""
    from django.conf import settings
    from django.db import connections

    for alias in connections:
        connections[alias].settings_dict["CONN_MAX_AGE"] = (
            settings.WORKER_DB_CONN_MAX_AGE
        )


@worker_process_init.connect
def freeze_start_up(**_kwargs) -> None:
    """Keep the objects of start-up (Django, the tasks and all they import)
    out of the garbage collector's full passes, as benchdb/wsgi.py does for
    the web workers: in bench.profile_ingest, without it, a full pass every
    few dozen bundles cost 3 to 3.5 ms of each bundle's ingest."""
    gc.freeze()


@task_prerun.connect
@task_postrun.connect
def recycle_database_connections(sender=None, **_kwargs) -> None:
    """Around each task what Django does around each request: close a
    connection that is too old, unusable, or saw an error
    (settings.CELERY_DB_REUSE_MAX keeps Celery from closing it every time).
    Not for a task run in-process (eager), inside its caller's work."""
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
