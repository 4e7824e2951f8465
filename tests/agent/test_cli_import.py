"""`benchdb-agent import`: results people already have, from files or standard
input, each test named by its workload, with the facets the file cannot say
declared (closed vocabularies) and marked as typed by a person."""

import json
import subprocess
import sys
from pathlib import Path

from benchdb_agent import bundle, workload

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
AGENT = [sys.executable, "-m", "benchdb_agent"]


def agent(*args, **kw):
    return subprocess.run([*AGENT, *args], capture_output=True, timeout=120, **kw)


def test_a_crystaldiskmark_export_from_stdin_with_declared_facets(tmp_path):
    out = tmp_path / "cdm.json"
    utf16 = b"\xff\xfe" + (
        (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_text()
    ).encode("utf-16-le")
    proc = agent(
        "import", "-", "--out", str(out), "--platform", "proxmox",
        "--cache-mode", "none", "--disk-bus", "virtio-scsi",
        "--virtio-win-version", "100.95.104.26200", input=utf16,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    assert doc["source"] == "imported"
    assert doc["tags"] == {
        "platform": "proxmox",
        "cache_mode": "none",
        "disk_bus": "virtio-scsi",
        "virtio_win_version": "100.95.104.26200",
    }
    assert set(doc["tag_sources"].values()) == {"user"}
    assert doc["warnings"][0]["code"] == "declared-not-verified"
    ids = [t["test_id"] for t in doc["tests"]]
    assert ids[:4] == [
        "fio-seq-read-1m-q8t1",
        "fio-seq-read-1m-q1t1",
        "fio-rand-read-4k-q32t1",
        "fio-rand-read-4k-q1t1",
    ]
    # Nothing named after the file (it had none: standard input).
    assert not any("import" in i or "-" == i for i in ids)
    # Undeclared facets are said, not guessed.
    assert "not declared" in proc.stderr.decode()
    assert "storage_backend" in proc.stderr.decode()


def test_the_same_workload_in_two_files_is_one_test_with_two_repeats(tmp_path):
    out = tmp_path / "two.json"
    sample = SAMPLES / "crystaldiskmark"
    proc = agent(
        "import", str(sample / "cdm-8.0.1-wd-blue.txt"),
        str(sample / "cdm-8.0.1-x86-512mib.txt"), "--out", str(out), "--no-input",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(out.read_text())
    rnd = next(t for t in doc["tests"] if t["test_id"] == "fio-rand-read-4k-q32t1")
    assert [r["records"][0]["iops"] for r in rnd["repeats"]] == [65772.9, 63127.9]
    assert [r["raw"]["job"] for r in rnd["repeats"]] == ["Read RND4K Q32T1"] * 2


def test_a_workload_outside_the_suite_is_named_by_its_parameters(tmp_path):
    out = tmp_path / "other.json"
    proc = agent(
        "import", str(SAMPLES / "crystaldiskmark/cdm-8.0.2-nvme-profile.txt"),
        str(SAMPLES / "yabs/example-v2023-04-23.json"),
        str(SAMPLES / "diskspd/vc-2.2.0-write.txt"), "--out", str(out),
        "--no-input",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(out.read_text())
    ids = {t["test_id"]: t for t in doc["tests"]}
    assert "io-seq-read-128k-q32t1" in ids  # SEQ128K Q32T1
    assert "io-rand-read-4k-q32t16" in ids  # RND4K Q32T16: not the suite's T1
    assert "fio-seq-read-1m-q8t1" in ids
    assert "io-rand-rw50-4k-q64t2" in ids  # YABS's 50/50 mix
    assert ids["io-rand-rw50-4k-q64t2"]["direction"] == "mixed"
    assert "io-rand-write-4k-q3t160" in ids  # DiskSpd -t160 -o3 -w100 -r
    assert bundle.validate(doc) == []


def test_bad_input_is_refused_and_nothing_is_written(tmp_path):
    out = tmp_path / "never.json"
    cases = [
        (b"Dear diary,\nnothing to see.\n", "not a recognised benchmark output"),
        ("Comment: Café\n".encode("latin-1"), "is not utf-8 text"),
        (
            (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_bytes()[:900],
            "line 17: not a result row",
        ),
    ]
    for data, message in cases:
        proc = agent("import", "-", "--out", str(out), "--no-input", input=data)
        assert proc.returncode == 2
        assert message in proc.stderr.decode()
        assert not out.exists()
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(100 * 2**20)
    proc = agent("import", str(big), "--out", str(out), "--no-input")
    assert proc.returncode == 2
    assert "larger than 16777216 bytes" in proc.stderr.decode()
    assert not out.exists()


def test_a_facet_outside_its_vocabulary_is_refused(tmp_path):
    proc = agent(
        "import", str(SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt"),
        "--cache-mode", "fast", "--out", str(tmp_path / "x.json"),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "invalid choice: 'fast'" in proc.stderr.decode()


def test_a_phoronix_result_is_the_suites_sweep_test_of_its_depth(tmp_path):
    out = tmp_path / "pts.json"
    proc = agent(
        "import", str(SAMPLES / "pts/fio-2.1.0-docs.xml"), "--out", str(out),
        "--no-input",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(out.read_text())
    assert bundle.validate(doc) == []
    ids = [t["test_id"] for t in doc["tests"]]
    # pts/fio-2.x runs iodepth=64: the full profile's sweep point.
    assert ids == ["fio-sweep-rand-read-4k-q64t1", "io-seq-write-1m-q64t1"]


def test_ioping_and_dd_are_named_by_workload_not_by_file(tmp_path):
    out = tmp_path / "lat.json"
    renamed = tmp_path / "guest-ioping-whatever.json"
    renamed.write_bytes((SAMPLES / "ioping/write-1.3.json").read_bytes())
    proc = agent(
        "import", str(SAMPLES / "ioping/read-1.3.json"), str(renamed),
        "--out", str(out), "--no-input",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(out.read_text())
    assert [t["test_id"] for t in doc["tests"]] == ["ioping-read-4k", "ioping-write-4k"]
    assert workload.main_metric("ioping-read-4k") == "lat_mean_ns"
    proc = agent(
        "import", str(SAMPLES / "dd/gnu-c.txt"), "--direction", "write",
        "--out", str(out), "--no-input",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    (test,) = json.loads(out.read_text())["tests"]
    assert test["test_id"] == "dd-write"
    assert workload.main_metric("dd-write") == "bw_bytes"
