"""Imported results stand beside agent runs: each test is its workload (a
CrystalDiskMark RND4K Q32T1 read is the suite's fio-rand-read-4k-q32t1), it
compares with an agent run of that test with the reasons the comparison is
weaker, its main figure is the one of its kind, and no page calls it
unchecked ("No warnings") when the agent never checked it."""

from __future__ import annotations

import copy
import gzip
import json
import uuid
from pathlib import Path

import pytest

from benchdb.results.compare import build_comparison
from benchdb.results.ingest import store_bundle
from benchdb_agent import bundle, imports

pytestmark = pytest.mark.django_db

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def agent_run():
    with gzip.open(SAMPLES / "bundles" / "full-none.json.gz", "rt") as handle:
        doc = copy.deepcopy(json.load(handle))
    doc["bundle_id"] = str(uuid.uuid4())
    return store_bundle(doc)


def imported_run(name="crystaldiskmark/cdm-8.0.1-wd-blue.txt", **tags):
    text, parsed = imports.read_output((SAMPLES / name).read_bytes(), name)
    doc = imports.build([(name, text, parsed)], tags=tags)
    assert bundle.validate(doc) == []
    return store_bundle(doc)


def test_crystaldiskmark_rows_are_the_suites_tests_with_their_main_figure():
    run = imported_run(platform="proxmox", cache_mode="none")
    results = {r.test_id: r for r in run.results.all()}
    assert set(results) == {
        "fio-seq-read-1m-q8t1",
        "fio-seq-write-1m-q8t1",
        "fio-seq-read-1m-q1t1",
        "fio-seq-write-1m-q1t1",
        "fio-rand-read-4k-q32t1",
        "fio-rand-write-4k-q32t1",
        "fio-rand-read-4k-q1t1",
        "fio-rand-write-4k-q1t1",
    }
    rnd = results["fio-rand-read-4k-q32t1"]
    assert rnd.iops_mean == 65772.9
    assert rnd.bw_bytes_mean == 269406000
    assert rnd.stats["main_direction"] == "read"
    assert results["fio-seq-write-1m-q8t1"].stats["main_direction"] == "write"
    assert run.source == "imported"
    assert run.tag_sources == {"platform": "user", "cache_mode": "user"}
    assert run.warnings[0]["code"] == "declared-not-verified"


def test_an_imported_rnd4k_q32t1_compares_with_the_agents_run_of_it():
    agent = agent_run()
    imported = imported_run()
    data = build_comparison([agent, imported])
    by_id = {t["test_id"]: t for t in data["tests"]}
    rnd = by_id["fio-rand-read-4k-q32t1"]
    assert rnd["main_metric"] == "iops"
    assert by_id["fio-seq-read-1m-q8t1"]["main_metric"] == "bw_bytes"
    iops = next(m for m in rnd["metrics"] if m["metric"] == "iops")
    mine = next(e for e in iops["runs"] if e["run"] == imported.pk)
    assert mine["values"] == [65772.9]
    assert rnd["weaker"][0] == (
        "compared by workload: CrystalDiskMark 8.0.1 declared, not verified"
    )
    # The agent's run used libaio, O_DIRECT, 16 MiB and 1 s; the export says
    # 1 GiB and 5 s, and neither its engine nor whether it bypassed the cache.
    assert "engine not recorded" in rnd["weaker"]
    assert "direct I/O not recorded" in rnd["weaker"]
    assert "file size: 1g against 16m" in rnd["weaker"]
    assert "runtime: 5 against 1" in rnd["weaker"]
    # Said once for the tests that share the reasons.
    (summary,) = [w for w in data["weaker"] if "Random read 4 KiB Q32T1" in w["tests"]]
    assert summary["reasons"] == rnd["weaker"]
    # Two agent runs of the same test are never "weaker".
    twin = agent_run()
    plain = build_comparison([agent, twin])
    assert all(t["weaker"] == [] for t in plain["tests"])
    assert plain["weaker"] == []


def test_the_compare_page_says_why_the_comparison_is_weaker(client):
    agent = agent_run()
    imported = imported_run()
    page = client.get(f"/compare/?runs={agent.pk},{imported.pk}").content.decode()
    assert "These runs share no comparable test" not in page
    assert "a weaker comparison than between agent runs" in page
    assert "declared, not verified" in page


def test_an_imported_run_is_never_called_checked(client):
    imported = imported_run()
    page = client.get(imported.get_absolute_url()).content.decode()
    assert "No warnings" not in page
    assert "declared, not verified" in page
    assert "no cache, load or stability check" in page
    measured = client.get(agent_run().get_absolute_url()).content.decode()
    assert "declared, not verified" not in measured
    assert "detected by the agent" in measured or "read from the host" in measured
