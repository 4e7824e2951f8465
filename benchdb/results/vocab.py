"""Django ``TextChoices`` and every facet list, built from the agent's vocabularies.

The tuples and the table of settings (``benchdb_agent.vocab.SETTINGS``) live in
the agent so the agent (stdlib only) and the server share one definition; this
module dresses them as TextChoices and derives each list the server needs
(facets, ORM paths, labels, the fields a run is shown with).  A module that
needs "the facets" imports them from here, never lists them again: a setting
added to the agent's table reaches filters, menus, exports and the API.
"""

from collections.abc import Callable

from django.db import models

from benchdb_agent import vocab as _agent


def _choices(name: str, vocabulary) -> type[models.TextChoices]:
    members = [
        (value.upper().replace("-", "_").replace(".", "_"), (value, label))
        for value, label in vocabulary
    ]
    return models.TextChoices(name, members)


# name -> TextChoices of every closed set (``Role`` for ``role``, ...).
CHOICES = {
    name: _choices(name.title().replace("_", ""), vocabulary)
    for name, vocabulary in _agent.VOCABULARIES.items()
}
Role = CHOICES["role"]
Platform = CHOICES["platform"]
Virtualization = CHOICES["virtualization"]
CacheMode = CHOICES["cache_mode"]
AioMode = CHOICES["aio_mode"]
ImageFormat = CHOICES["image_format"]
StorageBackend = CHOICES["storage_backend"]
DiskBus = CHOICES["disk_bus"]
DiskType = CHOICES["disk_type"]
RaidLevel = CHOICES["raid_level"]
Source = CHOICES["source"]
Visibility = CHOICES["visibility"]
Direction = CHOICES["direction"]
Tool = CHOICES["tool"]

SETTINGS = _agent.SETTINGS
# Short words for each setting (menus, filter chips, the compare table).
LABELS = _agent.LABELS
# The facets people filter runs by, in menu order: field name -> choices.
FACETS = {name: CHOICES[name] for name in _agent.facets("run")}
HARDWARE_FACETS = {name: CHOICES[name] for name in _agent.facets("hardware")}
# The settings a run keeps as columns (its own or its hardware's), in order.
COLUMNS = tuple(s.name for s in SETTINGS if s.column)
# A run's environment as the run list shows it (its own columns, not its
# hardware's, not where its figures came from).
RUN_ENVIRONMENT = tuple(s.name for s in SETTINGS if s.column == "run" and s.environment)
# Tags that repeat a column a run is shown with (cache_mode=none).
COLUMN_TAGS = frozenset(s.name for s in SETTINGS if s.tag and s.column)
# The virtual disk's layout: cache-mode groups share it, similar systems may
# be narrowed by it (``benchdb_agent.vocab.LAYOUT``).
LAYOUT = _agent.LAYOUT
# The cache modes QEMU runs, in their order (``benchdb_agent.vocab``).
CACHE_MODES = _agent.CACHE_MODES


def path(name: str) -> str:
    """The ORM path from Run of a setting kept as a column."""
    setting = next(s for s in SETTINGS if s.name == name)
    if setting.column == "run":
        return name
    if setting.vocabulary is None:
        return f"hardware__{name}__name"  # a lookup table: CpuModel, DiskModel
    return f"hardware__{name}"


# Browse facets: name -> ORM path from Run.
FACET_PATHS = {name: path(name) for name in (*FACETS, *HARDWARE_FACETS)}
# Every setting kept as a column: name -> ORM path from Run.
COLUMN_PATHS = {name: path(name) for name in COLUMNS}


def _shown(s: _agent.Setting) -> Callable:
    """How the compare table shows a setting of a run: its label for a
    closed set, yes/no for a yes/no column, the text otherwise."""
    if s.vocabulary is _agent.YES_NO:
        return lambda r: {True: "yes", False: "no"}.get(getattr(r, s.name), "")
    if s.column == "run":
        if s.vocabulary is None:
            return lambda r: getattr(r, s.name)
        return lambda r: getattr(r, f"get_{s.name}_display")()
    if s.vocabulary is None:
        return lambda r: str(getattr(r.hardware, s.name) or "") if r.hardware else ""
    return lambda r: (
        getattr(r.hardware, f"get_{s.name}_display")() if r.hardware else ""
    )


# What describes a run's environment, in reading order: (label, getter).
DESCRIPTION = [(s.label, _shown(s)) for s in SETTINGS if s.column and s.environment]
