"""ioping in a run: read from -J where the installed ioping has it (exact
nanoseconds), from its text otherwise, time-bounded like fio, with enough
requests per repeat, and the count recorded (issue 29)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchdb_agent import bundle, parsers, runner

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "ioping"
IOPING_TESTS = ["ioping-read-4k", "ioping-write-4k"]


def run(tmp_path, **kw) -> dict:
    target = tmp_path / "target"
    target.mkdir()
    with open("/dev/null", "w") as quiet:
        return runner.run_suite(
            str(target),
            "quick",
            only=IOPING_TESTS,
            size=16 * 2**20,
            runtime=1,
            repeats=3,
            max_repeats=3,
            progress_stream=quiet,
            **kw,
        )


@pytest.mark.parametrize(
    ("line", "json_out"),
    [
        ("ioping 1.3", True),
        ("ioping 1.2", True),
        ("ioping 1.1", False),
        ("ioping 0.9", False),
        (None, False),
    ],
)
def test_json_where_the_installed_ioping_has_it(line, json_out):
    assert runner.ioping_json(line) is json_out


def test_the_installed_ioping_is_read_from_json_exactly(tmp_path):
    assert runner.ioping_json(runner.tool_version("ioping"))
    doc = run(tmp_path)
    assert bundle.validate(doc) == []
    for test in doc["tests"]:
        assert "-J" in test["command"] and "-w" in test["command"]
        assert test["options"]["work_time_s"] == "1"
        for rep in test["repeats"]:
            assert rep["raw"]["format"] == "ioping-json"
            stat = json.loads(bundle.decode_raw(rep["raw"]))[-1]["stat"]
            (rec,) = rep["records"]
            # Exact: ioping's own integers, not 3 significant digits.
            assert rec["lat_mean_ns"] == stat["avg"]
            assert rec["lat_min_ns"] == stat["min"]
            assert rec["lat_max_ns"] == stat["max"]
            # Time-bounded (1 s at one request per 10 ms), the count recorded.
            assert rec["options"]["count"] == stat["count"] >= 20


def test_an_ioping_without_json_is_read_from_its_text_as_before(tmp_path, monkeypatch):
    # The installed ioping has -J; an ioping older than 1.2 cannot be
    # installed here, so the version check is what is replaced.
    monkeypatch.setattr(runner, "ioping_json", lambda version: False)
    doc = run(tmp_path, ioping_count=30)
    for test in doc["tests"]:
        assert "-J" not in test["command"]
        assert test["options"]["count"] == "30"
        for rep in test["repeats"]:
            assert rep["raw"]["format"] == "ioping-human"
            text = bundle.decode_raw(rep["raw"])
            assert "ioping statistics ---" in text
            again = parsers.parse(text, "ioping-human", direction=test["direction"])
            assert again["records"] == rep["records"]
            (rec,) = rep["records"]
            assert rec["options"]["count"] <= 30 and rec["lat_mean_ns"] > 0


def test_the_saved_timed_outputs_parse_to_their_exact_and_rounded_values():
    doc = json.loads((SAMPLES / "timed-read-1.3.json").read_text())
    stat = doc[-1]["stat"]
    (rec,) = parsers.parse(
        (SAMPLES / "timed-read-1.3.json").read_text(), "ioping-json"
    )["records"]
    assert rec["direction"] == "read"
    assert rec["lat_mean_ns"] == stat["avg"] and rec["options"]["count"] == 95
    assert rec["iops"] == pytest.approx(stat["iops"], rel=1e-12)
    (text,) = parsers.parse(
        (SAMPLES / "timed-read-1.3.txt").read_text(), "ioping-human"
    )["records"]
    # The text says "649.5 us": four significant digits at most.
    assert text["lat_mean_ns"] == 649_500 and text["options"]["count"] == 99
    assert text["lat_max_ns"] == 4_160_000


def test_the_time_bound_is_the_one_ioping_obeys(tmp_path):
    """The command the agent builds, run as is, stops after its -w seconds."""
    f = tmp_path / "f"
    f.write_bytes(b"\1" * 2**20)
    test = {"options": {"size": "4k"}}
    cmd = runner.ioping_command(test, str(f), None, 1, True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    (rec,) = parsers.parse(done.stdout, "ioping-json")["records"]
    assert 0.0 < rec["runtime_s"] <= 1.0
    assert 20 <= rec["options"]["count"] <= 100
