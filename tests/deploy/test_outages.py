"""One dependency down does not take the web process down with it.

A real gunicorn (``entrypoint.sh web``) with the cache and the broker on a
Redis of its own (a ``redis-server`` started here on a free port, as
docker/.env.example puts both on the compose Redis), then that Redis killed:
reads still answer, and an upload is still stored and answered 503 with
Retry-After (docs/deploy.md, "Submissions").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import pytest

from benchdb.results.models import Submission
from tests.api.factories import FioRuns, make_bundle
from tests.conftest import wait_for
from tests.deploy.conftest import free_port, production_env, request, running_web

# The subprocess commits to the test database: flushed after each test.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of this test's own, killed by the test when it likes."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is needed (Debian package redis-server)"
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + ["--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (
                subprocess.run(
                    ["redis-cli", "-p", str(port), "ping"], capture_output=True
                ).stdout.strip()
                == b"PONG"
            ),
            timeout=20,
            what="redis-server to answer",
        )
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def web_on_redis(test_database_url, redis_server, tmp_path):
    proc_redis, redis_port = redis_server
    env = production_env(
        test_database_url,
        CACHE_URL=f"redis://127.0.0.1:{redis_port}/1",
        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
        WEB_CONCURRENCY="1",
        WHITENOISE_USE_FINDERS="true",
    )
    log = tmp_path / "gunicorn.log"
    with running_web(env, log) as base:
        yield base, proc_redis, log


def test_reads_answer_and_uploads_are_stored_with_redis_down(
    web_on_redis, tmp_path_factory
):
    base, redis, log = web_on_redis
    reads = ("/api/v1/runs/", "/api/v1/aggregates/?test_id=fio-rand-read-4k-q1t1")
    for path in reads:
        assert request(base + path)[0] == 200, path  # counted in Redis
    redis.kill()
    redis.wait()

    for path in reads:
        status, _, body = request(base + path)
        assert status == 200, (path, body[:500], log.read_text()[-3000:])
    # The outage is logged, not silent.
    assert "cache unreachable" in log.read_text()

    doc = make_bundle(FioRuns(tmp_path_factory.mktemp("fio")))
    status, headers, body = request(
        base + "/api/v1/submissions/",
        json.dumps(doc).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 503, (body[:500], log.read_text()[-3000:])
    assert int(headers["Retry-After"]) > 0
    answer = json.loads(body)
    assert answer["owner_key"].startswith("bdo")  # the uploader can claim it
    stored = Submission.objects.get(bundle_id=uuid.UUID(doc["bundle_id"]))
    assert stored.status == Submission.Status.QUEUED
    assert "broker unreachable" in stored.last_error


def test_the_cache_counts_locally_while_redis_is_unreachable(caplog):
    from benchdb.ops.cache import FailSoftRedisCache

    dead = FailSoftRedisCache(f"redis://127.0.0.1:{free_port()}/0", {})
    assert dead.add("n", 1, 60) is True
    assert dead.incr("n") == 2
    assert dead.get_many(["n", "m"]) == {"n": 2}
    # Warned once for the outage, not once per operation.
    warnings = [r for r in caplog.records if "cache unreachable" in r.getMessage()]
    assert len(warnings) == 1
