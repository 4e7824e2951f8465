"""The reports answer the question for the setup picked (issue 30): the
workload with most systems measured in every mode by default, the runs
each workload has, never "no data" when the setup has data under another
workload, what was left out counted and linked, the published sets among
"One system, mode by mode", unsafe never a plain "better", and a guest
faster than its host explained."""

from __future__ import annotations

import re

import pytest

from benchdb.results import reports
from tests.web.report_mix import CACHED, HEADLINE, SWEPT, load_mix

pytestmark = pytest.mark.django_db

PVE_SSD = "platform=proxmox&disk_type=sata-ssd"


@pytest.fixture
def mix():
    return load_mix()


def text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def selected_workload(page: str) -> str:
    form = page.split('name="workload"')[1].split("</select>")[0]
    return re.search(r'<option value="([^"]+)" selected>', form).group(1)


def test_the_setup_opens_on_the_workload_measured_in_every_mode(client, mix):
    page = client.get(f"/reports/cache-modes/?{PVE_SSD}").content.decode()
    assert selected_workload(page) == SWEPT
    # Each workload says what the setup has under it.
    assert "(15 runs, 3 systems in every mode)" in text(page)
    assert re.search(r"\(1 run\)", text(page))
    rows = page.split('id="cache-answers"')[1].split("</table>")[0]
    assert "no data for this setup yet" not in rows
    assert 'data-mode="writeback"' in rows


def test_a_workload_without_a_mode_links_the_one_that_has_it(client, mix):
    page = client.get(
        f"/reports/cache-modes/?{PVE_SSD}&workload={HEADLINE}"
    ).content.decode()
    plain = text(page)
    assert "no data for this setup yet" not in plain
    assert f"workload={SWEPT}" in page
    assert "this setup has them under" in plain
    # The cache=none runs it left out are counted and linked.
    assert "No run of this setup with cache=none enters this answer" in plain
    assert "2 suspect" in plain and "1 imported" in plain and "1 unlisted" in plain
    assert "suspect=true" in page and "source=imported" in page


def test_unsafe_faster_is_never_a_plain_better(client, mix):
    page = client.get(f"/reports/cache-modes/?{PVE_SSD}").content.decode()
    row = page.split('data-mode="unsafe"')[1].split("</tr>")[0]
    assert reports.UNSAFE_FASTER in row
    assert "verdict-faster" not in row
    assert "verdict-unsafe-faster" in row


def test_published_sets_are_offered_mode_by_mode(client, mix):
    page = client.get("/reports/cache-modes/").content.decode()
    published = page.split('<optgroup label="Published sets">')[1].split("</optgroup>")[
        0
    ]
    assert "none, writethrough, writeback, directsync, unsafe" in published
    # Folded: the answer stays near the top.
    assert '<details class="group" id="one-system"' in page


def test_the_shown_set_leaves_the_sets_offered_as_they_are(client, mix):
    """The sets measured by the agent stay the select's options when one is
    shown (its comparison's chart groups are no sets of runs)."""
    page = client.get("/reports/cache-modes/").content.decode()
    assert "Fastest and slowest" in page  # a set is shown
    offered = page.split('<optgroup label="Measured by the agent">')[1]
    values = re.findall(r'<option value="([^"]*)"', offered.split("</optgroup>")[0])
    assert values and all(re.fullmatch(r"\d+(-\d+)+", v) for v in values)


def test_overhead_guest_faster_than_host_says_why(client, mix):
    page = client.get(
        f"/reports/overhead/?platform=libvirt&workload={CACHED}"
    ).content.decode()
    answer = page.split('id="overhead-answer"')[1].split("</p>")[0]
    assert re.search(r"2\.4\d× host †", answer)
    assert "page cache" in page and "thin provisioning" in page
    assert 'id="chart-data"' in page and '"slug": "overhead"' in page


def test_overhead_filtered_setup_links_the_workload_with_data(client, mix):
    page = client.get(
        f"/reports/overhead/?platform=libvirt&workload={SWEPT}"
    ).content.decode()
    plain = text(page)
    assert "No data for this setup yet" not in plain
    assert "This setup has them under" in plain
    assert f"workload={CACHED}" in page or "workload=fio-rand-read-4k-q1t1" in page
    # Without a workload it opens on one with data.
    page = client.get("/reports/overhead/?platform=libvirt").content.decode()
    assert 'id="overhead-answer"' in page
