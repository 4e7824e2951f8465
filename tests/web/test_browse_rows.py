"""The browse table's rows are built in Python (``present.browse_rows_html``);
they must be exactly the markup of the template fragment they replaced,
escaping included, for runs of every shape."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.template import Context, Template

from benchdb.results.models import Run

pytestmark = pytest.mark.django_db

# runs.html's rows before ``present.browse_rows_html``.
ROWS_TEMPLATE = (
    "{% load benchdb_format %}"
    '  {% for run in page %}<tr{% if run.suspect %} class="suspect"{% endif %}>\n'
    '    <td><input type="checkbox" name="runs" value="{{ run.pk }}" aria-label="select run {{ run.pk }}"></td>\n'  # noqa: E501
    '    <td><a href="{{ run.get_absolute_url }}">{{ run }}</a>{% if run.suspect %} <span class="badge">suspect</span>{% endif %}{% if run.source == "published" %} <span class="badge">published</span>{% endif %}<br><small>{{ run.get_role_display }}</small></td>\n'  # noqa: E501
    "    <td>{{ run.platform_label|default:run.get_platform_display }}</td><td>{{ run.cache_mode }}</td>\n"  # noqa: E501
    '    <td>{{ run.get_storage_backend_display }}</td><td>{{ run.image_format }} · {{ run.disk_bus }}</td><td>{{ run.hardware.get_disk_type_display|default:"—" }}</td>\n'  # noqa: E501
    '    <td class="num" data-value="{{ run.rand4k_iops|stringformat:\'r\' }}">{% if run.rand4k_iops is not None %}{{ run.rand4k_iops|floatformat:"0g" }}{% else %}—{% endif %}</td>\n'  # noqa: E501
    '    <td class="num">{% if run.seq1m_bw is not None %}{{ run.seq1m_bw|metric:"bw_bytes" }}{% else %}—{% endif %}</td>\n'  # noqa: E501
    '    <td class="num">{{ run.rand4k_overhead_text }}</td>\n'
    '    <td>{{ run.created|date:"Y-m-d" }}</td></tr>\n'
    '  {% empty %}<tr><td colspan="11">No run matches these filters. Remove one above{% if chips %}, or <a href="{% url \'run-list\' %}">clear them all</a>{% endif %}.</td></tr>{% endfor %}'  # noqa: E501
)


def test_browse_rows_are_the_templates_own(client):
    """Every page of the published reference runs and runs of odd shapes
    (markup in the title, suspect, no hardware, hosts labelled by their
    guests' platform, figures missing or huge): the page's table body is
    what the old template fragment renders for the same runs."""
    call_command("load_reference")
    odd = Run.objects.order_by("pk").first()
    odd.title = "<script>alert(\"x\")</script> & 'quoted'"
    odd.suspect = True
    odd.save()
    Run.objects.filter(pk__in=Run.objects.order_by("-pk").values("pk")[:3]).update(
        hardware=None
    )
    template = Template(ROWS_TEMPLATE)
    seen = 0
    for query in ("", "ordering=-rand4k_iops", "role=host", "cache_mode=unsafe"):
        page_no = 1
        while True:
            response = client.get(f"/runs/?{query}&page={page_no}")
            assert response.status_code == 200
            context = response.context
            page = context["page"]
            expected = template.render(
                Context({"page": page, "chips": context["chips"]})
            )
            html = response.content.decode()
            start = html.index("<tbody>") + len("<tbody>\n")
            body = html[start : html.index("\n  </tbody>")]
            assert body == expected
            seen += len(page)
            if not page.has_next():
                break
            page_no += 1
    assert seen > 30
    page = client.get("/runs/").content.decode()
    assert (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;"
        in page
    )
    # No run: the message, as before.
    response = client.get("/runs/?q=no-such-run-anywhere")
    assert "No run matches these filters" in response.content.decode()
