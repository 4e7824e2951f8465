"""Seed 003: a public cloud's network SSD volume, measured with fio.

A cloud provider's documentation page ("Тестирование производительности
дисков": testing disk performance), KVM-based virtual machines with network
SSD disks attached as /dev/vdd.  Six fio commands with their printed result
lines; the lines go through the agent's fio parser as they are.
"""

from __future__ import annotations

SEED = "003"
CITATION = (
    "Тестирование производительности дисков (testing disk performance), a public "
    "cloud provider's documentation page on network SSD disks"
)
COMMON = {
    "filename": "/dev/vdd",
    "direct": "1",
    "ioengine": "libaio",
    "runtime": "120",
    "time_based": "1",
    "group_reporting": "1",
}

# (test id, title, options, the printed fio lines)
TESTS = [
    (
        "fio-write-4k-q96t4",
        "Sequential write 4 KiB Q96T4 (IOPS)",
        {"name": "readio", "rw": "write", "bs": "4k", "iodepth": "96", "numjobs": "4"},
        """write: IOPS=39.7k, BW=155MiB/s (162MB/s)(5112MiB/33001msec); 0 zone resets
slat (usec): min=2, max=19776, avg= 5.25, stdev=47.15
clat (usec): min=874, max=5035.1k, avg=9677.38, stdev=40976.63
lat (usec): min=889, max=5035.1k, avg=9682.81, stdev=40976.66""",
    ),
    (
        "fio-randwrite-4k-q96t1",
        "Random write 4 KiB Q96T1 (IOPS)",
        {
            "name": "randwrite",
            "rw": "randwrite",
            "bs": "4k",
            "iodepth": "96",
            "numjobs": "1",
        },
        """write: IOPS=9596, BW=37.5MiB/s (39.3MB/s)(4499MiB/120011msec); 0 zone resets
slat (usec): min=2, max=338, avg= 5.21, stdev= 4.52
clat (usec): min=680, max=161320, avg=9996.54, stdev=10695.67
lat (usec): min=698, max=161323, avg=10001.94, stdev=10695.77""",
    ),
    (
        "fio-write-4m-q32t1",
        "Sequential write 4 MiB Q32T1 (bandwidth)",
        {"name": "writebw", "rw": "write", "bs": "4M", "iodepth": "32", "numjobs": "1"},
        """write: IOPS=112, BW=449MiB/s (471MB/s)(52.8GiB/120237msec); 0 zone resets
slat (usec): min=166, max=270963, avg=8814.82, stdev=10995.16
clat (msec): min=58, max=661, avg=276.06, stdev=28.21
lat (msec): min=60, max=679, avg=284.88, stdev=27.91""",
    ),
    (
        "fio-read-4k-q128t8",
        "Sequential read 4 KiB Q128T8 (IOPS)",
        {"name": "readio", "rw": "read", "bs": "4k", "iodepth": "128", "numjobs": "8"},
        """read: IOPS=62.2k, BW=243MiB/s (255MB/s)(28.5GiB/120008msec)
slat (usec): min=2, max=123901, avg= 6.88, stdev=151.96
clat (usec): min=859, max=168609, avg=16450.99, stdev=8226.23
lat (usec): min=877, max=168611, avg=16458.07, stdev=8229.16""",
    ),
    (
        "fio-read-4m-q32t1",
        "Sequential read 4 MiB Q32T1 (bandwidth)",
        {"name": "readbw", "rw": "read", "bs": "4M", "iodepth": "32", "numjobs": "1"},
        """read: IOPS=112, BW=449MiB/s (470MB/s)(52.7GiB/120227msec)
slat (usec): min=85, max=177850, avg=8878.47, stdev=9824.19
clat (msec): min=50, max=4898, avg=276.36, stdev=45.16
lat (msec): min=52, max=4898, avg=285.24, stdev=44.94""",
    ),
    (
        "fio-randread-4k-q16t8",
        "Random read 4 KiB Q16T8 (IOPS)",
        {
            "name": "randread",
            "rw": "randread",
            "bs": "4k",
            "iodepth": "16",
            "numjobs": "8",
        },
        """read: IOPS=17.0k, BW=66.4MiB/s (69.6MB/s)(7966MiB/120006msec)
slat (usec): min=2, max=114, avg= 9.05, stdev= 5.36
clat (usec): min=172, max=251507, avg=7519.93, stdev=6463.84
lat (usec): min=179, max=251511, avg=7529.25, stdev=6464.41""",
    ),
]


def command(options: dict) -> list:
    opts = {**options, **COMMON}
    args = ["fio"]
    for key in (
        "name",
        "filename",
        "direct",
        "rw",
        "bs",
        "ioengine",
        "iodepth",
        "runtime",
        "numjobs",
    ):
        args.append(f"--{key}={opts[key]}")
    return args + ["--time_based", "--group_reporting", "--eta-newline=1"]


def bundles() -> list:
    from .bundles import published_bundle

    tests = []
    for test_id, title, options, lines in TESTS:
        tests.append(
            {
                "test_id": test_id,
                "tool": "fio",
                "direction": "read" if "read" in options["rw"] else "write",
                "title": title,
                "group": "fio",
                "options": {**options, **COMMON},
                "command": command(options),
                "comparable": True,
                "comparability_key": f"published-{SEED}|{test_id}",
                "repeats": [
                    {
                        "index": 0,
                        "records": [],
                        "raw": {
                            "format": "fio-normal",
                            "encoding": "plain",
                            "data": lines + "\n",
                        },
                    }
                ],
            }
        )
    return [
        published_bundle(
            SEED,
            "network-ssd",
            title="Public cloud network SSD volume (KVM guest), fio recipes",
            citation=CITATION,
            notes=(
                "The document advises against write tests on the boot disk. The "
                "first recipe stopped after 33 s although it asks for 120 s; its "
                "figures are as printed. Throttling: the provider's limits are "
                "enforced in 100 ms slices, so bursts queue."
            ),
            tags={
                "platform": "cloud",
                "virtualization": "kvm",
                "storage_backend": "cloud-volume",
                "disk_bus": "virtio-blk",
                "disk_type": "network",
            },
            tests=tests,
        )
    ]
