"""Every page answers, shows the stored numbers, and bounds its queries."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from benchdb.results.models import ApiToken, Comparison, Run
from benchdb.web import present

pytestmark = pytest.mark.django_db


@pytest.fixture
def reference():
    call_command("load_reference")
    return {r.cache_mode: r for r in Run.objects.filter(title__contains="CentOS 7")}


def test_home_lists_counts_ways_in_and_datasets(client, reference):
    page = client.get("/").content.decode()
    assert "21</strong> public runs" in page
    assert "?cache_mode=writeback" in page and "?storage_backend=lvm" in page
    assert "Published reference data" in page and "KVM" in page


def test_browse_filters_and_counts(client, reference, django_assert_max_num_queries):
    with django_assert_max_num_queries(20):
        page = client.get(
            "/runs/?cache_mode=none&cache_mode=writeback"
        ).content.decode()
    assert "2 runs" in page
    assert f'value="{reference["none"].pk}"' in page
    assert f'value="{reference["unsafe"].pk}"' not in page
    assert client.get("/runs/?created_after=yesterday").status_code == 400


def test_browse_search_and_ordering(client, reference):
    page = client.get("/runs/?q=Optane&ordering=title").content.decode()
    assert "4 runs" in page


def test_run_page_shows_means_repeats_raw_and_safety(client, reference):
    run = reference["unsafe"]
    page = client.get(run.get_absolute_url()).content.decode()
    # The five dd rates, bytes / seconds: arithmetic mean 1,144.9 MB/s (kept in
    # data-mean, as the API's "mean"); the page shows and plots the geometric
    # mean, the centre of the interval beside it.
    result = run.results.get()
    figure = result.stats["directions"][result.stats["main_direction"]]["bw_bytes"]
    assert round(figure["mean"] / 1e6, 1) == 1144.9
    assert f'data-mean="{figure["mean"]!r}"' in page
    assert figure["gmean"] < figure["mean"]
    shown = present.human(figure["gmean"], "bw_bytes")
    assert f'data-label="Geometric mean">{shown}</td>' in page
    assert "1,144.9 MB/s" not in page
    assert "921.9 MB/s" in page  # a repeat: 1073741824 B / 1.16476 s
    assert "can lose data" in page or "Guest flushes are ignored" in page
    raw = client.get(reverse("raw-output", args=[run.pk, result.pk, 0]))
    assert raw["Content-Type"].startswith("text/plain")
    assert "0.814352 s" not in raw.content.decode()
    assert "1.16476 s" in raw.content.decode()


def test_run_page_overhead_against_the_baseline(client, reference):
    guest = Run.objects.get(pair_id="seed-002-hdd", storage_backend="file")
    page = client.get(guest.get_absolute_url()).content.decode()
    # raw file 950 IOPS vs native 200 IOPS: 4.75 times, and a single published
    # figure on each side has no interval.
    assert "guest 4.75× host (not enough repeats to estimate noise)" in page


def test_private_runs_are_not_shown_to_others(client, reference):
    run = reference["none"]
    run.visibility = "private"
    run.save()
    assert client.get(run.get_absolute_url()).status_code == 404
    assert client.get(f"/compare/?runs={run.pk}").status_code == 404


def test_compare_page_numbers_equal_the_api(client, reference):
    ids = f"{reference['none'].pk},{reference['writeback'].pk},{reference['unsafe'].pk}"
    page = client.get(f"/compare/?runs={ids}").content.decode()
    api = client.get(f"/api/v1/compare/?runs={ids}").json()
    for entry in api["tests"][0]["metrics"][0]["runs"]:
        assert (
            f'data-run="{entry["run"]}" data-mean="{entry["mean"]!r}" '
            f'data-gmean="{entry["gmean"]!r}"'
        ) in page
        # The figure shown (and plotted) is the API's gmean, which its
        # ci95_low…ci95_high surround.
        shown = present.human(entry["gmean"], api["tests"][0]["metrics"][0]["metric"])
        assert f'data-label="Geometric mean">{shown}</td>' in page
        if entry["ci95_low"] is not None:
            assert entry["ci95_low"] <= entry["gmean"] <= entry["ci95_high"]
    # writeback vs none: Welch on the logs p = 0.21, and 5-6 repeats cannot
    # tell; unsafe is faster beyond doubt, and p is never printed as 0.000.
    assert "cannot tell: too few repeats or too much noise" in page
    assert "repeats per run would be needed at this noise" in page
    assert "faster by " in page and "p &lt; 0.001" in page
    assert "p = 0.000" not in page and "-" not in _ci_cells(page)
    assert "flushed data is kept" in page and "can lose data" in page


def _ci_cells(page: str) -> str:
    """The 95% CI column of the delta table, joined (for a sign check)."""
    import re

    cells = re.findall(r"<td[^>]*>([^<]*?) – ([^<]*?)(?: <small>|</td>)", page)
    assert cells
    return " ".join(" ".join(pair) for pair in cells)


def test_compare_bad_input(client, reference):
    assert client.get("/compare/?runs=1,x").status_code == 400
    assert client.get("/compare/?runs=").status_code == 400
    many = ",".join(str(i) for i in range(1, 20))
    assert client.get(f"/compare/?runs={many}").status_code in (400, 404)
    ids = f"{reference['none'].pk},{reference['writeback'].pk}"
    assert client.get(f"/compare/?runs={ids}&ref=999999").status_code == 400


def test_save_and_share(client, reference):
    ids = f"{reference['none'].pk},{reference['writeback'].pk}"
    response = client.post(
        "/compare/save/", {"runs": ids, "ref": reference["writeback"].pk}
    )
    assert response.status_code == 302
    saved = Comparison.objects.get()
    assert response["Location"] == f"/c/{saved.slug}"
    assert saved.run_ids == [reference["none"].pk, reference["writeback"].pk]
    page = client.get(response["Location"]).content.decode()
    assert f"/c/{saved.slug}" in page and "Saved comparison" in page
    assert client.post("/compare/save/", {"runs": "x"}).status_code == 400
    assert Comparison.objects.count() == 1


def test_csv_download(client, reference):
    ids = f"{reference['none'].pk},{reference['writeback'].pk}"
    response = client.get(f"/compare/csv/?runs={ids}")
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["run"] for r in rows] == [
        str(reference["none"].pk),
        str(reference["writeback"].pk),
    ]
    assert round(float(rows[0]["mean"]) / 1e6, 1) == 192.2  # bytes / seconds
    assert rows[1]["verdict"] == "cannot tell"
    assert float(rows[1]["ratio_low"]) > 0


def test_cache_mode_report_shows_the_five_modes(client, reference):
    page = client.get("/reports/cache-modes/").content.decode()
    for mode in ("none", "writethrough", "writeback", "directsync", "unsafe"):
        assert f"cache={mode}" in page
    assert "Fastest and slowest" in page


def test_overhead_report(client, reference):
    page = client.get("/reports/overhead/").content.decode()
    assert "Xen PV guest" in page and "+7.1%" in page  # 32.396 s vs 30.247 s


def test_agent_download_is_a_runnable_zipapp(client, tmp_path):
    import subprocess
    import sys

    response = client.get("/agent/benchdb-agent.pyz")
    path = tmp_path / "benchdb-agent.pyz"
    path.write_bytes(
        b"".join(response.streaming_content) if response.streaming else response.content
    )
    out = subprocess.run(
        [sys.executable, str(path), "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("benchdb-agent ")


def test_signup_token_create_and_revoke(client):
    response = client.post(
        "/accounts/signup/",
        {
            "username": "ana",
            "password1": "a-long-Passw0rd!",
            "password2": "a-long-Passw0rd!",
        },
    )
    assert response.status_code == 302
    client.post("/tokens/", {"name": "pve-node-2"})
    page = client.get("/submit/").content.decode()
    token = ApiToken.objects.get(user__username="ana")
    secret = re.search(r'id="new-token">[^<]*<code>(bdt_[^<]+)</code>', page).group(1)
    assert token.name == "pve-node-2" and secret.startswith(token.prefix)
    assert secret not in client.get("/submit/").content.decode()  # shown once
    client.post(f"/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked is not None
    other = User.objects.create_user("bob", password="x")
    client.force_login(other)
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 404


def test_every_user_string_is_escaped(client, reference):
    run = reference["none"]
    run.title = "<script>alert(1)</script>"
    run.save()
    page = client.get(run.get_absolute_url()).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    compare = client.get(f"/compare/?runs={run.pk}").content.decode()
    assert "<script>alert(1)</script>" not in compare


def test_the_markdown_export_escapes_markup_from_titles(client, reference):
    run = reference["none"]
    run.title = "<script>alert(1)</script> [x](http://evil.example) *b* | c"
    run.save()
    text = client.get(f"/compare/markdown/?runs={run.pk}").content.decode()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "[x](http" not in text and r"\[x\](http" in text
    assert r"\*b\*" in text and r"\| c" in text
    rows = [line for line in text.splitlines() if "alert(1)" in line]
    # 8 cells: the interval's and, when it is too wide, its flag's.
    assert rows and all(line.count(" | ") == 7 for line in rows)


def test_run_page_folds_a_warning_repeated_per_test(client, reference):
    """One ``unstable`` per test must not bury the other warnings: they fold
    into one line with their count, and a single warning keeps its words."""
    run = reference["none"]
    run.warnings = [
        {
            "code": "unstable",
            "test_id": f"t{i}",
            "message": f"test t{i}: coefficient of variation {20 + i}%",
        }
        for i in range(5)
    ] + [{"code": "high-load", "message": "the load average reached 6.4"}]
    run.save(update_fields=["warnings"])
    page = client.get(run.get_absolute_url()).content.decode()
    trust = page[page.index('<ul class="trust">') : page.index("</ul>\n")]
    assert "5 tests: the spread of the repeats stayed high" in trust
    assert trust.count("<details>") == 1
    for i in range(5):
        assert f"test t{i}: coefficient of variation {20 + i}%" in trust
    assert "the load average reached 6.4" in trust
    assert "1 tests" not in trust
