"""Parsers of results people already have: CrystalDiskMark, KDiskMark, DiskSpd,
YABS, and fio JSON from other projects (tests/samples/README.md says where
each file comes from).  Every figure is checked against the file's own text.
"""

from pathlib import Path

import pytest

from benchdb_agent import parsers, workload

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def parse(name: str, fmt: str | None = None) -> dict:
    data = (SAMPLES / name).read_bytes()
    return parsers.parse(parsers.decode(data, name), fmt, source=name)


def figures(result: dict, *keys: str) -> list:
    return [
        (r["job"], r["direction"], *(r[k] for k in keys)) for r in result["records"]
    ]


# CrystalDiskMark 8 (soerenmetje/CrystalDiskMark-Parser's test data): MB/s is
# 1,000,000 bytes/s (the export's header), < us> the mean latency.
CDM_WD_BLUE = [
    ("Read SEQ1M Q8T1", "read", 531458000, 506.8, 15726770),
    ("Read SEQ1M Q1T1", "read", 489838000, 467.1, 2139410),
    ("Read RND4K Q32T1", "read", 269406000, 65772.9, 470580),
    ("Read RND4K Q1T1", "read", 41375000, 10101.3, 98750),
    ("Write SEQ1M Q8T1", "write", 498656000, 475.6, 16750300),
    ("Write SEQ1M Q1T1", "write", 485163000, 462.7, 2159180),
    ("Write RND4K Q32T1", "write", 222691000, 54367.9, 583020),
    ("Write RND4K Q1T1", "write", 99900000, 24389.6, 40730),
]


def test_crystaldiskmark_8_every_row_and_the_footer():
    result = parse("crystaldiskmark/cdm-8.0.1-wd-blue.txt")
    assert result["format"] == "crystaldiskmark"
    assert result["tool_version"] == "CrystalDiskMark 8.0.1"
    assert figures(result, "bw_bytes", "iops", "lat_mean_ns") == CDM_WD_BLUE
    assert all(r["clat_mean_ns"] is None for r in result["records"])
    rnd = result["records"][2]
    assert rnd["options"] == {
        "rw": "randread",
        "bs": "4k",
        "iodepth": "32",
        "numjobs": "1",
        "profile": "Default",
        "size": str(2**30),
        "loops": "5",
        "runtime": "5",
        "interval_s": "5",
    }
    meta = result["meta"]
    assert meta["os"] == "Windows 10  [10.0 Build 19042] (x64)"
    assert meta["comment"] == "WD Blue 3D 1TB"
    assert meta["date"] == "2021/06/22 17:19:21"
    assert meta["mode"] == "[Admin]"


def test_crystaldiskmark_nvme_profile_rows_carry_their_own_depths():
    result = parse("crystaldiskmark/cdm-8.0.2-nvme-profile.txt")
    assert [r["job"] for r in result["records"][:4]] == [
        "Read SEQ1M Q8T1",
        "Read SEQ128K Q32T1",
        "Read RND4K Q32T16",
        "Read RND4K Q1T1",
    ]
    seq128 = result["records"][1]
    assert (seq128["bw_bytes"], seq128["iops"], seq128["lat_mean_ns"]) == (
        2470266000,
        18846.6,
        1644220,
    )
    assert seq128["options"]["bs"] == "128k"
    assert result["records"][2]["options"]["numjobs"] == "16"


def test_crystaldiskmark_small_test_size_and_loops():
    meta = parse("crystaldiskmark/cdm-8.0.1-x86-512mib.txt")["meta"]
    assert (meta["test_size_bytes"], meta["loops"]) == (512 * 2**20, 2)
    assert "comment" not in meta


def test_crystaldiskmark_5_has_no_latency_and_no_sequential_block_size():
    result = parse("crystaldiskmark/cdm-5-docs.txt")
    first = result["records"][0]
    assert (first["job"], first["bw_bytes"], first["iops"]) == (
        "Read SEQ Q32T1",
        554872000,
        None,
    )
    assert "bs" not in first["options"]  # CDM 5 does not print it: unknown
    rnd = result["records"][2]
    assert (rnd["job"], rnd["iops"], rnd["options"]["numjobs"]) == (
        "Read RND4K Q8T8",
        1926.8,
        "8",
    )
    assert all(r["lat_mean_ns"] is None for r in result["records"])
    assert result["meta"]["interval_s"] == 5


