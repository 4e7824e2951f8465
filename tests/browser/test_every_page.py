"""Every page in Chromium at 1366 and 390 px: no console error, no script from
stored or query-string payloads, nothing wider than the viewport, a CSP
header, and every chart drawn.  Screenshots land in tests/screenshots/."""

from __future__ import annotations

import pytest

from tests.web.payloads import PAYLOAD, poison_reference

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1366, 390)

# Elements sticking out to the right of the viewport, ignoring those inside a
# box that clips or scrolls horizontally (a table in its .scroll box).
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const clipped = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right > width + 1 && !clipped(el)) {
      out.push(el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className
               + ' right=' + Math.round(r.right));
    }
  }
  return {scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 8)};
}"""

PAINTED = """(canvas) => {
  const c = canvas.getContext('2d');
  const data = c.getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) n++;
  return n;
}"""


def visit(context, url: str, name: str, screenshot, width: int) -> tuple:
    page = context.new_page()
    problems = []
    page.on("dialog", lambda d: (problems.append(f"dialog {d.message}"), d.dismiss()))
    page.on(
        "console",
        lambda m: (
            problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append(f"pageerror {e}"))
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    return page, response, problems


def check_page(page, response, problems, expect_status=200):
    assert response.status == expect_status, response.url
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy
    # Nothing the payload would have created exists.
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    layout = page.evaluate(OVERFLOW)
    assert layout["scroll"] <= layout["width"], layout
    assert not layout["out"], layout
    for canvas in page.locator("canvas").all():
        canvas.scroll_into_view_if_needed()
        assert canvas.evaluate(PAINTED) > 200, "a chart did not draw"
    # Only the 400 of a deliberately bad URL may appear.
    expected = (
        f"{expect_status} ",
        "console error: Failed to load resource: the server responded with a "
        f"status of {expect_status}",
    )
    unexpected = [p for p in problems if not p.startswith(expected)]
    assert not unexpected, unexpected


def test_every_page_at_desktop_and_phone_width(live_server, browser, screenshot):
    data = poison_reference()
    runs = data["runs"]
    ids = ",".join(str(r.pk) for r in runs[:3])
    pages = {
        "home": "/",
        "browse": "/runs/",
        "browse-filtered": "/runs/?cache_mode=none&cache_mode=writeback",
        "run": runs[0].get_absolute_url(),
        "run-plain": runs[1].get_absolute_url(),
        "compare": f"/compare/?runs={ids}",
        "shared": f"/c/{data['saved'].slug}",
        "report-cache-modes": "/reports/cache-modes/",
        "report-overhead": "/reports/overhead/",
        "submit": "/submit/",
        "sign-in": "/accounts/login/",
        "sign-up": "/accounts/signup/",
    }
    bad = {
        "xss-runs": f"/compare/?runs=22,{PAYLOAD}",
        "xss-ref": f"/compare/?runs={ids}&ref={PAYLOAD}",
    }
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        for name, url in pages.items():
            page, response, problems = visit(
                context, live_server.url + url, name, screenshot, width
            )
            screenshot(page, f"{name}-{width}")
            check_page(page, response, problems)
            if name.startswith("run") and width == WIDTHS[0]:
                assert_run_numbers_equal_the_api(page, live_server.url, url)
            page.close()
        for name, url in bad.items():
            page, response, problems = visit(
                context, live_server.url + url, name, screenshot, width
            )
            check_page(page, response, problems, expect_status=400)
            assert "alert(16)" in page.inner_text("main")  # shown as text
            page.close()
        context.close()


def assert_run_numbers_equal_the_api(page, base: str, url: str) -> None:
    """Each result row's figure (its geometric mean, the arithmetic one where
    there is none: ``stats.centre``) is the API's figure for that test."""
    import json
    import urllib.request

    pk = url.rstrip("/").rsplit("/", 1)[1]
    with urllib.request.urlopen(f"{base}/api/v1/runs/{pk}/") as r:
        api = {t["test_id"]: t for t in json.load(r)["tests"]}
    rows = page.locator("table.results tbody tr").all()
    assert rows
    for row in rows:
        test = api[row.get_attribute("data-test")]
        gmean = row.get_attribute("data-gmean")
        shown = float(
            gmean if gmean not in ("None", "''") else row.get_attribute("data-mean")
        )
        figures = [
            test.get(f) for f in ("iops_mean", "bw_bytes_mean", "lat_mean_ns_mean")
        ]
        assert shown in figures, (shown, figures)
