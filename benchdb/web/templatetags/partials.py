"""``{% rows "web/_x.html" rows=... %}``: a table's rows written by a Jinja2
template (templates/jinja2/), for the tables whose rows the Django engine
made measurably slow (bench/README.md: the guest+host comparison's 166 rows
took 27 ms more than Python's f-strings, Jinja2 about 2 ms).  Jinja2's
autoescape is on (Django's Jinja2 backend default): every value is escaped
as the Django engine escapes it."""

from __future__ import annotations

import functools
import hashlib

from django import template
from django.template import engines
from jinja2 import Template
from markupsafe import Markup

register = template.Library()


def partial(name: str) -> Template:
    """The Jinja2 template ``name`` (the engine keeps it compiled)."""
    return engines["jinja2"].env.get_template(name)


@functools.lru_cache(maxsize=64)
def code(jinja: Template) -> str:
    """A digest of the source of ``jinja`` (a template object: one loaded
    again after its file changed is another, with its own digest), part of
    the key of anything kept that it wrote."""
    source, _filename, _uptodate = jinja.environment.loader.get_source(
        jinja.environment, jinja.name
    )
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def write(jinja: Template, **context) -> Markup:
    """What ``jinja`` writes for ``context``: markup made by an autoescaping
    template, so not escaped again."""
    return Markup(jinja.render(context))


@register.simple_tag
def rows(name: str, **context) -> Markup:
    """The rows ``name`` (a Jinja2 template) writes for ``context``."""
    return write(partial(name), **context)
