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

from typing import NamedTuple, Optional

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

YES_NO = (("yes", "yes"), ("no", "no"), ("unknown", "unknown"))


class Setting(NamedTuple):
    """One thing that describes a run, declared once.

    ``name`` is the ``--tag`` key and the column; ``label`` the short words
    menus, filter chips and the compare table show; ``vocabulary`` its closed
    set (None: free text; ``YES_NO``: a yes/no/unknown column).  ``column``
    says where a run keeps it as a column lists show: ``run``, ``hardware``
    (a lookup table's name for ``disk_model`` and ``cpu_model``) or ``""``
    (kept in the run's tags, or folded into another column by ingest).
    ``tag``: a user may declare it.  ``host``: the host reads it for a guest
    run (``vm``, ``host-config``).  ``layout``: a closed setting of the
    virtual disk's layout, the same within a cache-mode group (except the
    cache mode itself) and offered to narrow similar systems by.
    ``environment``: False for where the figures came from (``source``).
    """

    name: str
    label: str
    vocabulary: Optional[tuple] = None
    column: str = "run"
    tag: bool = True
    host: bool = False
    layout: bool = False
    environment: bool = True


# Every setting, in reading order (the compare table's, the API's fields',
# the exports' columns', the browse menu's).  Every other list of facets, tags
# or labels, here and in the server, is a selection of this one: add a
# setting here and it reaches the tags, filters, menus, exports and API.
SETTINGS = (
    Setting("role", "Role", ROLE, tag=False),
    Setting("platform", "Platform", PLATFORM, host=True, layout=True),
    Setting("virtualization", "Virtualization", VIRTUALIZATION, host=True),
    Setting("hypervisor_version", "Hypervisor version"),
    Setting("os_name", "OS", tag=False),
    Setting("kernel", "Kernel", tag=False),
    Setting("cache_mode", "Cache mode", CACHE_MODE, host=True, layout=True),
    Setting("aio_mode", "AIO", AIO_MODE, host=True, layout=True),
    Setting("iothread", "I/O thread", YES_NO, host=True),
    Setting("image_format", "Image format", IMAGE_FORMAT, host=True, layout=True),
    Setting("storage_backend", "Storage", STORAGE_BACKEND, host=True, layout=True),
    Setting("disk_bus", "Bus", DISK_BUS, host=True, layout=True),
    Setting("guest_filesystem", "Guest filesystem"),
    Setting("host_filesystem", "Host filesystem", host=True),
    Setting("disk_model", "Disk", column="hardware"),
    Setting("disk_type", "Disk type", DISK_TYPE, column="hardware"),
    Setting("raid_level", "RAID", RAID_LEVEL, column="hardware"),
    Setting("cpu_model", "CPU", column="hardware", tag=False),
    Setting("raid_controller", "RAID controller", column=""),
    Setting("controller_cache", "Controller cache", column=""),
    Setting("controller_battery", "Controller battery", YES_NO, column=""),
    Setting("disk_count", "Disks", column=""),
    # A Windows guest's virtio-win storage driver (viostor or vioscsi)
    # DriverVersion: results swing by 2x between versions (virtio-win#42).
    Setting("virtio_win_version", "virtio-win version", column=""),
    Setting("note", "Note", column=""),
    Setting("source", "Source", SOURCE, tag=False, environment=False),
)
LABELS = {s.name: s.label for s in SETTINGS}

# Tags a user may pass with ``--tag key=value``: the key, and the vocabulary its
# value must come from (None for free text, bounded in length by the schema).
TAG_VOCABULARIES = {s.name: s.vocabulary for s in SETTINGS if s.tag}
# The tags the host reads for a guest run (all of them, when known).
HOST_TAGS = tuple(s.name for s in SETTINGS if s.host)
# The virtual disk's layout (see ``Setting.layout``).
LAYOUT = tuple(s.name for s in SETTINGS if s.layout)


def facets(column: str) -> dict:
    """The closed settings kept in ``column`` ("run" or "hardware") as a
    choice: name -> vocabulary, in reading order (the browse menu's facets)."""
    return {
        s.name: s.vocabulary
        for s in SETTINGS
        if s.column == column and s.vocabulary not in (None, YES_NO)
    }


# Every closed set by name (the API's /vocabularies/, the server's choices).
VOCABULARIES = {
    **facets("run"),
    **facets("hardware"),
    "visibility": VISIBILITY,
    "direction": DIRECTION,
    "tool": TOOL,
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


# The cache modes QEMU runs (a sweep's modes, a cache-mode report's columns),
# in the order of ``CACHE_MODE``.
CACHE_MODES = tuple(v for v in values(CACHE_MODE) if v not in ("default", "unknown"))
