"""Controlled vocabularies shared by the agent and the server.

One definition of each closed set: the agent validates ``--tag`` values and
detection output against these tuples, and the server builds its Django
``TextChoices`` from the very same tuples (``benchdb/results/vocab.py``), so a
value the agent writes is always a value the server accepts.

Each vocabulary is a tuple of ``(value, label)`` pairs.  Values are short,
lowercase and stable: they are stored in the database and appear in URLs, so
never rename one; add a new value instead.  ``unknown`` means "not declared and
not detectable", which is different from a value being absent from the run.
"""

ROLE = (
    ("guest", "Guest (virtual machine)"),
    ("host", "Host (native baseline)"),
)

PLATFORM = (
    ("proxmox", "Proxmox VE"),
    ("libvirt", "libvirt / virt-manager"),
    ("qemu", "Plain QEMU"),
    ("xen", "Xen (xl)"),
    ("xcp-ng", "XCP-ng / XenServer"),
    ("esxi", "VMware ESXi"),
    ("hyper-v", "Microsoft Hyper-V"),
    ("virtualbox", "VirtualBox"),
    ("cloud", "Public cloud"),
    ("bare-metal", "Bare metal"),
    ("other", "Other"),
    ("unknown", "Unknown"),
)

VIRTUALIZATION = (
    ("kvm", "KVM"),
    ("qemu-tcg", "QEMU TCG (software emulation)"),
    ("xen-pv", "Xen PV"),
    ("xen-hvm", "Xen HVM / PVH"),
    ("xen-dom0", "Xen dom0"),
    ("vmware", "VMware"),
    ("hyper-v", "Hyper-V"),
    ("virtualbox", "VirtualBox"),
    ("container", "Container"),
    ("other", "Other hypervisor"),
    ("none", "None (bare metal)"),
    ("unknown", "Unknown"),
)

CACHE_MODE = (
    ("none", "none"),
    ("writethrough", "writethrough"),
    ("writeback", "writeback"),
    ("directsync", "directsync"),
    ("unsafe", "unsafe"),
    ("default", "default (left to the hypervisor)"),
    ("unknown", "unknown"),
)

AIO_MODE = (
    ("threads", "threads"),
    ("native", "native"),
    ("io_uring", "io_uring"),
    ("default", "default (left to the hypervisor)"),
    ("unknown", "unknown"),
)

IMAGE_FORMAT = (
    ("raw", "raw"),
    ("qcow2", "qcow2"),
    ("vmdk", "VMDK"),
    ("vhdx", "VHDX"),
    ("vhd", "VHD"),
    ("vdi", "VDI"),
    ("none", "none (block device)"),
    ("unknown", "unknown"),
)

STORAGE_BACKEND = (
    ("file", "File on a filesystem"),
    ("lvm", "LVM"),
    ("lvm-thin", "LVM-thin"),
    ("zfs", "ZFS zvol"),
    ("ceph-rbd", "Ceph RBD"),
    ("nfs", "NFS"),
    ("iscsi", "iSCSI"),
    ("passthrough", "Physical disk passthrough"),
    ("cloud-volume", "Cloud network volume"),
    ("native", "Native (no virtualization)"),
    ("other", "Other"),
    ("unknown", "unknown"),
)

DISK_BUS = (
    ("virtio-blk", "virtio-blk"),
    ("virtio-scsi", "virtio-scsi"),
    ("sata", "SATA / AHCI"),
    ("ide", "IDE"),
    ("nvme", "NVMe"),
    ("scsi", "SCSI (other HBA)"),
    ("xen-blkfront", "Xen blkfront"),
    ("vmware-pvscsi", "VMware PVSCSI"),
    ("hyperv-storvsc", "Hyper-V storvsc"),
    ("usb", "USB"),
    ("other", "Other"),
    ("unknown", "unknown"),
)

