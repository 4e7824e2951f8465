"""A web process's start-up warm-up (benchdb/ops/warm.py, called by
benchdb/wsgi.py before gunicorn forks its workers)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import jinja2
from django.template import engines

from benchdb.ops import warm

ROOT = Path(__file__).resolve().parents[2]


def _template_files() -> list[Path]:
    return [
        p for p in (ROOT / "templates").rglob("*") if p.suffix in warm.TEMPLATE_SUFFIXES
    ]


def test_every_project_template_compiles_at_start_up():
    warmed = warm.warm_process()
    assert warmed["templates"] == len(_template_files()) > 40
    # The API's namespace is filled as well as the site's.
    assert warmed["url_names"] > 100


def test_a_template_that_does_not_compile_is_logged_and_the_rest_load(
    monkeypatch, caplog
):
    env = engines["jinja2"].env
    broken = env.list_templates()[0]
    load = env.get_template

    def get_template(name, *args, **kwargs):
        if name == broken:
            raise jinja2.TemplateSyntaxError("unexpected '}'", 1, name)
        return load(name, *args, **kwargs)

    monkeypatch.setattr(env, "get_template", get_template)
    with caplog.at_level(logging.ERROR, logger="benchdb.ops.warm"):
        warmed = warm.warm_process()
    assert warmed["templates"] == len(_template_files()) - 1
    assert f"template {broken} does not compile" in caplog.text


def test_wsgi_start_up_reads_no_database():
    """gunicorn --preload imports benchdb.wsgi in the master, before the
    fork: the warm-up must not open a connection the workers would share.
    With a database that cannot be reached, the import still succeeds."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    env["DATABASE_URL"] = "postgres://nobody@127.0.0.1:9/nothing"
    env["PYTHONPATH"] = f"{ROOT / 'agent'}:{ROOT}"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import benchdb.wsgi as w; print(w.WARMED['templates'])",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == len(_template_files())
