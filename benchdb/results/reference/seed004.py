"""Seed 004: Xen PV against native on one machine ("Мифические тормоза диска на Xen").

A hosting company's blog post: an Intel Core 2 Quad Q6600, "some SATA
Samsung" disk, the same partition measured natively (1 CPU, 256 MB RAM,
kernel 2.6.18-164.6.1.el5) and from a Xen PV guest (1 CPU, 256 MB, domU and
dom0 kernel 2.6.18-164.el5xen, the disk given to the guest as phy).  Not the
agent's suite: bonnie++ 1.96 block figures and the time to cpio the Linux
2.6.26 sources, so these tests are marked not comparable with it.
"""

from __future__ import annotations

SEED = "004"
CITATION = (
    "Мифические тормоза диска на Xen (the mythical Xen disk slowness), TrueVDS "
    "company blog post with unixbench, bonnie++ and cpio archive timings"
)
KIB = 1024  # bonnie++'s K/sec

# run -> (bonnie block out K/s, rewrite K/s, block in K/s, seeks/s, cpio real s)
FIGURES = {
    "native": (64203, 29238, 68316, "144.5", "30.247"),
    "xen-pv": (65675, 29532, 68298, "134.1", "32.396"),
}

# (test id, title, direction, metric, index in FIGURES, K/sec or /sec -> unit)
BONNIE = (
    (
        "bonnie-block-write",
        "bonnie++ sequential output, block",
        "write",
        "bw_bytes",
        0,
        lambda v: v * KIB,
    ),
    ("bonnie-rewrite", "bonnie++ rewrite", "write", "bw_bytes", 1, lambda v: v * KIB),
    (
        "bonnie-block-read",
        "bonnie++ sequential input, block",
        "read",
        "bw_bytes",
        2,
        lambda v: v * KIB,
    ),
    ("bonnie-seeks", "bonnie++ random seeks", "read", "iops", 3, float),
)


def bundles() -> list:
    from .bundles import figure, published_bundle

    out = []
    for run, figures in FIGURES.items():
        opts = {"version": "1.96", "size": "1G", "as_published": "K/sec, /sec"}
        tests = [
            figure(
                test_id,
                title,
                direction,
                SEED,
                approximate=False,
                comparable=False,
                group="bonnie++",
                options=opts,
                **{metric: scale(figures[index])},
            )
            for test_id, title, direction, metric, index, scale in BONNIE
        ]
        tests.append(
            figure(
                "archive-linux-2.6.26-cpio",
                "cpio of the Linux 2.6.26 sources (about 320 MB, 24,000 files), "
                "caches dropped: real time",
                "read",
                SEED,
                approximate=False,
                comparable=False,
                group="archive",
                options={"command": "time (find linux-2.6.26 | cpio -o > /dev/null)"},
                runtime_s=float(figures[4]),
            )
        )
        native = run == "native"
        out.append(
            published_bundle(
                SEED,
                run,
                title="Core 2 Quad Q6600, SATA disk: "
                + ("native" if native else "Xen PV guest"),
                role="host" if native else "guest",
                pair_id="seed-004-q6600",
                citation=CITATION,
                notes=(
                    "The post concludes there is no Xen disk slowness: bonnie++ is "
                    "close either way and the cpio archive takes just under 7% "
                    "longer in the guest. Each figure is a single run: no spread "
                    "is known, so no difference can be called significant."
                ),
                environment={
                    "cpu": {"model": "Intel Core 2 Quad Q6600 @ 2.40GHz", "threads": 1},
                    "memory_bytes": 256 * 2**20,
                    "os": {
                        "kernel": "2.6.18-164.6.1.el5"
                        if native
                        else "2.6.18-164.el5xen"
                    },
                },
                tags={
                    "disk_type": "hdd",
                    "disk_model": "Samsung SATA (model not given)",
                }
                if native
                else {
                    "platform": "xen",
                    "virtualization": "xen-pv",
                    "storage_backend": "passthrough",
                    "disk_bus": "xen-blkfront",
                    "disk_type": "hdd",
                    "disk_model": "Samsung SATA (model not given)",
                },
                tests=tests,
            )
        )
    return out
