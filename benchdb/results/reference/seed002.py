"""Seed 002: native, passthrough, LVM and a raw file on ext4 (Proxmox VE 5.2).

A French article comparing three local disks (an HGST HUH728080ALE640 SATA
HDD, a Samsung 850 EVO SATA SSD, an Intel Optane 900P 280 GB on PCIe 3.0 x4)
on an Asus Z10PE-D16 with two Xeon E5-2609 v3 and 64 GB of RAM.  Each disk
was measured on the host, then from a KVM guest (Debian 9, 2 cores, 8 GB) as
a passed-through physical disk, as a virtual disk on LVM and as a raw file on
ext4 (64 GB).  fio, 256 KiB sequential and 4 KiB random, iodepth 1 to 256.

The article gives its figures in words, read off its charts ("about 190 MB/s",
"up to 950 IOPS"): every figure here is one approximate record, the maximum
or plateau the text states.  Where the text gives no number (the raw file's
cached sequential reads "fly into space"), there is no record.
"""

from __future__ import annotations

SEED = "002"
CITATION = (
    "Virtualisation: pertes de performance des disques locaux (HDD, SSD, NVMe) "
    "sous Proxmox VE 5.2, native vs passthrough vs LVM vs RAW (French article)"
)
MB = 10**6  # the article's "Mo/s"

DISKS = {
    "hdd": ("HGST HUH728080ALE640", "hdd"),
    "ssd": ("Samsung SSD 850 EVO", "sata-ssd"),
    "optane": ("Intel Optane SSD 900P 280GB", "optane"),
}
LAYOUTS = {
    "native": ("host", "native"),
    "passthrough": ("guest", "passthrough"),
    "lvm": ("guest", "lvm"),
    "raw": ("guest", "file"),
}
TESTS = {
    "seq-read-256k": ("Sequential read 256 KiB (max over iodepth)", "read", "bw_bytes"),
    "seq-write-256k": (
        "Sequential write 256 KiB (max over iodepth)",
        "write",
        "bw_bytes",
    ),
    "rand-read-4k": ("Random read 4 KiB (max over iodepth)", "read", "iops"),
    "rand-write-4k": ("Random write 4 KiB (max over iodepth)", "write", "iops"),
}

# (disk, layout, test) -> (value in the metric's unit, the text's words)
FIGURES = {
    ("hdd", "native", "seq-read-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "passthrough", "seq-read-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "lvm", "seq-read-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "native", "seq-write-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "passthrough", "seq-write-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "lvm", "seq-write-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "raw", "seq-write-256k"): (190 * MB, "environ 190 Mo/s"),
    ("hdd", "raw", "rand-read-4k"): (950, "jusqu'à 950 IOPS"),
    ("hdd", "lvm", "rand-read-4k"): (450, "jusqu'à 450 IOPS"),
    ("hdd", "native", "rand-read-4k"): (200, "environ 200 IOPS"),
    ("hdd", "passthrough", "rand-read-4k"): (200, "environ 200 IOPS"),
    ("hdd", "lvm", "rand-write-4k"): (400, "jusqu'à 400 IOPS"),
    ("hdd", "raw", "rand-write-4k"): (330, "~330 IOPS"),
    ("hdd", "native", "rand-write-4k"): (290, "290 IOPS"),
    ("hdd", "passthrough", "rand-write-4k"): (290, "290 IOPS"),
    ("ssd", "native", "seq-read-256k"): (370 * MB, "370 Mo/s sous une charge élevée"),
    ("ssd", "passthrough", "seq-read-256k"): (
        370 * MB,
        "370 Mo/s sous une charge élevée",
    ),
    ("ssd", "lvm", "seq-read-256k"): (190 * MB, "190 Mo/s"),
    ("ssd", "native", "seq-write-256k"): (100 * MB, "100 Mo/s"),
    ("ssd", "passthrough", "seq-write-256k"): (100 * MB, "100 Mo/s"),
    ("ssd", "lvm", "seq-write-256k"): (100 * MB, "100 Mo/s"),
    ("ssd", "raw", "seq-write-256k"): (100 * MB, "100 Mo/s"),
    ("ssd", "passthrough", "rand-read-4k"): (30000, "seulement 30 000 IOPS"),
    ("ssd", "lvm", "rand-read-4k"): (30000, "seulement 30 000 IOPS"),
    ("ssd", "raw", "rand-read-4k"): (30000, "seulement 30 000 IOPS"),
    ("ssd", "native", "rand-write-4k"): (4200, "jusqu'à 4 200 IOPS"),
    ("ssd", "raw", "rand-write-4k"): (5500, "5 500 IOPS"),
    ("optane", "passthrough", "seq-write-256k"): (2150 * MB, "2 150 Mo/s"),
    ("optane", "lvm", "seq-write-256k"): (2150 * MB, "2 150 Mo/s"),
    ("optane", "raw", "seq-write-256k"): (2150 * MB, "2 150 Mo/s"),
    ("optane", "native", "seq-write-256k"): (1700 * MB, "environ 1 700 Mo/s"),
    ("optane", "native", "rand-read-4k"): (200000, "près de 200 000 IOPS"),
    ("optane", "passthrough", "rand-read-4k"): (35000, "limités à 35 000 IOPS"),
    ("optane", "lvm", "rand-read-4k"): (35000, "limités à 35 000 IOPS"),
    ("optane", "raw", "rand-read-4k"): (35000, "limités à 35 000 IOPS"),
    ("optane", "native", "rand-write-4k"): (190000, "environ 190 000 IOPS"),
    ("optane", "passthrough", "rand-write-4k"): (35000, "35 000 IOPS"),
    ("optane", "lvm", "rand-write-4k"): (35000, "35 000 IOPS"),
    ("optane", "raw", "rand-write-4k"): (35000, "35 000 IOPS"),
}


