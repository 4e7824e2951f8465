"""The real guests' bundles go through benchdb: API, worker, pairing, overhead.

The bundles come from the session's guest matrix (tests/guests/conftest.py):
agent runs inside QEMU guests booted in every cache mode and on several buses,
and the host baseline with the same pair id.  They are posted as an anonymous
submitter would, ingested by the real Celery worker, and read back through
the API: what the server stored must be what the guests really were.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from rest_framework.test import APIClient

from tests.conftest import wait_for
from tests.guests import harness, matrix

pytestmark = [
    pytest.mark.guest,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]


def _post_all(client: APIClient, out) -> dict:
    """Submit every bundle of the matrix; returns bundle_id -> final status."""
    status_urls = {}
    for path in sorted(out.glob("*.bundle.json")):
        bundle = json.loads(path.read_text())
        response = client.post("/api/v1/submissions/", bundle, format="json")
        assert response.status_code == 202, (path.name, response.content)
        status_urls[bundle["bundle_id"]] = response.json()["status_url"]

    def finished(url):
        body = client.get(url).json()
        return body if body["status"] in ("done", "failed") else None

    return {
        bundle_id: wait_for(lambda u=url: finished(u), timeout=120, what=url)
        for bundle_id, url in status_urls.items()
    }


def _finished_over_http(url: str) -> dict | None:
    """The submission status read from the live server, once it is final."""
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.loads(response.read())
    return body if body["status"] in ("done", "failed") else None


def test_guest_runs_are_stored_as_booted_with_overhead_against_the_host(
    results, boots, celery_worker_process
):
    summary, out = results
    client = APIClient()
    statuses = _post_all(client, out)
    assert len(statuses) == len(boots) + 1
    for bundle_id, status in statuses.items():
        assert status["status"] == "done", (bundle_id, status)

    listed = client.get(
        "/api/v1/runs/", {"pair_id": summary["pair_id"], "page_size": 100}
    ).json()["results"]
    hosts = [r for r in listed if r["role"] == "host"]
    guests = {r["uuid"]: r for r in listed if r["role"] == "guest"}
    assert len(hosts) == 1 and len(guests) == len(boots)

    expected_virt = "kvm" if summary["accel"] == "kvm" else "qemu-tcg"
    for boot in boots:
        bundle_id = json.loads((out / boot["bundle"]).read_text())["bundle_id"]
        run = guests[bundle_id]
        assert run["virtualization"] == expected_virt, boot["label"]
        assert run["disk_bus"] == boot["bus"], boot["label"]
        assert run["cache_mode"] == boot["cache_mode"], boot["label"]
        assert run["image_format"] == boot["format"], boot["label"]
        assert run["baseline"] == hosts[0]["id"], boot["label"]
        detail = client.get(run["url"]).json()
        assert detail["tests"], boot["label"]
        for test in detail["tests"]:
            overhead = test["overhead"]
            assert overhead is not None, (boot["label"], test["test_id"])
            assert overhead["baseline_run"] == hosts[0]["id"]


def test_matrix_uploads_over_http_and_the_cache_mode_aggregate_shows_all_five(
    results, boots, celery_worker_process, live_server
):
    summary, out = results
    client = APIClient()
    answers = matrix.upload_all(out, live_server.url)
    assert [a["http_status"] for a in answers] == [202] * (len(boots) + 1), answers
    for answer in answers:
        status = wait_for(
            lambda a=answer: _finished_over_http(a["status_url"]),
            timeout=120,
            what=answer["file"],
        )
        assert status["status"] == "done", (answer["file"], status)
    guest_bundle = json.loads((out / boots[0]["bundle"]).read_text())
    test_id = next(t["test_id"] for t in guest_bundle["tests"] if t["tool"] == "fio")
    response = client.get(
        "/api/v1/aggregates/",
        {
            "test_id": test_id,
            "metric": "iops",
            "group_by": "cache_mode",
            "pair_id": summary["pair_id"],
            "role": "guest",
        },
    )
    assert response.status_code == 200, response.content
    groups = {g["value"]: g["count"] for g in response.json()["groups"]}
    assert set(groups) == set(harness.CACHE_MODES)
    assert groups["none"] == sum(1 for b in boots if b["cache_mode"] == "none")
    _pages_show_the_real_guests(live_server.url, boots)


def _pages_show_the_real_guests(url: str, boots: list) -> None:
    """In Chromium: the cache-mode report puts the five real guests side by
    side, with drawn charts, and the overhead report lists them against the
    host baseline."""
    from tests.browser.conftest import SCREENSHOTS, chromium

    SCREENSHOTS.mkdir(exist_ok=True)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url + "/reports/cache-modes/")
        options = page.locator("select[name=group] option").all_inner_texts()
        five = [o for o in options if all(m in o for m in harness.CACHE_MODES)]
        assert five, options
        with page.expect_navigation():
            page.select_option("select[name=group]", label=five[0])
        page.wait_for_selector(".charts canvas")
        painted = page.locator(".charts canvas").first.evaluate(
            "(c) => c.getContext('2d').getImageData(0, 0, c.width, c.height)"
            ".data.filter((v, i) => i % 4 === 3 && v !== 0).length"
        )
        assert painted > 1000
        # The table of what differs names each run by its cache mode.
        compared = page.inner_text("#differences thead")
        for mode in harness.CACHE_MODES:
            assert f"cache={mode}" in compared
        page.screenshot(
            path=str(SCREENSHOTS / "guests-cache-modes.png"), full_page=True
        )
        page.goto(url + "/reports/overhead/")
        rows = page.locator("table.overhead tbody tr").count()
        assert rows >= len(boots)
        page.screenshot(path=str(SCREENSHOTS / "guests-overhead.png"), full_page=True)
