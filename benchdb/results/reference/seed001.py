"""Seed 001: dd with conv=fdatasync in each KVM cache mode (CentOS 7).

"KVM不同cache类型的性能测试", a wiki page (virtualization/kvm, last changed
2019-04-16).  One VM, a qcow2 image (20 GiB virtual) on a RAID10 of four
2 TB disks behind a controller with 512 MB cache and a battery; the disk's
top speed is given as 330 MB/s.  Every mode was run five times (writeback
six) with ``dd bs=1M count=1024 if=/dev/zero of=1gb.test conv=fdatasync``;
the lines below are the printed ones, verbatim.

The page sums the five modes up in a chart (its section 4.6) whose figures
its text never states: the source publishes no mean, so none is shown as
the source's beside ours.  The printed rates' arithmetic mean (192.2 MB/s
for cache=none, against our geometric mean of 191.0) is a reader's sum of
rounded figures, not the source's.
"""

from __future__ import annotations

SEED = "001"
CITATION = (
    "KVM不同cache类型的性能测试 (KVM cache mode performance test), personal "
    "wiki page virtualization/kvm/缓存性能测试, last changed 2019-04-16"
)
COMMAND = "dd bs=1M count=1024 if=/dev/zero of=1gb.test conv=fdatasync"
TEST_ID = "dd-write-1g-zero-fdatasync"
TEST_TITLE = "dd write 1 GiB of zeros, 1 MiB blocks, conv=fdatasync"

DD_LINES = {
    "none": [
        "1073741824 bytes (1.1 GB) copied, 6.8543 s, 157 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.83386 s, 184 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.40407 s, 199 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.25176 s, 204 MB/s",
        "1073741824 bytes (1.1 GB) copied, 4.94201 s, 217 MB/s",
    ],
    "writethrough": [
        "1073741824 bytes (1.1 GB) copied, 7.44214 s, 144 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.90264 s, 182 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.85222 s, 183 MB/s",
        "1073741824 bytes (1.1 GB) copied, 4.9245 s, 218 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.6933 s, 189 MB/s",
    ],
    "writeback": [
        "1073741824 bytes (1.1 GB) copied, 6.30278 s, 170 MB/s",
        "1073741824 bytes (1.1 GB) copied, 6.19481 s, 173 MB/s",
        "1073741824 bytes (1.1 GB) copied, 6.06488 s, 177 MB/s",
        "1073741824 bytes (1.1 GB) copied, 6.38592 s, 168 MB/s",
        "1073741824 bytes (1.1 GB) copied, 6.20265 s, 173 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.61563 s, 191 MB/s",
    ],
    "directsync": [
        "1073741824 bytes (1.1 GB) copied, 5.10843 s, 210 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.92729 s, 181 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.67731 s, 189 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.69663 s, 188 MB/s",
        "1073741824 bytes (1.1 GB) copied, 5.46388 s, 197 MB/s",
    ],
    "unsafe": [
        "1073741824 bytes (1.1 GB) copied, 1.16476 s, 922 MB/s",
        "1073741824 bytes (1.1 GB) copied, 0.96282 s, 1.1 GB/s",
        "1073741824 bytes (1.1 GB) copied, 0.915939 s, 1.2 GB/s",
        "1073741824 bytes (1.1 GB) copied, 0.814352 s, 1.3 GB/s",
        "1073741824 bytes (1.1 GB) copied, 0.897145 s, 1.2 GB/s",
    ],
}

UNSAFE_WARNING = [
    {
        "code": "cache-unsafe",
        "message": "cache=unsafe ignores the guest's flushes: conv=fdatasync returns "
        "before the data reaches the disk, so these are not disk figures",
        "test_id": None,
    }
]


def bundles() -> list:
    from .bundles import published_bundle

    out = []
    for mode, lines in DD_LINES.items():
        repeats = [
            {
                "index": i,
                "records": [],
                "raw": {
                    "format": "dd",
                    "encoding": "plain",
                    "direction": "write",
                    "data": f"1024+0 records in\n1024+0 records out\n{line}\n",
                },
            }
            for i, line in enumerate(lines)
        ]
        out.append(
            published_bundle(
                SEED,
                mode,
                title=f"KVM on CentOS 7, qcow2 on RAID10, cache={mode} (dd 1 GiB)",
                citation=CITATION,
                notes=(
                    "The author expected writeback to beat every mode but unsafe; "
                    "on this server none was fastest. unsafe's figures are not disk "
                    "figures: the host ignores the guest's flushes."
                ),
                environment={"os": {"name": "CentOS 7 (guest)"}},
                warnings=UNSAFE_WARNING if mode == "unsafe" else [],
                tags={
                    "platform": "libvirt",
                    "virtualization": "kvm",
                    "cache_mode": mode,
                    "image_format": "qcow2",
                    "storage_backend": "file",
                    "disk_bus": "virtio-blk",
                    "disk_type": "hdd",
                    "raid_level": "raid10",
                    "disk_count": "4",
                    "controller_cache": str(512 * 2**20),
                    "controller_battery": "yes",
                },
                tests=[
                    {
                        "test_id": TEST_ID,
                        "tool": "dd",
                        "direction": "write",
                        "title": TEST_TITLE,
                        "group": "dd",
                        "options": {
                            "bs": "1M",
                            "count": "1024",
                            "if": "/dev/zero",
                            "conv": "fdatasync",
                        },
                        "command": COMMAND.split(),
                        "comparable": True,
                        "comparability_key": f"published-{SEED}|{TEST_ID}",
                        "repeats": repeats,
                    }
                ],
            )
        )
    return out