def bundles() -> list:
    from .bundles import figure, published_bundle

    out = []
    for disk, (model, disk_type) in DISKS.items():
        for layout, (role, backend) in LAYOUTS.items():
            tests = []
            for test, (title, direction, metric) in TESTS.items():
                found = FIGURES.get((disk, layout, test))
                if found is None:
                    continue
                value, words = found
                rw = ("" if test.startswith("seq") else "rand") + direction
                tests.append(
                    figure(
                        f"fio-{test}",
                        title,
                        direction,
                        SEED,
                        group="fio",
                        options={
                            "rw": rw,
                            "bs": test.rsplit("-", 1)[1],
                            "iodepth": "1-256",
                            "as_published": words,
                        },
                        **{metric: value},
                    )
                )
            tags = {
                "disk_model": model,
                "disk_type": disk_type,
                "raid_level": "none",
                "disk_count": "1",
                "hypervisor_version": "Proxmox VE 5.2",
            }
            if role == "guest":
                tags.update(
                    {
                        "platform": "proxmox",
                        "virtualization": "kvm",
                        "storage_backend": backend,
                        "image_format": "raw",
                        "host_filesystem": "ext4" if backend == "file" else "",
                    }
                )
                tags = {k: v for k, v in tags.items() if v}
            name = {
                "native": "on the host",
                "passthrough": "passed through to a KVM guest",
                "lvm": "KVM guest disk on LVM",
                "raw": "KVM guest, raw file on ext4",
            }
            out.append(
                published_bundle(
                    SEED,
                    f"{disk}-{layout}",
                    title=f"{model}, {name[layout]} (Proxmox VE 5.2)",
                    role=role,
                    pair_id=f"seed-002-{disk}",
                    citation=CITATION,
                    notes=(
                        "Figures as the article states them in words, read off its "
                        "charts: maxima or plateaus over iodepth 1-256."
                    ),
                    environment={
                        "cpu": {"model": "Intel Xeon E5-2609 v3", "sockets": 2},
                        "memory_bytes": 64 * 2**30 if role == "host" else 8 * 2**30,
                        "os": {
                            "name": "Proxmox VE 5.2" if role == "host" else "Debian 9"
                        },
                    },
                    tags=tags,
                    tests=tests,
                )
            )
    return out
