"""What a web process would otherwise do on its first request of each kind,
done once at start-up (``benchdb/wsgi.py``), before gunicorn forks its
workers (``--preload``), so every worker starts with it.

Without it each worker's first request of a kind paid for it, in a
visitor's time: the URL resolvers' reverse lookups built on the first
``reverse()`` (about 20 ms, with their regular expressions), and each page's
templates read and compiled on their first use (10-25 ms for a run page or
a comparison). A worker is replaced every ``--max-requests`` (then 1,000),
so five workers paid it again every few thousand requests, and the harness's
p95 of a row asked 20 times over five fresh workers was mostly these first
requests (bench/README.md, "First requests").

Nothing here reads the database: a connection must not be opened before the
fork (the workers would share it).
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.template import TemplateSyntaxError, engines
from django.template.backends.django import DjangoTemplates
from django.template.backends.jinja2 import Jinja2
from django.urls import NoReverseMatch, get_resolver, reverse
from jinja2 import TemplateSyntaxError as JinjaSyntaxError

log = logging.getLogger(__name__)

# What a template file is called; the apps' own templates (the admin's, the
# API browser's) are left to their first use: only the folders the settings
# name (each engine's ``DIRS``) are read.
TEMPLATE_SUFFIXES = (".html", ".txt")


def warm_process() -> dict[str, int]:
    """Build the URL resolvers' reverse lookups and compile the project's
    templates; returns how many of each (for a test and a log line)."""
    return {"url_names": _urls(get_resolver()), "templates": _templates()}


def _urls(resolver, namespace: str = "") -> int:
    """Every namespace's reverse lookups built, as ``reverse()`` builds them
    on its first call there (a namespace's resolver is made and filled on
    its first name); the number of names."""
    names = [name for name in resolver.reverse_dict if isinstance(name, str)]
    if namespace and names:
        try:
            reverse(f"{namespace}:{names[0]}")
        except NoReverseMatch:  # it takes arguments: built all the same
            pass
    count = len(names)
    for name, (_prefix, sub) in resolver.namespace_dict.items():
        count += _urls(sub, f"{namespace}:{name}" if namespace else name)
    return count


def _templates() -> int:
    """Every template in the engines' own folders (``DIRS``) loaded through
    its engine (Django's cached loader and Jinja2 keep them compiled); a
    folder inside another engine's (Jinja2's under Django's) is that
    engine's alone."""
    backends = [b for b in engines.all() if isinstance(b, DjangoTemplates | Jinja2)]
    count = 0
    for backend in backends:
        others = [Path(d) for b in backends if b is not backend for d in b.dirs]
        load = (
            backend.env.get_template
            if isinstance(backend, Jinja2)
            else backend.get_template
        )
        for folder in map(Path, backend.dirs):
            for path in sorted(folder.rglob("*")):
                if path.suffix not in TEMPLATE_SUFFIXES or any(
                    path.is_relative_to(o) and not folder.is_relative_to(o)
                    for o in others
                ):
                    continue
                name = path.relative_to(folder).as_posix()
                try:
                    load(name)
                except (TemplateSyntaxError, JinjaSyntaxError):
                    # As broken on its first request: that page says so,
                    # the others are served.
                    log.exception("template %s does not compile", name)
                    continue
                count += 1
    return count
