"""The browse table's rows (templates/web/_run_rows.html): the uploader's
words as text, every shape of run shown, each cell labelled by its
column's header for narrow screens."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from benchdb.results.models import Hardware, Run
from benchdb.web import present

pytestmark = pytest.mark.django_db


def test_browse_rows_escape_and_label_every_cell(client):
    """Every page of the published reference runs and runs of odd shapes
    (markup in the title, suspect, no hardware, hosts labelled by their
    guests' platform): each row has its cells, escaped, with the header of
    its column; the message when no run matches."""
    call_command("load_reference")
    odd = Run.objects.order_by("pk").first()
    odd.title = "<script>alert(\"x\")</script> & 'quoted'"
    odd.suspect = True
    odd.save()
    Run.objects.filter(pk__in=Run.objects.order_by("-pk").values("pk")[:3]).update(
        hardware=None
    )
    labels = [
        "Run", "Platform", "Cache", "Storage", "Format · bus", "Disk",
        "4K random read, IOPS", "1M sequential read, MB/s", "4K read vs host",
        "Added",
    ]  # fmt: skip
    seen = 0
    for query in ("", "ordering=-rand4k_iops", "role=host", "cache_mode=unsafe"):
        page_no = 1
        while True:
            response = client.get(f"/runs/?{query}&page={page_no}")
            assert response.status_code == 200
            html = response.content.decode()
            body = html[html.index("<tbody>") : html.index("</tbody>")]
            rows = re.findall(r"<tr\b.*?</tr>", body, re.S)
            page = response.context["page"]
            assert len(rows) == len(page)
            for row, run in zip(rows, page, strict=True):
                assert re.findall(r'data-label="([^"]*)"', row) == labels
                assert f'value="{run.pk}"' in row
            seen += len(page)
            if not page.has_next():
                break
            page_no += 1
    assert seen > 30
    page = client.get("/runs/").content.decode()
    # As markupsafe writes it (Jinja2's rows): &#34; and &#39; for the quotes.
    assert (
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;quoted&#39;" in page
    )
    assert "<script>alert" not in page
    assert '<tr class="suspect">' in page
    assert '<span class="badge">suspect</span>' in page
    # No run: the message, as before.
    response = client.get("/runs/?q=no-such-run-anywhere")
    assert "No run matches these filters" in response.content.decode()


@pytest.mark.parametrize(
    "model, field",
    [
        (Run, "role"),
        (Run, "platform"),
        (Run, "storage_backend"),
        (Run, "source"),
        (Hardware, "disk_type"),
    ],
)
def test_display_is_djangos_get_field_display(model, field):
    """``present.display``, the rows' labels: every choice and a value
    outside them as ``get_<field>_display`` says it."""
    values = [v for v, _label in model._meta.get_field(field).flatchoices]
    for value in [*values, "not-a-choice"]:
        obj = model(**{field: value})
        assert present.display(obj, field) == getattr(obj, f"get_{field}_display")()
