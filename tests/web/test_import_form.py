"""/submit/'s import form: upload or paste, a preview of the parsed figures
before anything is stored, then a submission ingested like an API upload."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from benchdb.results.models import Run, Submission

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CDM = SAMPLES / "crystaldiskmark" / "cdm-8.0.1-wd-blue.txt"


def test_submit_page_offers_the_import_form(client):
    page = client.get("/submit/").content.decode()
    assert 'id="import-form"' in page
    assert 'name="cache_mode"' in page and '<option value="writeback"' in page
    assert 'name="virtio_win_version"' in page


def test_preview_shows_every_parsed_figure_and_stores_nothing(client):
    upload = SimpleUploadedFile(CDM.name, CDM.read_bytes())
    response = client.post(
        "/submit/import/",
        {"upload": upload, "role": "guest", "cache_mode": "none", "action": "preview"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing is published yet" in page
    assert 'data-test="fio-rand-read-4k-q32t1"' in page
    assert "declared, not verified" in page
    # Main figure by kind: MB/s for sequential, IOPS for random.
    row = re.search(r'data-test="fio-rand-read-4k-q32t1".*?</tr>', page, re.S)[0]
    assert "IOPS" in row and "65" in row
    row = re.search(r'data-test="fio-seq-read-1m-q8t1".*?</tr>', page, re.S)[0]
    assert "MB/s" in row
    assert "storage_backend" in page  # said to be undeclared
    assert Submission.objects.count() == 0 and Run.objects.count() == 0


def test_publish_stores_a_submission_of_the_previewed_bytes(client):
    response = client.post(
        "/submit/import/",
        {"paste": CDM.read_text(), "role": "guest", "action": "preview"},
    )
    carry = re.search(r'name="data" value="([^"]+)"', response.content.decode())[1]
    response = client.post(
        "/submit/import/",
        {
            "data": carry,
            "name": "pasted text",
            "role": "guest",
            "platform": "proxmox",
            "cache_mode": "none",
            "action": "publish",
        },
    )
    assert response.status_code == 302
    sub = Submission.objects.get()
    assert sub.bundle["source"] == "imported"
    assert sub.bundle["tags"] == {"platform": "proxmox", "cache_mode": "none"}
    assert [t["test_id"] for t in sub.bundle["tests"]][2] == "fio-rand-read-4k-q32t1"
    status = client.get(response["Location"]).content.decode()
    assert "owner key" in status
    # Somebody else's browser cannot read the status page.
    client.cookies.clear()
    assert client.get(response["Location"]).status_code == 404


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"paste": "just words\n"}, "not a recognised benchmark output"),
        ({"paste": CDM.read_text()[:700]}, "ends before its footer"),
        ({"paste": "", "upload": None}, "choose a file or paste an output"),
        (
            {"paste": CDM.read_text(), "cache_mode": "fast"},
            "Select a valid choice",
        ),
    ],
)
def test_bad_input_is_refused_with_the_reason(client, post, message):
    data = {"role": "guest", "action": "publish", **post}
    data = {k: v for k, v in data.items() if v is not None}
    response = client.post("/submit/import/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Submission.objects.count() == 0


def test_a_file_over_the_limit_is_refused_saying_so(client):
    upload = SimpleUploadedFile("huge.txt", b"x" * (16 * 2**20 + 1))
    response = client.post(
        "/submit/import/", {"upload": upload, "role": "guest", "action": "preview"}
    )
    assert response.status_code == 400
    assert "larger than 16777216 bytes" in response.content.decode()
    assert Submission.objects.count() == 0
