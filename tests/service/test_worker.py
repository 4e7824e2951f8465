"""A task sent by the web process really runs in a separate worker process."""

import os

import pytest

from benchdb.results.tasks import ping
from tests.conftest import wait_for


@pytest.mark.worker
def test_it_runs_a_task_in_the_worker_process(celery_worker_process, tmp_path):
    marker = tmp_path / "pong"
    ping.delay(str(marker))
    pid = wait_for(
        lambda: marker.exists() and marker.read_text(),
        timeout=30,
        what="the worker to answer the ping",
    )
    assert int(pid) == celery_worker_process.pid
    assert int(pid) != os.getpid()
