"""The parsers against real tool outputs and documented formats.

Expected values are computed in the test from the sample itself (JSON fields,
terse fields, printed lines), independently of the parser's code paths.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest

from benchdb_agent.parsers import RECORD_KEYS, ParseError, detect_format, parse

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def exact(value, scale) -> float:
    """What an exact rescaling of a printed number gives."""
    result = Decimal(repr(value) if isinstance(value, float) else str(value)) * Decimal(
        str(scale)
    )
    return float(result)


def fio_json(name: str) -> dict:
    text = sample(name)
    return json.JSONDecoder().raw_decode(text[text.index("{") :])[0]


@pytest.mark.parametrize(
    "name",
    [
        "fio/randrw-3.json",
        "fio/numjobs2-3.json",
        "fio/group-reporting-3.json",
        "fio/seqread-3.jsonplus",
        "fio/leading-junk-3.json",
    ],
)
def test_fio3_json_records_equal_the_json_fields(name):
    doc = fio_json(name)
    result = parse(sample(name), source=name)
    assert result["format"] == "fio-json"
    assert result["tool_version"] == doc["fio version"]
    expected = []
    for job in doc["jobs"]:
        for direction in ("read", "write", "trim"):
            d = job[direction]
            if d["total_ios"] == 0:
                continue
            expected.append((job["jobname"], direction, d))
    assert len(result["records"]) == len(expected)
    for rec, (jobname, direction, d) in zip(result["records"], expected, strict=True):
        assert rec["job"] == jobname and rec["direction"] == direction
        assert rec["iops"] == d["iops"]
        assert rec["bw_bytes"] == d["bw_bytes"]
        assert rec["io_bytes"] == d["io_bytes"]
        assert rec["runtime_s"] == exact(d["runtime"], "0.001")
        assert rec["lat_mean_ns"] == d["lat_ns"]["mean"]
        assert rec["clat_mean_ns"] == d["clat_ns"]["mean"]
        assert rec["lat_min_ns"] == d["lat_ns"]["min"]
        assert rec["lat_max_ns"] == d["lat_ns"]["max"]
        assert rec["lat_stdev_ns"] == d["lat_ns"]["stddev"]
        assert rec["clat_p50_ns"] == d["clat_ns"]["percentile"]["50.000000"]
        assert rec["clat_p99_ns"] == d["clat_ns"]["percentile"]["99.000000"]
        assert rec["clat_p99_9_ns"] == d["clat_ns"]["percentile"]["99.900000"]
        assert rec["options"]["rw"] == job["job options"].get(
            "rw", doc.get("global options", {}).get("rw")
        )


def test_fio3_json_keeps_both_jobs_without_group_reporting():
    records = parse(sample("fio/numjobs2-3.json"))["records"]
    assert len(records) == 2
    records = parse(sample("fio/group-reporting-3.json"))["records"]
    assert len(records) == 1 and records[0]["direction"] == "write"


def test_fio2_json_converts_kib_and_usec_exactly():
    result = parse(sample("fio/randread-2.2-docs.json"))
    assert result["tool_version"] == "fio-2.2.10"
    (rec,) = result["records"]  # the zero write and trim sides are left out
    assert rec["direction"] == "read"
    assert rec["bw_bytes"] == 40956 * 1024
    assert rec["io_bytes"] == 409600 * 1024
    assert rec["iops"] == 10239.0
    assert rec["runtime_s"] == 10.001
    assert rec["clat_mean_ns"] == 3120500
    assert rec["lat_mean_ns"] == 3125100
    assert rec["lat_stdev_ns"] == 800900
    assert rec["clat_p50_ns"] == 3024000
    assert rec["clat_p99_9_ns"] == 9792000
    assert rec["options"] == {
        "rw": "randread",
        "bs": "4k",
        "iodepth": "32",
        "ioengine": "libaio",
        "direct": "1",
        "size": "1g",
    }


def test_fio2_normal_output_matches_its_json():
    (rec,) = parse(sample("fio/randread-2.2-docs.txt"))["records"]
    assert rec["bw_bytes"] == 40956 * 1024  # 2.x "KB" is KiB
    assert rec["io_bytes"] == 409600 * 1024
    assert rec["iops"] == 10239
    assert rec["runtime_s"] == 10.001
    assert rec["lat_mean_ns"] == 3125100
    assert rec["clat_mean_ns"] == 3120500
    assert rec["clat_p99_ns"] == 5600000


def terse_fields(line: str, block: int) -> list[str]:
    fields = line.split(";")
    return fields[5 + 41 * block : 5 + 41 * (block + 1)]


@pytest.mark.parametrize("name", ["fio/randrw-3.terse", "fio/randread-v4.terse"])
def test_fio_terse_fields_by_position(name):
    text = sample(name)
    result = parse(text, source=name)
    assert result["format"] == "fio-terse"
    line = text.strip().splitlines()[0]
    records = result["records"]
    directions = [r["direction"] for r in records]
    for block, direction in enumerate(("read", "write")):
        f = terse_fields(line, block)
        if int(f[0]) == 0:
            assert direction not in directions
            continue
        rec = records[directions.index(direction)]
        assert rec["io_bytes"] == int(f[0]) * 1024
        assert rec["bw_bytes"] == int(f[1]) * 1024
        assert rec["iops"] == int(f[2])
        assert rec["runtime_s"] == exact(int(f[3]), "0.001")
        assert rec["clat_mean_ns"] == exact(f[10], 1000)
        assert rec["lat_mean_ns"] == exact(f[34], 1000)
        p50 = next(x for x in f[12:32] if x.startswith("50.000000%="))
        assert rec["clat_p50_ns"] == int(p50.split("=")[1]) * 1000


def test_the_same_run_in_three_formats_agrees():
    text = sample("fio/all-formats-3.txt")
    start = text.index("{")
    doc, end = json.JSONDecoder().raw_decode(text[start:])
    terse = "\n".join(ln for ln in text.splitlines() if ln.startswith("3;"))
    normal = text[start + end :]
    j = parse(text[start : start + end])["records"][0]
    t = parse(terse)["records"][0]
    n = parse(normal, "fio-normal")["records"][0]
    # Each format rounds differently; all must describe the same run.
    for key in ("iops", "bw_bytes", "lat_mean_ns", "clat_mean_ns"):
        assert t[key] == pytest.approx(j[key], rel=1e-3), key
        assert n[key] == pytest.approx(j[key], rel=2e-2), key
    assert j["runtime_s"] == t["runtime_s"] == n["runtime_s"]


def test_fio3_normal_output_reads_iops_suffix_and_units():
    text = sample("fio/randrw-3.txt")
    records = parse(text)["records"]
    assert [r["direction"] for r in records] == ["read", "write"]
    m = re.search(r"read: IOPS=([\d.]+)(k?), BW=([\d.]+)MiB/s", text)
    iops = Decimal(m.group(1)) * (1000 if m.group(2) else 1)
    assert records[0]["iops"] == float(iops)
    assert records[0]["bw_bytes"] == float(Decimal(m.group(3)) * 2**20)
    assert records[0]["options"]["rw"] == "randrw"


def test_fio_summary_line_alone_gives_what_it_states():
    (rec,) = parse(sample("fio/seed-003-summary-docs.txt"))["records"]
    assert rec["direction"] == "write"
    assert rec["bw_bytes"] == 155 * 2**20
    assert rec["io_bytes"] == 5112 * 2**20
    assert rec["runtime_s"] == 33.001
    assert rec["iops"] is None and rec["lat_mean_ns"] is None


def test_ioping_human_1_3():
    text = sample("ioping/read-1.3.txt")
    (rec,) = parse(text)["records"]
    assert rec["direction"] == "read"
    m = re.search(r"min/avg/max/mdev = ([\d.]+) (\w+) / ([\d.]+) (\w+)", text)
    scale = {"us": 1000, "ms": 10**6, "ns": 1}
    assert rec["lat_min_ns"] == exact(m.group(1), scale[m.group(2)])
    assert rec["lat_mean_ns"] == exact(m.group(3), scale[m.group(4)])
    (w,) = parse(sample("ioping/write-1.3.txt"))["records"]
    assert w["direction"] == "write"


def test_ioping_json_and_batch():
    text = sample("ioping/read-1.3.json")
    stat = json.loads(text)[-1]["stat"]
    (rec,) = parse(text)["records"]
    assert rec["direction"] == "read"
    assert rec["lat_mean_ns"] == stat["avg"]
    assert rec["iops"] == stat["iops"]
    assert rec["bw_bytes"] == stat["bps"]
    assert parse(sample("ioping/write-1.3.json"))["records"][0]["direction"] == "write"
    batch = sample("ioping/read-64k-1.3.batch").split()
    (b,) = parse(" ".join(batch), "ioping-batch", direction="read")["records"]
    assert b["lat_mean_ns"] == int(batch[5])  # nanoseconds since 1.0
    assert b["bw_bytes"] == int(batch[3])


def test_ioping_before_1_0():
    (rec,) = parse(sample("ioping/read-0.9-docs.txt"))["records"]
    assert rec["lat_mean_ns"] == 4400000 and rec["lat_stdev_ns"] == 5900000
    assert rec["bw_bytes"] == float(Decimal("0.9") * 2**20)  # "mb/s" was MiB/s
    (b,) = parse(sample("ioping/read-0.9-docs.batch"), direction="read")["records"]
    assert b["lat_mean_ns"] == 4400 * 1000  # 8 fields: microseconds


def test_raw_forms_without_a_direction_come_back_with_null_and_a_note():
    for name, fmt, tool in (
        ("ioping/read-64k-1.3.batch", "ioping-batch", "ioping"),
        ("dd/gnu-c.txt", "dd", "dd"),
    ):
        result = parse(sample(name), fmt, source="b.txt")
        assert [r["direction"] for r in result["records"]] == [None]
        assert result["records"][0]["iops" if tool == "ioping" else "io_bytes"] > 0
        (note,) = result["notes"]
        assert note.startswith(f"{tool} output does not say read or write")
    # Named, there is no note.
    assert "notes" not in parse(sample("dd/gnu-c.txt"), "dd", direction="write")


def bytes_per_second(io_bytes, seconds) -> float:
    return float(Decimal(io_bytes) / Decimal(seconds))


# bw_bytes is bytes / seconds from the same line, not the rounded printed rate
# (157 MB/s, 721.6MB/s, 156653243 bytes/sec).
DD_CASES = {
    "dd/seed-001-old-coreutils.txt": (
        1073741824,
        6.8543,
        bytes_per_second(1073741824, "6.8543"),
    ),
    "dd/ru-translated-docs.txt": (
        1073741824,
        6.8543,
        bytes_per_second(1073741824, "6.8543"),
    ),
    "dd/busybox-docs.txt": (8388608, 0.011086, bytes_per_second(8388608, "0.011086")),
    "dd/bsd-docs.txt": (1073741824, 6.854321, bytes_per_second(1073741824, "6.854321")),
}


@pytest.mark.parametrize(("name", "expected"), sorted(DD_CASES.items()))
def test_dd_dialects(name, expected):
    text = sample(name)
    assert detect_format(text) == "dd"
    (rec,) = parse(text, direction="write", source=name)["records"]
    assert (rec["io_bytes"], rec["runtime_s"], rec["bw_bytes"]) == expected


@pytest.mark.parametrize("name", ["gnu-c", "gnu-de_de", "gnu-fr_fr", "gnu-zh_cn"])
def test_dd_real_locales(name):
    text = sample(f"dd/{name}.txt")
    line = text.strip().splitlines()[-1]
    (rec,) = parse(text, direction="write")["records"]
    assert rec["io_bytes"] == int(re.match(r"\d+", line).group())
    secs = re.findall(r"(\d+[.,]\d+) s", line)[-1]
    assert rec["runtime_s"] == float(secs.replace(",", "."))
    assert rec["bw_bytes"] == bytes_per_second(rec["io_bytes"], secs.replace(",", "."))
    # The printed rate is rounded: the exact one is within its last digit.
    rate = re.search(r"(\d+(?:[.,]\d+)?) ([kMG]B)/s", line)
    scale = {"kB": 10**3, "MB": 10**6, "GB": 10**9}[rate.group(2)]
    printed = float(rate.group(1).replace(",", ".")) * scale
    assert abs(rec["bw_bytes"] - printed) / printed < 0.05


def test_dd_progress_lines_are_not_records():
    text = (SAMPLES / "dd/gnu-9.1-progress.txt").read_bytes().decode()
    assert text.count("\r") >= 3  # real progress lines, rewritten with \r
    (rec,) = parse(text, direction="read")["records"]
    last = text.strip().splitlines()[-1]
    assert last.startswith(str(rec["io_bytes"]))
    assert rec["io_bytes"] == 1572864000
    secs = re.search(r"copied, (\d+\.\d+) s", last).group(1)
    assert rec["runtime_s"] == float(secs)
    assert rec["bw_bytes"] == bytes_per_second(1572864000, secs)


def test_two_dd_runs_in_one_file_are_two_records():
    text = sample("dd/gnu-c.txt") + sample("dd/gnu-9.1-progress.txt")
    assert len(parse(text, "dd", direction="write")["records"]) == 2


def test_ioping_rapid_counts_with_a_k_suffix():
    text = sample("ioping/rapid-1.3.txt")
    (rec,) = parse(text)["records"]
    m = re.search(r"^(\d+\.\d) k requests completed", text, re.M)
    assert rec["options"]["count"] == int(Decimal(m.group(1)) * 1000)
    iops = re.search(r"read, (\d+\.\d) k iops", text).group(1)
    assert rec["iops"] == int(Decimal(iops) * 1000)
    assert rec["direction"] == "read"


def test_busybox_dd_without_statistics_is_an_error():
    with pytest.raises(ParseError, match="statistics line"):
        parse(sample("dd/busybox-1.35-no-stats.txt"), "dd", direction="write")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "hello world",
        '{"jobs": [',
        "3;fio-3.33;x;0;0;12",
        "--- . (ext4) ioping statistics ---\n",
        "1024+0 records in\n",
    ],
)
def test_garbage_and_truncated_input_is_an_error_naming_the_source(text):
    with pytest.raises(ParseError, match="broken.txt"):
        parse(text, source="broken.txt", direction="read")


def test_truncated_fio_json_is_an_error():
    text = sample("fio/randrw-3.json")
    with pytest.raises(ParseError, match="malformed or truncated"):
        parse(text[: len(text) // 2], "fio-json", source="cut.json")


def test_every_record_has_every_key_and_no_bad_number():
    for path in SAMPLES.rglob("*"):
        if path.suffix not in (".json", ".jsonplus", ".txt", ".terse", ".batch"):
            continue
        if path.name in (
            "all-formats-3.txt",
            "busybox-1.35-no-stats.txt",
        ) or path.parent.name not in (
            "fio",
            "ioping",
            "dd",
        ):
            continue
        result = parse(
            path.read_text(encoding="utf-8"), source=path.name, direction="read"
        )
        for rec in result["records"]:
            assert tuple(rec) == RECORD_KEYS
            for key in RECORD_KEYS:
                value = rec[key]
                if isinstance(value, (int, float)):
                    assert not math.isnan(value) and value >= 0, (path.name, key)
