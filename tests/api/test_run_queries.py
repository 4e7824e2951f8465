"""Run list filters, search, stable pagination, detail overhead, exports, dump."""

from __future__ import annotations

import csv
import gzip
import io
import json
import statistics

import pytest

from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from benchdb.results.stats import too_wide
from benchdb.results.tasks import public_dump
from tests.api.factories import make_bundle, repeat_values

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q1t1"


@pytest.fixture
def catalogue(fio):
    """Guest runs on two cache modes and disk types, plus a host baseline."""
    runs = {
        "none-ssd": store_bundle(
            make_bundle(
                fio,
                tags={
                    "cache_mode": "none",
                    "disk_type": "sata-ssd",
                    "platform": "proxmox",
                },
                pair_id="pair-1",
            )
        ),
        "wb-hdd": store_bundle(
            make_bundle(
                fio,
                tags={
                    "cache_mode": "writeback",
                    "disk_type": "hdd",
                    "disk_model": "WD Red",
                },
            )
        ),
        "host": store_bundle(
            make_bundle(fio, role="host", pair_id="pair-1", speed="slow")
        ),
    }
    for run in runs.values():
        run.refresh_from_db()
    return runs


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {r["id"] for r in response.json()["results"]}


def test_it_filters_on_environment_and_hardware_facets(api, catalogue):
    c = catalogue
    assert ids(api.get("/api/v1/runs/?cache_mode=none")) == {c["none-ssd"].pk}
    assert ids(api.get("/api/v1/runs/?cache_mode=none&cache_mode=writeback")) == {
        c["none-ssd"].pk,
        c["wb-hdd"].pk,
    }
    assert ids(api.get("/api/v1/runs/?disk_type=hdd")) == {c["wb-hdd"].pk}
    # The host baseline of a Proxmox guest is listed under Proxmox too.
    assert ids(api.get("/api/v1/runs/?platform=proxmox")) == {
        c["none-ssd"].pk,
        c["host"].pk,
    }
    assert ids(api.get("/api/v1/runs/?role=host")) == {c["host"].pk}
    assert ids(api.get("/api/v1/runs/?storage_backend=native")) == {c["host"].pk}
    assert ids(api.get("/api/v1/runs/?disk_model=wd")) == {c["wb-hdd"].pk}
    assert ids(api.get("/api/v1/runs/?cpu=test cpu")) == {r.pk for r in c.values()}
    assert ids(api.get("/api/v1/runs/?has_baseline=true")) == {c["none-ssd"].pk}
    assert ids(api.get("/api/v1/runs/?has_baseline=false")) == {
        c["wb-hdd"].pk,
        c["host"].pk,
    }
    assert ids(api.get("/api/v1/runs/?q=red wd")) == {c["wb-hdd"].pk}
    assert ids(api.get("/api/v1/runs/?created_after=2999-01-01T00:00:00Z")) == set()
    assert len(ids(api.get("/api/v1/runs/?created_before=2999-01-01T00:00:00Z"))) == 3
    bad = api.get("/api/v1/runs/?cache_mode=turbo")
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["pointer"] == "/cache_mode"


def test_it_paginates_in_a_stable_order(api, fio):
    made = [store_bundle(make_bundle(fio)) for _ in range(5)]
    # Same timestamp for all: only the id tie-breaker orders them.
    Run.objects.update(created="2026-01-01T00:00:00Z")
    seen = []
    for page in (1, 2, 3):
        body = api.get(f"/api/v1/runs/?page_size=2&page={page}").json()
        seen += [r["id"] for r in body["results"]]
    assert seen == sorted((r.pk for r in made), reverse=True)
    by_title = api.get("/api/v1/runs/?ordering=,title&page_size=5").json()
    assert [r["id"] for r in by_title["results"]] == sorted(
        (r.pk for r in made), reverse=True
    )


def test_the_detail_gives_overhead_against_the_host_baseline(api, fio, catalogue):
    guest, host = catalogue["none-ssd"], catalogue["host"]
    assert guest.baseline_id == host.pk  # paired by pair id
    body = api.get(f"/api/v1/runs/{guest.pk}/").json()
    test = next(t for t in body["tests"] if t["test_id"] == READ)
    host_body = api.get(f"/api/v1/runs/{host.pk}/").json()
    host_test = next(t for t in host_body["tests"] if t["test_id"] == READ)
    overhead = test["overhead"]
    assert overhead["baseline_run"] == host.pk
    assert overhead["iops"] == pytest.approx(test["iops_mean"] / host_test["iops_mean"])
    assert overhead["lat_mean_ns"] == pytest.approx(
        test["lat_mean_ns_mean"] / host_test["lat_mean_ns_mean"]
    )
    # The host is rate-capped at 2000 IOPS: the guest looks faster than native.
    assert overhead["iops"] > 1
    # With its interval: guest/host of geometric means over the 3 repeats.
    iops = overhead["intervals"]["iops"]
    assert (iops["n_guest"], iops["n_host"]) == (3, 3)
    assert 0 < iops["low"] <= iops["ratio"] <= iops["high"]

    def repeats(t):
        return [
            r["records"][0]["iops"]
            for r in t["repeats"]
            if r["records"][0]["direction"] == "read"
        ]

    expected = statistics.geometric_mean(repeats(test)) / statistics.geometric_mean(
        repeats(host_test)
    )
    assert iops["ratio"] == pytest.approx(expected, rel=1e-9)
    # Its text by the one rule (stats.too_wide): three real repeats a side
    # can give an interval too wide to state.
    if too_wide(iops["low"], iops["high"]):
        assert iops["text"] == "guest ÷ host too noisy to estimate (3 repeats)"
    else:
        assert iops["text"].startswith(f"guest {iops['ratio']:.2f}× host (CI ")
    # A host run has no baseline, so no overhead.
    assert all(t["overhead"] is None for t in host_body["tests"])


