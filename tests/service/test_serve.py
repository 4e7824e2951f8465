"""``manage.py serve`` keeps benchdb running: a worker, the refresh worker or
beat killed is started again with one line saying so; the web server killed
ends serve with a non-zero status and the reason.  The processes killed are
the real ones serve started (``kill -9``), on the embedded broker.  With
``DEBUG=false`` it still serves the site's static files."""

from __future__ import annotations

import gc
import os
import re
import signal

import pytest

from benchdb import embedded
from tests.conftest import log_tail, wait_for
from tests.service.serving import Serve, alive, embedded_env, get, ping

READY = {
    "worker": re.compile(r"ingest@\S+ ready"),
    "refresh worker": re.compile(r"refresh@\S+ ready"),
    "beat": re.compile(r"beat: Starting"),
}


def test_the_refresh_has_its_own_queue():
    from benchdb.celery import app

    route = app.amqp.router.route({}, "benchdb.results.refresh.refresh_summaries")
    assert route["queue"].name == "refresh"
    assert app.amqp.router.route({}, "benchdb.results.tasks.ingest")["queue"].name == (
        "celery"
    )


# The test database (committed, so serve's processes see it).
@pytest.mark.django_db(transaction=True)
def test_serve_restarts_what_dies_and_exits_when_the_web_server_does(tmp_path):
    from django.db import connection

    database = embedded.database_url(connection.settings_dict)
    env = embedded_env(tmp_path, database, DEBUG="false")
    serve = Serve(tmp_path, env)
    try:
        serve.wait_up()
        # DEBUG=false: the stylesheet is served, as a stylesheet.
        status, headers, body = get(f"{serve.url}/static/css/benchdb.css")
        assert status == 200 and headers["Content-Type"].startswith("text/css")
        assert b"main {" in body
        status, _, page = get(f"{serve.url}/no/such/page/")
        assert status == 404 and b"/static/css/benchdb.css" in page

        for name, ready in READY.items():
            serve.wait(lambda r=ready: r.search(serve.text()), f"the {name} to start")
            old = serve.pids()[name]
            os.kill(old, signal.SIGKILL)
            new = serve.wait(
                lambda n=name, o=old: (
                    (p := serve.pids().get(n)) != o and alive(p) and p
                ),
                f"the {name} (pid {old}, killed) to be started again",
            )
            said = [
                line
                for line in serve.text().splitlines()
                if f"(pid {old}) killed" in line
            ]
            assert len(said) == 1, said
            assert f"serve: the {name} (pid {old}) killed by SIGKILL" in said[0]
            assert "its last error:" in said[0] or "no error printed" in said[0]
            assert f"restarted as pid {new}" in said[0] or "restarting it in" in said[0]
        # The restarted worker works.
        serve.wait(lambda: len(READY["worker"].findall(serve.text())) >= 2, "ready")
        marker = tmp_path / "pong"
        ping(env, marker)
        serve.wait(marker.exists, "the restarted worker to run a task")

        children = serve.pids()
        os.kill(children["web server"], signal.SIGKILL)
        wait_for(
            lambda: serve.proc.poll() is not None,
            timeout=90,
            what="serve to exit after its web server was killed",
            log=serve.log,
        )
        assert serve.proc.returncode == 1
        last = serve.text().strip().splitlines()[-1]
        assert last.startswith(
            f"serve: the web server (pid {children['web server']}) killed by SIGKILL"
        ), log_tail(serve.log)
        assert "exiting" in last
        wait_for(
            lambda: not any(alive(p) for p in children.values()),
            timeout=30,
            what="every child of serve to be gone",
            log=serve.log,
        )
    finally:
        serve.stop()


def test_it_says_why_a_child_died():
    from benchdb.ops.management.commands.serve import Child, exit_reason

    child = Child("worker", [])
    child.tail.extend(
        [
            "[INFO] ready\n",
            "CRITICAL celery.worker Unrecoverable error: JSONDecodeError('x')\n",
            "\n",
        ]
    )
    assert child.last_error().startswith(
        "its last error: CRITICAL celery.worker Unrecoverable"
    )
    assert exit_reason(-9) == "killed by SIGKILL"
    assert exit_reason(3) == "exited with status 3"


def test_a_worker_process_keeps_its_start_up_out_of_the_collector():
    """Each worker process freezes what start-up made (benchdb.celery), as
    the web processes do (benchdb.wsgi): the collector's full passes walk
    only what tasks made since."""
    from celery.signals import worker_process_init

    from benchdb.celery import freeze_start_up

    receivers = [ref() for _key, ref in worker_process_init.receivers]
    assert freeze_start_up in receivers
    gc.unfreeze()
    try:
        freeze_start_up()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
