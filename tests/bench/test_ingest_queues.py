"""``bench --ingest`` runs the workers ``serve`` runs, one per queue the app
uses: the refresh each ingest queues is consumed, as in production."""

from __future__ import annotations

import pytest
from django.conf import settings

from bench import ingest as bench_ingest


def test_every_queue_the_app_routes_to_is_consumed():
    consumed = set()
    for _name, argv in bench_ingest.worker_argvs():
        assert argv[1:4] == ["-m", "celery", "-A"]
        consumed |= {
            q
            for arg in argv
            if arg.startswith("--queues=")
            for q in arg.split("=", 1)[1].split(",")
        }
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert {"celery", "refresh"} <= consumed
    assert routed <= consumed


def test_a_queue_no_worker_consumes_is_refused(settings):
    settings.CELERY_TASK_ROUTES = {
        **settings.CELERY_TASK_ROUTES,
        "benchdb.results.tasks.public_dump": {"queue": "dumps"},
    }
    with pytest.raises(SystemExit, match="dumps"):
        bench_ingest.worker_argvs()
