"""Seed 000: ioping per Proxmox cache mode on an HP DL360 G8 (no numbers).

A Russian blog post, "Зависимость производительности дисков Proxmox ВМ от
режима кеширования" (Proxmox VM disk performance by cache mode).  Its ioping
matrix (512 B, 4 KiB, 64 KiB, 1 MiB reads and -WWW writes, -L 4 MiB
sequential read and write, 10 requests each) is the standard profile's ioping
part.  Its results are charts only: the run records the environment and the
conclusions, with no figures.
"""

from __future__ import annotations

SEED = "000"
CITATION = (
    "Зависимость производительности дисков Proxmox ВМ от режима кеширования "
    "(Proxmox VM disk performance by cache mode), Russian blog post, ioping "
    "matrix on Proxmox VE 7.4.17"
)
NOTES = (
    "Proxmox VE 7.4.17 on an HP DL360 G8, Smart Array P420i with 1 GB cache and "
    "BBU, RAID5 of three 900 GB SAS 10k disks; an Ubuntu Server 20.04 VM with a "
    "second disk for the tests; ioping -c 10 with -s 512b/4k/64k/1024k reads, "
    "-WWW writes, and -L -s 4m. The post publishes charts only. Its conclusions: "
    "reads barely differ by mode up to 64 KiB; at 1 MiB writeback (unsafe) is "
    "about 15% faster than writeback; for writes default (no cache) is up to 10% "
    "ahead at 512 B and unsafe 25% more IOPS at 4 KiB; 4 MiB sequential reads "
    "differ up to fivefold (host cache: unsafe and writethrough fastest); "
    "4 MiB sequential writes are fastest with directsync. Data-loss risk per its "
    "table: default (no cache) and writeback only for async writes, directsync "
    "and writethrough none, writeback (unsafe) yes."
)


def bundles() -> list:
    from .bundles import published_bundle

    return [
        published_bundle(
            SEED,
            "dl360-raid5",
            title="Proxmox VE 7.4 on HP DL360 G8, RAID5 SAS 10k: ioping by cache mode",
            citation=CITATION,
            notes=NOTES,
            environment={"os": {"name": "Ubuntu Server 20.04 (guest)"}},
            tags={
                "platform": "proxmox",
                "virtualization": "kvm",
                "hypervisor_version": "Proxmox VE 7.4.17",
                "disk_type": "hdd",
                "raid_level": "raid5",
                "disk_count": "3",
                "raid_controller": "HP Smart Array P420i",
                "controller_cache": str(2**30),
                "controller_battery": "yes",
            },
            tests=[],
        )
    ]