DISK_TYPE = (
    ("hdd", "HDD"),
    ("sata-ssd", "SATA/SAS SSD"),
    ("nvme-ssd", "NVMe SSD"),
    ("optane", "Optane / SCM"),
    ("network", "Network / cloud volume"),
    ("ram", "RAM disk"),
    ("unknown", "unknown"),
)

# Virtualization types that are not a virtual machine: under any other the
# agent sees a virtual disk, so a "host" run there is not bare metal
# (dom0 is Xen's own host domain, with the real disks).
NOT_A_VIRTUAL_MACHINE = ("none", "unknown", "container", "xen-dom0")


def is_virtual_machine(kind) -> bool:
    """Whether a detected virtualization type is a virtual machine."""
    return bool(kind) and kind not in NOT_A_VIRTUAL_MACHINE


RAID_LEVEL = (
    ("none", "none"),
    ("raid0", "RAID 0"),
    ("raid1", "RAID 1"),
    ("raid5", "RAID 5"),
    ("raid6", "RAID 6"),
    ("raid10", "RAID 10"),
    ("raidz1", "RAID-Z1"),
    ("raidz2", "RAID-Z2"),
    ("other", "Other"),
    ("unknown", "unknown"),
)

SOURCE = (
    ("measured", "Measured by benchdb-agent"),
    ("imported", "Imported from existing tool output"),
    ("published", "Published in a document"),
)

VISIBILITY = (
    ("public", "Public"),
    ("unlisted", "Unlisted (link only)"),
    ("private", "Private (owner only)"),
)

DIRECTION = (
    ("read", "read"),
    ("write", "write"),
    ("trim", "trim"),
)

TOOL = (
    ("fio", "fio"),
    ("ioping", "ioping"),
    ("dd", "dd"),
    ("other", "other (outside the standard suite)"),
)

# Tags a user may pass with ``--tag key=value``: the key, and the vocabulary its
# value must come from (None for free text, bounded in length by the schema).
TAG_VOCABULARIES = {
    "platform": PLATFORM,
    "virtualization": VIRTUALIZATION,
    "cache_mode": CACHE_MODE,
    "aio_mode": AIO_MODE,
    "image_format": IMAGE_FORMAT,
    "storage_backend": STORAGE_BACKEND,
    "disk_bus": DISK_BUS,
    "disk_type": DISK_TYPE,
    "raid_level": RAID_LEVEL,
    "iothread": (("yes", "yes"), ("no", "no"), ("unknown", "unknown")),
    "hypervisor_version": None,
    "host_filesystem": None,
    "guest_filesystem": None,
    "disk_model": None,
    "raid_controller": None,
    "controller_cache": None,
    "controller_battery": (("yes", "yes"), ("no", "no"), ("unknown", "unknown")),
    "disk_count": None,
    # A Windows guest's virtio-win storage driver (viostor or vioscsi)
    # DriverVersion: results swing by 2x between versions (virtio-win#42).
    "virtio_win_version": None,
    "note": None,
}

# Power-loss safety of each QEMU cache mode (qemu-options.hx: cache.direct,
# cache.no-flush, cache.writeback).  "flushes" modes are safe for a guest that
# issues flushes (a modern filesystem does); "unsafe" ignores the guest's
# flushes, so data the guest believed durable can be lost on host power loss.
CACHE_MODE_SAFETY = {
    "none": ("safe", "O_DIRECT on the host; guest flushes reach the disk."),
    "writethrough": (
        "safe",
        "Every write is synced on the host; the host page cache serves reads.",
    ),
    "writeback": (
        "safe",
        "The host page cache holds writes until the guest flushes; reads may "
        "come from host RAM.",
    ),
    "directsync": ("safe", "O_DIRECT and a sync on every write: the slowest, safest."),
    "unsafe": (
        "unsafe",
        "Guest flushes are ignored: host power loss can lose data the guest "
        "believed written.",
    ),
}


def values(vocabulary) -> tuple:
    """The stored values of a vocabulary, in order."""
    return tuple(value for value, _label in vocabulary)
