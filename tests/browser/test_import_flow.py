"""On a phone: upload a CrystalDiskMark export on /submit/, declare what it
cannot say, check the preview, publish, and find it beside an agent run of
the same workload in a comparison, with its provenance shown."""

from __future__ import annotations

import copy
import gzip
import json
import uuid
from pathlib import Path

import pytest

from benchdb.results.ingest import store_bundle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def test_upload_declare_publish_and_compare_at_390px(
    celery_worker_process, live_server, browser, screenshot
):
    with gzip.open(SAMPLES / "bundles" / "full-none.json.gz", "rt") as handle:
        doc = copy.deepcopy(json.load(handle))
    doc["bundle_id"] = str(uuid.uuid4())
    agent = store_bundle(doc)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(live_server.url + "/submit/")
    page.set_input_files(
        "#id_upload", str(SAMPLES / "crystaldiskmark" / "cdm-8.0.1-wd-blue.txt")
    )
    page.select_option("#id_platform", "proxmox")
    page.select_option("#id_cache_mode", "none")
    page.select_option("#id_disk_bus", "virtio-scsi")
    page.fill("#id_virtio_win_version", "100.95.104.26200")
    page.click("#import-preview")
    row = page.locator("tr[data-test='fio-rand-read-4k-q32t1']")
    assert row.is_visible()
    assert "65,773 IOPS" in row.inner_text()  # 65772.9 as the run page shows it
    assert "declared, not verified" in page.inner_text("main")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, f"the preview is {width} px wide at 390"
    screenshot(page, "import-preview-390")
    page.click("#import-publish-button")
    page.wait_for_selector("#import-run", timeout=60_000)
    assert page.locator("#owner-key").is_visible()
    page.click("#import-run")
    assert "declared, not verified" in page.inner_text("#provenance")
    assert "No warnings" not in page.content()
    imported_id = page.url.rstrip("/").split("/")[-1]
    page.goto(f"{live_server.url}/compare/?runs={agent.pk},{imported_id}")
    page.wait_for_selector(".charts canvas")
    body = page.inner_text("main")
    assert "These runs share no comparable test" not in body
    assert "Random read 4 KiB Q32T1" in body
    assert "a weaker comparison than between agent runs" in body
    assert "declared, not verified" in body
    screenshot(page, "import-compare-390")
