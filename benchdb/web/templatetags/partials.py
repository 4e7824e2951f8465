"""``{% rows "web/_x.html" rows=... %}``: a table's rows written by a Jinja2
template (templates/jinja2/), for the tables whose rows the Django engine
made measurably slow (bench/README.md: the guest+host comparison's 166 rows
took 27 ms more than Python's f-strings, Jinja2 about 2 ms).  Jinja2's
autoescape is on (Django's Jinja2 backend default): every value is escaped
as the Django engine escapes it."""

from __future__ import annotations

from django import template
from django.template import engines
from markupsafe import Markup

register = template.Library()


@register.simple_tag
def rows(name: str, **context) -> Markup:
    """The rows ``name`` (a Jinja2 template) writes for ``context``: markup
    made by an autoescaping template, so not escaped again."""
    jinja = engines["jinja2"].env.get_template(name)
    return Markup(jinja.render(context))
