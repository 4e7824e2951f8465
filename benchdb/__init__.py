"""benchdb: comparable, repeatable, shared VM disk benchmarks.

Importing the Celery app here makes ``@shared_task`` bind to it whenever
Django starts (web process or worker alike).
"""

from benchdb.celery import app as celery_app

__all__ = ("celery_app",)
