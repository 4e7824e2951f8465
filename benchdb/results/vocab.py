"""Django ``TextChoices`` built from the agent's vocabularies.

The tuples live in ``benchdb_agent.vocab`` so the agent (stdlib only) and the
server share one definition; this module only dresses them as TextChoices.
"""

from django.db import models

from benchdb_agent import vocab as _agent


def _choices(name: str, vocabulary) -> type[models.TextChoices]:
    members = [
        (value.upper().replace("-", "_").replace(".", "_"), (value, label))
        for value, label in vocabulary
    ]
    return models.TextChoices(name, members)


Role = _choices("Role", _agent.ROLE)
Platform = _choices("Platform", _agent.PLATFORM)
Virtualization = _choices("Virtualization", _agent.VIRTUALIZATION)
CacheMode = _choices("CacheMode", _agent.CACHE_MODE)
AioMode = _choices("AioMode", _agent.AIO_MODE)
ImageFormat = _choices("ImageFormat", _agent.IMAGE_FORMAT)
StorageBackend = _choices("StorageBackend", _agent.STORAGE_BACKEND)
DiskBus = _choices("DiskBus", _agent.DISK_BUS)
DiskType = _choices("DiskType", _agent.DISK_TYPE)
RaidLevel = _choices("RaidLevel", _agent.RAID_LEVEL)
Source = _choices("Source", _agent.SOURCE)
Visibility = _choices("Visibility", _agent.VISIBILITY)
Direction = _choices("Direction", _agent.DIRECTION)
Tool = _choices("Tool", _agent.TOOL)

# The facets people filter runs by, in menu order: field name -> choices.
FACETS = {
    "role": Role,
    "platform": Platform,
    "virtualization": Virtualization,
    "cache_mode": CacheMode,
    "aio_mode": AioMode,
    "image_format": ImageFormat,
    "storage_backend": StorageBackend,
    "disk_bus": DiskBus,
    "source": Source,
}
HARDWARE_FACETS = {
    "disk_type": DiskType,
    "raid_level": RaidLevel,
}
