"""``manage.py check --deploy``: production variables pass, insecure ones fail.

The full command runs as a subprocess (settings are read once, at start);
each refusal is also checked on its own through the check function.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings

from benchdb.ops.checks import check_production_settings, check_shared_limits
from tests.deploy.conftest import ROOT, UNUSED_REDIS, production_env

# Django's own deploy warnings that production settings must not raise.
SECURITY_WARNINGS = ("W004", "W008", "W009", "W012", "W016", "W018", "W020")

# pytest-django creates the test database only for a session whose tests ask
# for it; the subprocesses here use that database.
pytestmark = pytest.mark.django_db


def check_deploy(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_passes_with_production_variables(test_database_url):
    result = check_deploy(production_env(test_database_url))
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "benchdb.E" not in output
    for warning in SECURITY_WARNINGS:
        assert f"security.{warning}" not in output


def test_it_passes_strictly_with_every_hsts_option(test_database_url):
    env = production_env(
        test_database_url,
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        SECURE_HSTS_PRELOAD="true",
        CACHE_URL=UNUSED_REDIS,
    )
    result = check_deploy(env, "--fail-level", "WARNING")
    assert result.returncode == 0, result.stderr


def test_it_fails_with_the_insecure_development_values(test_database_url):
    env = production_env(test_database_url, DEBUG="true", ALLOWED_HOSTS="*")
    del env["SECRET_KEY"]
    result = check_deploy(env)
    assert result.returncode == 1
    for error in ("benchdb.E001", "benchdb.E003", "benchdb.E004"):
        assert error in result.stderr
    assert "secrets.token_urlsafe" in result.stderr  # the hint says what to do


def ids(**overrides) -> set[str]:
    good = {
        "SECRET_KEY": "k" * 10 + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        "DEBUG": False,
        "ALLOWED_HOSTS": ["example.org"],
        "DATABASE_IS_EMBEDDED": False,
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "CACHES": {"default": {"BACKEND": "benchdb.ops.cache.FailSoftRedisCache"}},
    }
    good.update(overrides)
    with override_settings(**good):
        found = check_production_settings() + check_shared_limits()
        return {error.id for error in found}


def test_a_production_configuration_has_no_errors():
    assert ids() == set()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"SECRET_KEY": settings.INSECURE_SECRET_KEY}, "benchdb.E001"),
        ({"SECRET_KEY": "short-but-random-x7Q"}, "benchdb.E002"),
        ({"SECRET_KEY": "ab" * 40}, "benchdb.E002"),
        ({"DEBUG": True}, "benchdb.E003"),
        ({"ALLOWED_HOSTS": ["example.org", "*"]}, "benchdb.E004"),
        ({"DATABASE_IS_EMBEDDED": True}, "benchdb.E005"),
        ({"CELERY_BROKER_URL": "filesystem://"}, "benchdb.E006"),
        (
            {"CACHES": {"default": {"BACKEND": settings.CACHES["default"]["BACKEND"]}}},
            "benchdb.W001",
        ),
    ],
)
def test_it_refuses_each_insecure_setting(overrides, expected):
    assert ids(**overrides) == {expected}


def test_it_warns_when_limits_cannot_be_shared(test_database_url):
    result = check_deploy(production_env(test_database_url))  # no CACHE_URL
    assert result.returncode == 0, result.stderr
    assert "benchdb.W001" in result.stdout + result.stderr
    assert "CACHE_URL" in result.stdout + result.stderr
