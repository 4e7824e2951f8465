"""The parsers on outputs the installed fio, ioping and dd produce right now."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from benchdb_agent.parsers import parse


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, capture_output=True, text=True, check=True, timeout=60, **kw
    )


@pytest.mark.parametrize("rw", ["randread", "randwrite", "randrw", "read", "write"])
def test_live_fio_json_and_terse(tmp_path, rw):
    base = [
        "fio",
        f"--name={rw}",
        f"--filename={tmp_path / 'f'}",
        "--size=4m",
        f"--rw={rw}",
        "--bs=4k",
        "--direct=1",
        "--runtime=1",
        "--time_based",
        "--iodepth=2",
        "--ioengine=libaio",
    ]
    out = run([*base, "--output-format=json"]).stdout
    doc = json.loads(out[out.index("{") :])
    records = parse(out, source="live")["records"]
    want = {"randrw": ["read", "write"], "randread": ["read"], "read": ["read"]}.get(
        rw, ["write"]
    )
    assert [r["direction"] for r in records] == want
    for rec in records:
        side = doc["jobs"][0][rec["direction"]]
        assert rec["iops"] == side["iops"] > 0
        assert rec["bw_bytes"] == side["bw_bytes"] > 0
        assert rec["options"]["rw"] == rw
    terse = parse(run([*base, "--output-format=terse"]).stdout)["records"]
    assert [r["direction"] for r in terse] == want


def test_live_ioping_every_output_form(tmp_path):
    for args, fmt in (
        (["-c", "3"], "ioping-human"),
        (["-c", "3", "-J"], "ioping-json"),
        (["-c", "3", "-B"], "ioping-batch"),
    ):
        out = run(["ioping", "-i", "0.01", *args, str(tmp_path)]).stdout
        (rec,) = parse(out, fmt, direction="read")["records"]
        assert rec["lat_mean_ns"] > 0 and rec["iops"] > 0


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_live_dd(tmp_path, locale):
    env = dict(os.environ, LC_ALL=locale)
    err = run(
        [
            "dd",
            "if=/dev/zero",
            f"of={tmp_path / 'x'}",
            "bs=1M",
            "count=4",
            "conv=fdatasync",
        ],
        env=env,
    ).stderr
    (rec,) = parse(err, "dd", direction="write")["records"]
    assert rec["io_bytes"] == 4 * 2**20
    assert rec["runtime_s"] > 0 and rec["bw_bytes"] > 0