def test_it_pairs_a_guest_that_arrives_after_its_host(api, fio):
    host = store_bundle(make_bundle(fio, role="host", pair_id="late-guest"))
    guest = store_bundle(make_bundle(fio, pair_id="late-guest"))
    guest.refresh_from_db()
    assert guest.baseline_id == host.pk


def test_it_exports_a_filtered_run_list_as_csv_and_json(api, fio, catalogue):
    url = "/api/v1/runs/export/?cache_mode=none"
    response = api.get(url + "&format=csv")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["run_id"] for r in rows} == {str(catalogue["none-ssd"].pk)}
    assert {r["test_id"] for r in rows} == {READ}
    data = json.loads(b"".join(api.get(url + "&format=json").streaming_content))
    assert len(data["rows"]) == 1
    assert data["rows"][0]["iops_mean"] == pytest.approx(float(rows[0]["iops_mean"]))
    assert data["rows"][0]["stats"]["directions"]["read"]["iops"]["n"] == 3


def test_the_public_dump_holds_public_runs_only(api, fio, tmp_path, settings):
    settings.PUBLIC_DUMP_DIR = str(tmp_path)
    public = make_bundle(fio)
    store_bundle(public)
    store_bundle(make_bundle(fio), visibility="private")
    hidden = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=hidden.pk).update(hidden=True, hidden_reason="spam")
    assert api.get("/api/v1/dump/").status_code == 404

    public_dump()

    with gzip.open(tmp_path / "latest.csv.gz", "rt") as f:
        rows = list(csv.DictReader(f))
    assert [r["run_uuid"] for r in rows] == [public["bundle_id"]]
    expected = statistics.geometric_mean(repeat_values(public, READ, "read", "iops"))
    assert float(rows[0]["iops_mean"]) == pytest.approx(expected)
    with gzip.open(tmp_path / "latest.jsonl.gz", "rt") as f:
        lines = [json.loads(line) for line in f]
    assert lines[0]["stats"]["main_direction"] == "read"
    response = api.get("/api/v1/dump/?kind=jsonl")
    assert response.status_code == 200
    assert gzip.decompress(b"".join(response.streaming_content)).count(b"\n") == 1


def test_it_lists_vocabularies_and_hardware(api, catalogue):
    vocab = api.get("/api/v1/vocabularies/").json()
    assert {"value": "writeback", "label": "writeback"} in vocab["vocabularies"][
        "cache_mode"
    ]
    assert "disk_type" in vocab["group_by"]
    assert vocab["tags"]["note"] is None
    hardware = api.get("/api/v1/hardware/").json()["results"]
    assert sorted(h["disk_type"] for h in hardware) == ["hdd", "nvme-ssd", "sata-ssd"]
    assert all(h["run_count"] == 1 for h in hardware)


def test_list_and_detail_queries_do_not_grow_with_the_data(api, fio):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(url).status_code == 200
        return len(ctx.captured_queries)

    small = store_bundle(make_bundle(fio, tests=(READ,)))
    list_small, detail_small = (
        queries("/api/v1/runs/"),
        queries(f"/api/v1/runs/{small.pk}/"),
    )
    big = store_bundle(make_bundle(fio, tests=(READ, "fio-rand-write-4k-q1t1")))
    for _ in range(4):
        store_bundle(make_bundle(fio))
    assert queries("/api/v1/runs/") == list_small == 2  # count, page (ids a subquery)
    assert queries(f"/api/v1/runs/{big.pk}/") == detail_small


def test_it_stores_a_dd_result_in_the_direction_the_test_names(api, fio):
    bundle = make_bundle(fio, tests=("dd-write-1m-fdatasync",), repeats=2)
    run = store_bundle(bundle)
    test = api.get(f"/api/v1/runs/{run.pk}/").json()["tests"][0]
    assert test["tool"] == "dd" and test["main_direction"] == "write"
    assert test["stats"]["write"]["io_bytes"]["mean"] == 4 * 1024 * 1024
    assert test["iops_mean"] is None  # dd does not report IOPS: never invented
