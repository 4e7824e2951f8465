"""The 404 and 500 pages are the site's own, styled, with DEBUG on (as
``make run`` runs) and off, and a phone sees them at 390 px without a
horizontal scroll.  Pages come from Django's test client (a fresh handler,
so DEBUG's middleware is loaded), shown in Debian's Chromium through a
route that asks the client for every URL, static files included."""

from __future__ import annotations

import mimetypes
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from tests.browser.conftest import SCREENSHOTS, chromium

SITE = "http://benchdb.test"


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    middleware = [m for m in settings.MIDDLEWARE if "site_error_pages" not in m]
    if request.param:
        middleware.insert(-1, "benchdb.ops.errors.site_error_pages")
    settings.MIDDLEWARE = middleware
    settings.ROOT_URLCONF = "tests.service.boom_urls"
    return request.param


def fetch(path: str):
    client = Client(raise_request_exception=False)
    return client.get(path)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path,status,title",
    [
        ("/no/such/page/", 404, "Not found"),
        ("/boom/", 500, "Something went wrong on our side"),
    ],
)
def test_the_error_pages_are_the_sites_own(debug, path, status, title, caplog):
    response = fetch(path)
    assert response.status_code == status
    html = response.content.decode()
    assert f"<h1>{title}</h1>" in html
    assert "/static/css/benchdb.css" in html
    assert "Traceback" not in html and "URLconf" not in html
    if status == 500:
        # The traceback is in the log, for whoever runs the site.
        assert "a bug, for the test of the 500 page" in caplog.text


@pytest.mark.browser
@pytest.mark.django_db
def test_a_phone_sees_them_styled_without_a_horizontal_scroll(debug):
    def answer(route):
        path = route.request.url.removeprefix(SITE)
        if path.startswith("/static/"):
            found = finders.find(path.removeprefix("/static/").split("?")[0])
            if not found:
                return route.fulfill(status=404, body="")
            kind = mimetypes.guess_type(found)[0] or "application/octet-stream"
            return route.fulfill(
                status=200,
                body=Path(found).read_bytes(),
                headers={"Content-Type": kind},
            )
        response = fetch(path)
        return route.fulfill(
            status=response.status_code,
            body=response.content,
            headers={"Content-Type": response["Content-Type"]},
        )

    mode = "debug" if debug else "production"
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.route(f"{SITE}/**", answer)
        for path, name in (("/no/such/page/", "404"), ("/boom/", "500")):
            page.goto(f"{SITE}{path}")
            # Styled: the stylesheet's rule for main applied (90rem).
            assert (
                page.evaluate(
                    "getComputedStyle(document.querySelector('main')).maxWidth"
                )
                == "1440px"
            )
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{name} ({mode}) is {width} px wide at 390 px"
            SCREENSHOTS.mkdir(exist_ok=True)
            page.screenshot(
                path=str(SCREENSHOTS / f"error-{name}-{mode}-390.png"), full_page=True
            )


@pytest.mark.django_db
def test_an_api_path_that_matches_nothing_answers_json_in_both_modes(debug, settings):
    settings.ROOT_URLCONF = "benchdb.urls"
    response = fetch("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
