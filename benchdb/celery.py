"""The Celery application: ingestion and statistics run in worker processes."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")

app = Celery("benchdb")
# All Celery settings live in benchdb/settings.py under the CELERY_ prefix.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
