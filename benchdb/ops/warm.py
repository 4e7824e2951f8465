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

from django.conf import settings
from django.template import TemplateSyntaxError, engines
from django.template.backends.django import DjangoTemplates
from django.template.backends.jinja2 import Jinja2
from django.urls import NoReverseMatch, get_resolver, reverse
from jinja2 import TemplateSyntaxError as JinjaSyntaxError

log = logging.getLogger(__name__)

# Template names under these folders of the project's templates (the pages
# visitors ask for); the apps' own (the admin's, the API browser's) are left
# to their first use.
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
    """Every template under the project's template folders loaded through
    its engine (Django's cached loader and Jinja2 keep them compiled)."""
    count = 0
    root = Path(settings.BASE_DIR) / "templates"
    for backend in engines.all():
        if isinstance(backend, Jinja2):
            names = backend.env.list_templates()
            load = backend.env.get_template
        elif isinstance(backend, DjangoTemplates):
            folder = root
            names = [
                str(path.relative_to(folder))
                for path in sorted(folder.rglob("*"))
                if path.suffix in TEMPLATE_SUFFIXES and "jinja2" not in path.parts
            ]
            load = backend.get_template
        else:
            continue
        for name in names:
            try:
                load(name)
            except (TemplateSyntaxError, JinjaSyntaxError):
                # As broken on its first request: that page says so, the
                # others are served.
                log.exception("template %s does not compile", name)
                continue
            count += 1
    return count