def test_crystaldiskmark_utf16_export_reads_as_the_utf8_one():
    text = (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_text()
    for encoded in (
        b"\xff\xfe" + text.encode("utf-16-le"),
        text.encode("utf-16-le"),  # no byte-order mark
        b"\xfe\xff" + text.encode("utf-16-be"),
    ):
        result = parsers.parse(parsers.decode(encoded, "cdm16"), source="cdm16")
        assert figures(result, "bw_bytes", "iops", "lat_mean_ns") == CDM_WD_BLUE


def test_kdiskmark_mb_is_fio_kib_over_1000_and_latency_is_clat():
    # KDiskMark's README report: "508.897 MB/s [ 497.0 IOPS]" is fio's bw
    # 508897 KiB/s / 1000 (src/benchmark.cpp), 497.0 x 1 MiB = 521,142,272.
    result = parse("crystaldiskmark/kdiskmark-3.0.0-readme.txt")
    assert result["tool"] == "fio"
    assert result["tool_version"] == "KDiskMark 3.0.0"
    assert result["meta"]["fio_version"] == "fio-3.30"
    assert figures(result, "bw_bytes", "iops", "clat_mean_ns") == [
        ("Read SEQ1M Q8T1", "read", 508897 * 1024, 497, 13840050),
        ("Read SEQ1M Q1T1", "read", 438278 * 1024, 428, 2280140),
        ("Read RND4K Q32T1", "read", 354657 * 1024, 88664.6, 352370),
        ("Read RND4K Q1T1", "read", 44166 * 1024, 11041.6, 88480),
        ("Write SEQ1M Q8T1", "write", 460312 * 1024, 449.5, 15153110),
        ("Write SEQ1M Q1T1", "write", 333085 * 1024, 325.3, 2349820),
        ("Write RND4K Q32T1", "write", 315170 * 1024, 78792.5, 383860),
        ("Write RND4K Q1T1", "write", 91040 * 1024, 22760.3, 39800),
    ]
    assert result["records"][0]["options"]["ioengine"] == "libaio"
    assert (
        result["meta"]["os"] == "opensuse-tumbleweed 20220821 [linux 5.19.2-1-default]"
    )


def test_crystaldiskmark_mix_rows_are_kept_apart():
    text = (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_text()
    mix = (
        "\n[Mix] Read 70%/Write 30%\n"
        "  SEQ    1MiB (Q=  8, T= 1):   512.000 MB/s [    488.3 IOPS] < 16000.00 us>\n"
    )
    text = text.replace("\nProfile:", mix + "\nProfile:")
    result = parsers.parse(text)
    assert len(result["records"]) == 8
    assert result["mixed"] == [
        {
            "job": "Mix SEQ1M Q8T1",
            "rwmixread": 70,
            "bw_bytes": 512000000,
            "iops": 488.3,
            "lat_mean_ns": 16000000,
        }
    ]


def test_diskspd_xml_rates_are_exact_counts_over_the_test_time():
    # PerfKitBenchmarker's tests/data/diskspd_result.xml: 4 threads reading
    # 64 KiB sequentially, 2 outstanding I/Os each, no -L.
    result = parse("diskspd/pkb-2.0.21a.xml")
    assert result["format"] == "diskspd-xml"
    assert result["tool_version"] == "DiskSpd 2.0.21a"
    (rec,) = result["records"]
    total_bytes = 1484062720 + 1482620928 + 1477705728 + 1517420544
    total_ios = 22645 + 22623 + 22548 + 23154
    assert rec["direction"] == "read"
    assert rec["io_bytes"] == total_bytes
    assert rec["runtime_s"] == 30.02
    assert rec["bw_bytes"] == pytest.approx(total_bytes / 30.02, rel=1e-15)
    assert rec["iops"] == pytest.approx(total_ios / 30.02, rel=1e-15)
    assert rec["lat_mean_ns"] is None  # measured only with -L
    assert rec["options"] == {
        "rw": "read",
        "bs": "64k",
        "iodepth": "2",
        "numjobs": "4",
        "ioengine": "diskspd",
        "direct": "1",
        "size": "838860800",
        "runtime": "30",
    }


def test_diskspd_text_mix_with_latency_percentiles():
    # VirtualClient's DiskSpdExample-ReadWrite.txt: -L, 70/30, 4 KiB random.
    result = parse("diskspd/vc-readwrite-70-30.txt")
    assert result["format"] == "diskspd-text"
    read, write = result["records"]
    assert read["io_bytes"] == 102645760
    assert read["iops"] == pytest.approx(25060 / 30.01, rel=1e-15)
    assert (
        read["lat_mean_ns"],
        read["lat_stdev_ns"],
        read["lat_min_ns"],
        read["clat_p50_ns"],
        read["clat_p99_ns"],
        read["clat_p99_9_ns"],
        read["lat_max_ns"],
    ) == (272000, 185000, 36000, 232000, 877000, 1608000, 7990000)
    assert (write["io_bytes"], write["lat_mean_ns"], write["clat_p99_ns"]) == (
        43524096,
        2179000,
        6107000,
    )
    assert read["options"]["rw"] == write["options"]["rw"] == "randrw"
    assert read["options"]["rwmixread"] == "70"
    assert (read["options"]["bs"], read["options"]["iodepth"]) == ("4k", "1")


def test_diskspd_2_2_text_write_only():
    # VirtualClient's DiskSpdExample-WriteOnly-v2.2.0.txt: "block size: 4KiB",
    # "outstanding I/O operations per thread", N/A for the read side.
    (rec,) = parse("diskspd/vc-2.2.0-write.txt")["records"]
    assert rec["direction"] == "write"
    assert rec["io_bytes"] == 8265251819520
    assert rec["runtime_s"] == 900
    assert rec["iops"] == pytest.approx(2017883745 / 900, rel=1e-15)
    assert (rec["lat_mean_ns"], rec["lat_stdev_ns"], rec["lat_max_ns"]) == (
        861000,
        3327000,
        5543894000,
    )
    assert rec["options"]["bs"] == "4k"
    assert rec["options"]["rw"] == "randwrite"
    assert (rec["options"]["iodepth"], rec["options"]["numjobs"]) == ("3", "160")


YABS_JSON = [
    ("rand_rw_4k", "read", 405417 * 1024, 101354),
    ("rand_rw_4k", "write", 406487 * 1024, 101621),
    ("rand_rw_64k", "read", 407967 * 1024, 6374),
    ("rand_rw_64k", "write", 410114 * 1024, 6408),
    ("rand_rw_512k", "read", 380212 * 1024, 742),
    ("rand_rw_512k", "write", 400413 * 1024, 782),
    ("rand_rw_1m", "read", 394550 * 1024, 385),
    ("rand_rw_1m", "write", 420827 * 1024, 410),
]


def test_yabs_json_speeds_are_kib_per_second():
    result = parse("yabs/example-v2023-04-23.json")
    assert result["format"] == "yabs-json"
    assert figures(result, "bw_bytes", "iops") == YABS_JSON
    assert result["records"][0]["options"]["rw"] == "randrw"
    assert result["records"][0]["options"]["iodepth"] == "64"
    assert result["meta"]["vm"] == "NONE"


def test_yabs_text_before_2026_07_03_means_1024000_bytes_per_mb():
    # README's example (v2023-04-23), the same run as example.json: "405.41
    # MB/s (101.3k)" is 405417 KiB/s / 1000, cut to 2 decimals.
    result = parse("yabs/readme-v2023-04-23.txt")
    assert result["format"] == "yabs-text"
    assert result["approximate"] is True
    got = sorted(figures(result, "bw_bytes", "iops"))
    assert got == sorted(
        [
            ("rand_rw_4k", "read", 405410 * 1024, 101300),
            ("rand_rw_4k", "write", 406480 * 1024, 101600),
            ("rand_rw_64k", "read", 407960 * 1024, 6300),
            ("rand_rw_64k", "write", 410110 * 1024, 6400),
            ("rand_rw_512k", "read", 380210 * 1024, 742),
            ("rand_rw_512k", "write", 400410 * 1024, 782),
            ("rand_rw_1m", "read", 394550 * 1024, 385),
            ("rand_rw_1m", "write", 420820 * 1024, 410),
        ]
    )
    # Every text figure is within its truncation of the exact JSON figure.
    exact = {(j, d): (bw, iops) for j, d, bw, iops in YABS_JSON}
    for job, direction, bw, iops in got:
        assert 0 <= exact[job, direction][0] - bw < 10 * 1024
        assert 0 <= exact[job, direction][1] - iops < 100


def test_yabs_text_without_its_banner_has_no_bandwidth():
    text = (SAMPLES / "yabs/readme-v2023-04-23.txt").read_text()
    text = text[text.index("fio Disk Speed") :]
    result = parsers.parse(text)
    assert all(r["bw_bytes"] is None for r in result["records"])
    assert result["records"][0]["iops"] == 101300
    assert "MB/s meant 1,024,000 bytes/s" in result["notes"][0]


def test_yabs_text_from_2026_07_03_is_decimal():
    text = (SAMPLES / "yabs/readme-v2023-04-23.txt").read_text()
    result = parsers.parse(text.replace("v2023-04-23", "v2026-07-03"))
    assert result["records"][0]["bw_bytes"] == 405410000


def test_fio_2_1_4_json_with_duplicate_percentile_keys():
    # PerfKitBenchmarker's fio-parser-sample-result.json: fio-2.1.4, microsecond
    # latencies, KiB bandwidths, "0.00" percentile keys repeated.
    result = parse("fio/pkb-2.1.4-dupkeys.json")
    assert result["tool_version"] == "fio-2.1.4"
    seq = result["records"][0]
    assert (seq["job"], seq["direction"]) == ("sequential_write", "write")
    assert seq["bw_bytes"] == 68118 * 1024
    assert seq["iops"] == 133
    assert seq["clat_p99_ns"] == 823296 * 1000
    assert seq["lat_mean_ns"] == 478737470


# Bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "end", "expected"),
    [
        ("crystaldiskmark/cdm-8.0.1-wd-blue.txt", "  RND    4KiB (Q= 32", "footer"),
        ("crystaldiskmark/kdiskmark-3.0.0-readme.txt", "Profile:", "footer"),
        ("diskspd/pkb-2.0.21a.xml", "<Thread>", "no element found: line 166"),
        ("diskspd/vc-readwrite-70-30.txt", "Write IO", "line of Write IO"),
        ("yabs/example-v2023-04-23.json", '"iperf"', "malformed or truncated"),
        ("yabs/readme-v2023-04-23.txt", "Total      | 780", "Read, Write, Total"),
    ],
)
def test_a_truncated_file_is_refused_saying_why(name, end, expected):
    text = (SAMPLES / name).read_text()
    cut = text[: text.rindex(end)]
    with pytest.raises(parsers.ParseError, match=expected):
        parsers.parse(cut, parsers.detect_format(text), source=name)


def test_two_exports_in_one_file_are_refused_with_the_line():
    text = (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_text()
    with pytest.raises(parsers.ParseError, match=r"line 29: a second export header"):
        parsers.parse(text + "\n" + text)


def test_a_foreign_file_is_refused():
    with pytest.raises(parsers.ParseError, match="not a recognised benchmark output"):
        parsers.parse("Hello, this is a letter.\nKind regards\n")
    with pytest.raises(parsers.ParseError, match="expected DiskSpd's <Results>"):
        parsers.parse("<html><body/></html>", "diskspd-xml")
    with pytest.raises(parsers.ParseError, match="no 'CrystalDiskMark <version>'"):
        parsers.parse("SEQ 1MiB (Q= 8, T= 1): 1 MB/s", "crystaldiskmark")


def test_an_edited_row_is_refused_with_its_line():
    text = (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_text()
    bad = text.replace("531.458 MB/s", "531.458 MiB/s")
    with pytest.raises(parsers.ParseError, match="line 9: not a result row"):
        parsers.parse(bad)


def test_an_unexpected_encoding_is_refused_with_the_line():
    data = "Comment: Café\n".encode("latin-1")
    head = (SAMPLES / "crystaldiskmark/cdm-8.0.1-wd-blue.txt").read_bytes()
    with pytest.raises(parsers.ParseError, match=r"line 26: byte \d+ is not utf-8"):
        parsers.decode(head.split(b"Comment:")[0] + data, "latin1.txt")
    with pytest.raises(parsers.ParseError, match="NUL character"):
        parsers.decode(b"abc\x00\x01\x02\x03def", "binary")


def test_a_file_over_the_limit_is_refused_before_it_is_read_as_text():
    big = b"x" * (parsers.MAX_INPUT_BYTES + 1)
    with pytest.raises(parsers.ParseError, match="larger than 16777216 bytes"):
        parsers.decode(big, "big.txt")


def test_phoronix_composite_twins_make_one_record_per_option_set():
    # Written from pts/fio-2.1.0's definitions (tests/samples/README.md):
    # "MB/s" 357 is fio's MiB/s, 1.2 is its KiB/s / 1000; IOPS as printed.
    result = parse("pts/fio-2.1.0-docs.xml")
    assert result["format"] == "pts-composite"
    assert result["tool_version"] == "Phoronix Test Suite pts/fio-2.1.0"
    rnd, seq = result["records"]
    assert (rnd["direction"], rnd["iops"], rnd["bw_bytes"]) == (
        "read",
        91400,
        357 * 2**20,
    )
    assert rnd["options"]["trials_iops"] == "90900:91600:91700"
    assert {k: rnd["options"][k] for k in ("rw", "bs", "iodepth", "ioengine")} == {
        "rw": "randread",
        "bs": "4k",
        "iodepth": "64",
        "ioengine": "libaio",
    }
    assert (seq["direction"], seq["bw_bytes"], seq["iops"]) == (
        "write",
        1228800,
        None,
    )
    assert seq["options"]["direct"] == "0"
    assert "KVM" in result["meta"]["software"]


def test_phoronix_file_of_two_systems_is_refused_naming_them():
    text = (SAMPLES / "pts/fio-2.1.0-docs.xml").read_text()
    second = text[text.index("  <System>") : text.index("  <Result>")]
    text = text.replace(second, second + second.replace("vm-nvme", "host-nvme"), 1)
    with pytest.raises(parsers.ParseError, match=r"2 systems \(vm-nvme, host-nvme\)"):
        parsers.parse(text)


def test_fio_plot_result_is_the_suites_rnd4k_q32t1():
    # louwrentius/fio-plot's HPDL380G8-H420i-Crucial-MX200/randread-32-1.json:
    # fio-3.1 JSON without bw_bytes ("bw" in KiB/s), io_bytes in bytes.
    result = parse("fio/fioplot-3.1-randread-32-1.json")
    (rec,) = result["records"]
    assert (rec["iops"], rec["bw_bytes"], rec["io_bytes"], rec["runtime_s"]) == (
        47336.277729,
        189345 * 1024,
        11633557504,
        60.001,
    )
    assert (rec["clat_mean_ns"], rec["clat_p99_ns"], rec["lat_mean_ns"]) == (
        670900.075183,
        847872,
        674672.191171,
    )
    options = rec["options"]
    assert workload.identify("fio", ["read"], options) == "fio-rand-read-4k-q32t1"
    assert workload.differences(options, {"ioengine": "libaio", "direct": "1"}) == [
        "file size not recorded",
        "runtime not recorded",
    ]
