"""The reports answer first: per cache mode against none and guest against
host, for the setup chosen, from the across-runs statistics; or no data, with
the command that would measure it; and the published sources cited."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from benchdb.results import population

pytestmark = pytest.mark.django_db


@pytest.fixture
def reference():
    call_command("load_reference")


def text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_cache_mode_report_answers_per_mode_with_safety(client, reference):
    page = client.get(
        "/reports/cache-modes/?workload=dd-write-1g-zero-fdatasync"
    ).content.decode()
    assert 'id="cache-answers"' in page
    for mode in ("writethrough", "writeback", "directsync", "unsafe"):
        assert f'data-mode="{mode}"' in page
    # The answer is population.answer's, word for word.
    ans = population.answer(
        {"role": "guest"},
        {"cache_mode": "none"},
        {"cache_mode": "writeback"},
        "dd-write-1g-zero-fdatasync",
        "bw_bytes",
    )
    assert ans["text"] in text(page)
    # Data safety beside the speed, and the source cited.
    assert "can lose data the guest flushed" in page
    assert "KVM cache mode performance test" in page


def test_no_data_gives_the_command_that_measures_it(client, reference):
    page = client.get("/reports/cache-modes/?platform=hyper-v").content.decode()
    assert "No " in page and "data for this setup yet" in page
    assert "benchdb-agent.pyz vm" in page and "--cache-modes all" in page
    page = client.get("/reports/overhead/?platform=proxmox").content.decode()
    assert "--proxmox VMID" in page


def test_overhead_report_answers_guest_vs_host(client, reference):
    page = client.get("/reports/overhead/").content.decode()
    assert 'id="overhead-answer"' in page
    match = re.search(r"From (\d+) systems?, (\d+) paired runs?", text(page))
    assert match, text(page)[:2000]
    workload = re.search(
        r'<option value="([^"]+)" selected>', page.split('name="workload"')[1]
    ).group(1)
    runs = population.filter_runs({"role": "guest"})
    test = population.distribution(runs, workload, _metric(page))
    assert int(match.group(1)) == test["overhead"]["systems"]
    assert int(match.group(2)) == test["overhead"]["runs"]
    assert 'id="overhead-by-storage"' in page


def _metric(page: str) -> str:
    label = re.search(r"guest ÷ host", page) and re.search(
        r'<h2 id="answer-h">[^:]+: ([^,]+), guest', page
    ).group(1)
    return {"Bandwidth": "bw_bytes", "Operations per second": "iops"}.get(
        label, "lat_mean_ns"
    )


def test_suspect_pairs_are_marked_in_the_run_by_run_table(client, reference):
    from benchdb.results.models import Run

    guest = Run.objects.filter(role="guest", baseline__isnull=False).first()
    Run.objects.filter(pk=guest.pk).update(suspect=True, suspect_reasons=["test"])
    page = client.get("/reports/overhead/").content.decode()
    row = page.split(f'href="{guest.get_absolute_url()}"')[1].split("</td>")[0]
    assert '<span class="badge">suspect</span>' in row


def test_report_queries_are_bounded(client, reference, django_assert_max_num_queries):
    # Four cache-mode answers and the per-storage overheads: a few queries
    # each (results/population.py), never one per run.  Cold, each stored
    # answer (results/answer_cache.py) adds its read, snapshot and store;
    # the setup's workload coverage, its left-out runs (stored too: counting
    # them grew with the table) and the published sets add a few more; the
    # kept pages' stamp one and the page's share with the other processes
    # (benchdb/web/kept.py: its store, in a savepoint within a test).
    with django_assert_max_num_queries(119):
        client.get("/reports/cache-modes/")
    with django_assert_max_num_queries(78):
        client.get("/reports/overhead/")


def _paired(page: str) -> tuple[int, int]:
    match = re.search(r"From (\d+) systems?, (\d+) paired runs?", text(page))
    assert match, text(page)[:2000]
    return int(match.group(1)), int(match.group(2))


def test_stored_answers_drop_a_hidden_run_at_once_and_add_runs_on_refresh(
    client, reference, django_assert_max_num_queries
):
    # The across-runs answers are stored (results/answer_cache.py) and served
    # by the data version: a second request asks PostgreSQL for that version
    # and the stored answer in one query each, and the page's own rows; a
    # hidden run leaves the answer at once; an unhidden (or new) one is
    # added by the worker's refresh, and the page says so meanwhile.
    from benchdb.results import refresh
    from benchdb.results.models import Run

    first = client.get("/reports/overhead/").content.decode()
    systems, pairs = _paired(first)
    # Written again, not kept (benchdb/web/kept.py): the first visit stored
    # the answers it computed, a new stamp; the stamp's query is the 13th,
    # the page's share the 14th (with its savepoint within a test, 16).
    with django_assert_max_num_queries(16):
        again = client.get("/reports/overhead/").content.decode()
    assert _paired(again) == (systems, pairs)
    assert "newer uploads are added" not in text(again)
    workload = re.search(
        r'<option value="([^"]+)" selected>', first.split('name="workload"')[1]
    ).group(1)
    guest = (
        population.filter_runs({"role": "guest"})
        .filter(baseline__isnull=False, results__test_id=workload)
        .order_by("id")
        .first()
    )
    Run.objects.get(pk=guest.pk).moderate("hide", "test")
    hidden = client.get("/reports/overhead/").content.decode()
    runs = population.filter_runs({"role": "guest"})
    fresh = population.distribution(runs, workload, _metric(first))["overhead"]
    assert _paired(hidden) == (fresh["systems"], fresh["runs"])
    assert fresh["runs"] < pairs
    Run.objects.get(pk=guest.pk).moderate("unhide")
    stale = client.get("/reports/overhead/").content.decode()
    assert _paired(stale) == (fresh["systems"], fresh["runs"])
    assert "newer uploads are added by the next refresh" in text(stale)
    refresh.refresh()
    with django_assert_max_num_queries(16):  # as above
        after = client.get("/reports/overhead/").content.decode()
    assert _paired(after) == (systems, pairs)
    assert "newer uploads are added" not in text(after)


def test_an_answer_served_while_it_is_computed_again_says_so():
    """A reader served the answer stored before a withdrawal while another
    process computes it again (``answer_cache.fetch_or_compute``) is told."""
    from datetime import UTC, datetime

    from django.template.loader import render_to_string

    shown = {"as_of": datetime(2026, 11, 28, tzinfo=UTC), "runs": 7}
    updating = text(
        render_to_string(
            "web/_freshness.html",
            {"freshness": {**shown, "current": False, "updating": True}},
        )
    )
    assert "being computed again after a run was withdrawn" in updating
    assert "over the 7 listed runs then" in updating
    assert "newer uploads" not in updating
    current = text(
        render_to_string(
            "web/_freshness.html",
            {"freshness": {**shown, "current": True, "updating": False}},
        )
    )
    assert "computed again" not in current and "newer uploads" not in current
