"""Nothing user-supplied reaches a page as markup, and no page runs inline script.

Every stored field a submitter controls and every query parameter is given a
script payload; the pages must show it as text (escaped) and carry a
Content-Security-Policy that would stop inline script anyway.
"""

from __future__ import annotations

import pytest

from tests.web.payloads import PAYLOAD, poison_reference

pytestmark = pytest.mark.django_db

RAW_MARKERS = ("<img src=x", "<script>alert(17)")


@pytest.fixture
def poisoned():
    return poison_reference()


def assert_inert(response):
    body = response.content.decode()
    if response["Content-Type"].startswith(("text/plain", "text/csv")):
        # Never rendered as HTML: the browser is told not to sniff.
        assert response["X-Content-Type-Options"] == "nosniff"
        return body
    for marker in RAW_MARKERS:
        assert marker not in body, f"{marker!r} unescaped in {response.request}"
    return body


def test_stored_fields_are_escaped_on_every_page(client, poisoned):
    runs = poisoned["runs"]
    ids = ",".join(str(r.pk) for r in runs[:3])
    urls = [
        "/",
        "/runs/",
        "/runs/?q=T",
        runs[0].get_absolute_url(),
        f"/compare/?runs={ids}",
        f"/c/{poisoned['saved'].slug}",
        "/reports/cache-modes/",
        "/reports/overhead/",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_inert(response)
    body = client.get(runs[0].get_absolute_url()).content.decode()
    assert "&lt;img src=x onerror=alert(16)&gt;" in body  # shown, as text
    assert "&lt;script&gt;alert(17)&lt;/script&gt;" in body


def test_query_parameters_are_escaped_in_errors(client, poisoned):
    ids = ",".join(str(r.pk) for r in poisoned["runs"][:2])
    urls = [
        f"/compare/?runs=22,{PAYLOAD}",
        f"/compare/?runs={ids}&ref={PAYLOAD}",
        f"/compare/csv/?runs=22,{PAYLOAD}",
        f"/compare/csv/?runs={ids}&ref={PAYLOAD}",
        f"/runs/?ordering={PAYLOAD}",
        f"/runs/?created_after={PAYLOAD}",
        f"/runs/?q={PAYLOAD}",
        f"/runs/?cache_mode={PAYLOAD}",
        f"/reports/cache-modes/?group={PAYLOAD}",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code in (200, 400), (url, response.status_code)
        body = assert_inert(response)
        if response.status_code == 400 and "runs=22" in url and "csv" not in url:
            # The message quotes the input, as text.
            assert "&lt;img src=x onerror=alert(16)&gt;" in body
    csv_error = client.get(f"/compare/csv/?runs=22,{PAYLOAD}")
    assert csv_error["Content-Type"].startswith("text/plain")
    post = client.post("/compare/save/", {"runs": PAYLOAD})
    assert post.status_code == 400
    assert_inert(post)


def test_every_page_sends_a_content_security_policy(client, poisoned):
    for url in ["/", "/runs/", "/submit/", "/accounts/login/", "/compare/?runs=x"]:
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        assert "object-src 'none'" in policy


def test_templates_have_no_inline_script_or_handlers():
    """The policy forbids inline script; the templates must not rely on it."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "templates"
    for path in root.rglob("*.html"):
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag, f"inline <script> in {path.name}"
        assert not re.search(r"\son[a-z]+=", text), f"inline handler in {path.name}"


def test_favicon_and_titles(client, poisoned):
    assert client.get("/favicon.ico").status_code in (301, 302)
    home = client.get("/").content.decode()
    assert 'rel="icon"' in home
    assert "benchdb · benchdb" not in home
    run = poisoned["runs"][1]
    page = client.get(run.get_absolute_url()).content.decode()
    assert f"<title>{run} · benchdb</title>" in page
    assert 'property="og:title"' in page
    shared = client.get(f"/c/{poisoned['saved'].slug}").content.decode()
    assert 'property="og:title" content="Cmp&quot;&gt;&lt;img' in shared


def test_chart_js_only_on_pages_with_charts(client, poisoned):
    run = poisoned["runs"][1]
    without = ["/", "/runs/", "/submit/", "/accounts/login/"]
    for url in without:
        assert "chart.umd" not in client.get(url).content.decode(), url
    # The overhead report has a chart of guest ÷ host (issue 30).
    with_charts = [run.get_absolute_url(), f"/compare/?runs={run.pk}"]
    for url in [*with_charts, "/reports/overhead/"]:
        assert "chart.umd" in client.get(url).content.decode(), url


def test_home_asks_the_two_questions(client, poisoned):
    page = client.get("/").content.decode()
    assert 'href="/reports/cache-modes/"' in page
    assert "Which cache mode should I use?" in page
    assert "How much do I lose in a VM?" in page
