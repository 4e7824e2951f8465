"""The cache-mode report's ranking in Debian's Chromium at 390 and 1366 px:
the critical-difference diagram is drawn whole inside the viewport (no
sideways scrolling of the page), its labels readable, and the equivalence
table there."""

from __future__ import annotations

import pytest

from tests.results.test_population_across import TEST, community  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [390, 1366])
def test_the_ranking_reads_at_phone_and_desktop_widths(
    live_server,
    browser,
    screenshot,
    community,  # noqa: F811
    width,
):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_server.url}/reports/cache-modes/?workload={TEST}")
    # Folded under the answer (the page stays short): open it.
    page.click("#ranking > summary")
    svg = page.locator("#cd-svg")
    svg.scroll_into_view_if_needed()
    assert svg.is_visible()
    box = svg.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    # Every mode's label drawn inside the diagram, at a readable size.
    for label in page.locator("#cd-svg text.cd-label").all():
        lb = label.bounding_box()
        assert box["x"] <= lb["x"] and lb["x"] + lb["width"] <= box["x"] + box["width"]
        assert lb["height"] >= 9
    assert page.locator("#cd-svg text.cd-label").count() == 4
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator("#equivalence-table").is_visible()
    assert not errors, errors
    screenshot(page, f"cache-mode-ranking-{width}")
    section = screenshot.folder / f"cache-mode-ranking-{width}-section.png"
    page.locator("section.ranking").screenshot(path=str(section))
