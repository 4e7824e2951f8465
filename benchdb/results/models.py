"""What benchdb stores: runs of the benchmark suite and what they measured.

Units are fixed and carried in field names: bandwidth in bytes per second
(``bw_bytes``), latency in nanoseconds (``*_ns``), operations per second
(``iops``), sizes in bytes (``*_bytes``), durations in seconds (``*_s``).  A
metric is what the tool reported, converted exactly, or NULL: never estimated.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid

import orjson
from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.db import models, transaction
from django.db.backends.postgresql.operations import get_json_dumps
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from psycopg.types.json import Json

from benchdb.results import refresh
from benchdb.results.vocab import (
    FACETS,
    AioMode,
    CacheMode,
    Direction,
    DiskBus,
    DiskType,
    ImageFormat,
    Platform,
    RaidLevel,
    Role,
    Source,
    StorageBackend,
    Tool,
    Virtualization,
    Visibility,
)
from benchdb_agent.parsers import METRIC_KEYS

# Numeric metrics of one measurement record, in the units their names carry:
# the agent's record keys, so a parsed record maps onto columns one to one.
METRIC_FIELDS = METRIC_KEYS


# JSON columns read by orjson ------------------------------------------------
# A run's detail and page decode about 160 KB of statistics JSON (the run's
# and its baseline's): 1.4 ms in json.loads, 0.6 ms in orjson.  orjson
# reads floats to the same double (correctly rounded, as Python does) but an
# integer past 64 bits as a float, so text with an integer of 19 digits or
# more (found by one translate of its bytes) is left to json.loads, as is
# text orjson refuses (NaN, lone surrogates, 1e400).
# tests/results/test_json_reads.py holds read_json to json.loads.
_DIGIT_RUNS = bytes.maketrans(
    bytes(range(256)),
    bytes(
        ord("1") if chr(b).isdigit() and b < 128 else ord(".") if b == 46 else 32
        for b in range(256)
    ),
)
_DIGITS_19 = b"1" * 19
_LONG_INTEGER = b" " + _DIGITS_19


def read_json(text: str):
    """``json.loads(text)``, the same value, mostly read by orjson."""
    data = text.encode("utf-8", "surrogatepass")
    runs = data.translate(_DIGIT_RUNS)
    # Nineteen digits in a row are rare and cheap to look for; the search
    # for them after a space is ten times slower (bytes.find backtracks on
    # every digit), so it runs only where there are some.
    if _DIGITS_19 in runs and _LONG_INTEGER in b" " + runs:
        return json.loads(text)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(text)


class JSONField(models.JSONField):
    """Django's JSONField, its values read by ``read_json`` (the same value
    as Django's json.loads; what neither can read stays text, as Django
    leaves it).  Migrations see Django's own field."""

    def from_db_value(self, value, expression, connection):
        if isinstance(value, str) and self.decoder is None:
            try:
                return read_json(value)
            except json.JSONDecodeError:
                return value
        return super().from_db_value(value, expression, connection)

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class JSONTextField(JSONField):
    """A JSON document kept as the text it was written in: PostgreSQL's
    ``json``, not ``jsonb``.  For a document written once and read back
    whole, never searched in SQL (an uploaded bundle): ``jsonb`` parses it
    into its binary form on the way in and prints it again on the way out,
    about twice the server's CPU of ``json``, which only checks the syntax
    (bench/README.md, "Ingest at 50 bundles/s").  The same value is read
    back: the text as it came (key order, spacing and a number's spelling
    kept), read by ``read_json``.  Migrations see Django's JSONField (they
    import no live code); the column's type is set by SQL (migration 0029)."""

    def db_type(self, connection) -> str:
        return "json"

    def select_format(self, compiler, sql, params):
        # As text, for read_json (psycopg would decode json with json.loads).
        return f"({sql})::text", params

    def get_db_prep_value(self, value, connection, prepared=False):
        if not prepared:
            value = self.get_prep_value(value)
        return Json(value, dumps=get_json_dumps(self.encoder))


def hash_secret(secret: str) -> str:
    """SHA-256 of a token or owner key: the database never holds the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


class CpuModel(models.Model):
    """A CPU model name as the system reports it (open-ended lookup)."""

    name = models.CharField(max_length=200, unique=True)

    def __str__(self) -> str:
        return self.name


class DiskModel(models.Model):
    """A disk model name (open-ended lookup): "Samsung SSD 850 EVO 500GB"."""

    name = models.CharField(max_length=200, unique=True)

    def __str__(self) -> str:
        return self.name


class Hardware(models.Model):
    """The physical machine and disks under a run (the host's, for a guest).

    Rows are shared by every run on the same hardware: ``fingerprint`` is a
    hash of all the other fields, so ingest upserts instead of duplicating.
    """

    fingerprint = models.CharField(max_length=64, unique=True)
    cpu_model = models.ForeignKey(
        CpuModel, null=True, blank=True, on_delete=models.PROTECT
    )
    cpu_sockets = models.PositiveSmallIntegerField(null=True, blank=True)
    cpu_cores = models.PositiveIntegerField(null=True, blank=True)
    cpu_threads = models.PositiveIntegerField(null=True, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    disk_model = models.ForeignKey(
        DiskModel, null=True, blank=True, on_delete=models.PROTECT
    )
    disk_type = models.CharField(
        max_length=16, choices=DiskType.choices, default=DiskType.UNKNOWN
    )
    disk_count = models.PositiveSmallIntegerField(null=True, blank=True)
    disk_size_bytes = models.BigIntegerField(null=True, blank=True)
    raid_controller = models.CharField(max_length=200, blank=True)
    raid_level = models.CharField(
        max_length=16, choices=RaidLevel.choices, default=RaidLevel.UNKNOWN
    )
    controller_cache_bytes = models.BigIntegerField(null=True, blank=True)
    controller_battery = models.BooleanField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "hardware"
        constraints = [
            models.CheckConstraint(
                condition=Q(memory_bytes__isnull=True) | Q(memory_bytes__gte=0),
                name="%(app_label)s_%(class)s_memory_nonnegative",
            ),
            models.CheckConstraint(
                condition=Q(controller_cache_bytes__isnull=True)
                | Q(controller_cache_bytes__gte=0),
                name="%(app_label)s_%(class)s_cache_nonnegative",
            ),
        ]
        indexes = [
            # Browse facet "disk type" joins runs to hardware on this column.
            models.Index(fields=["disk_type"], name="results_hw_disk_type_idx"),
        ]

    def __str__(self) -> str:
        parts = [str(self.disk_model or ""), self.get_disk_type_display()]
        if self.raid_level not in (RaidLevel.UNKNOWN, RaidLevel.NONE):
            parts.append(self.get_raid_level_display())
        return " · ".join(p for p in parts if p)

    @classmethod
    def fingerprint_of(cls, fields: dict) -> str:
        """Stable hash of the hardware description (keys sorted)."""
        text = "|".join(f"{k}={fields.get(k)!s}" for k in sorted(fields))
        return hashlib.sha256(text.encode()).hexdigest()


# The visibilities that let anyone open a run by its id (unless hidden).
OPEN_VISIBILITIES = (Visibility.PUBLIC, Visibility.UNLISTED)


def readable_q(user=None, owner_key: str = "") -> Q:
    """Who may open a run: the one visibility rule, as a filter.

    Moderation is part of it.  Public and unlisted runs not hidden by the
    moderators: anyone.  Any run (private, hidden): its owner (the signed-in
    account, or whoever presents the run's owner key) and staff.  Every
    reader of a run's figures applies it (its page and detail, comparisons
    and their exports, saved links, baselines shown under a guest, a
    submission's status); lists, aggregates and the dump apply the narrower
    ``RunQuerySet.listed``, which is this rule for anyone, less unlisted
    runs.  ``Run.is_visible_to`` is the same rule for a row already loaded,
    and tests/api/test_visibility holds the three to each other.
    """
    if user is not None and user.is_authenticated and user.is_staff:
        return Q()
    q = Q(visibility__in=OPEN_VISIBILITIES, hidden=False)
    if user is not None and user.is_authenticated:
        q |= Q(owner=user)
    if owner_key:
        q |= Q(owner_key_hash=hash_secret(owner_key))
    return q


class RunQuerySet(models.QuerySet):
    def listed(self) -> RunQuerySet:
        """Runs anyone may see in lists, reports, aggregates and the dump:
        those ``readable_q`` opens to anyone, but unlisted ones (the same
        condition the partial indexes of listed runs carry)."""
        return self.filter(visibility=Visibility.PUBLIC, hidden=False)

    def bare_metal(self) -> RunQuerySet:
        """Runs that may stand for bare metal as a guest's baseline: all
        but host runs made inside a VM (``virtual_host``), which their own
        guests are paired with but which no report takes for a bare host."""
        return self.filter(virtual_host=False)

    def gone(self) -> RunQuerySet:
        """Runs ``readable_q`` would open to anyone but that the moderators
        hid: asked for by id, they answer 410 Gone with the reason instead
        of 404 (``reads.check_gone``)."""
        return self.filter(visibility__in=OPEN_VISIBILITIES, hidden=True)

    def visible(self) -> RunQuerySet:
        """The older name of ``listed``."""
        return self.listed()

    def visible_to(self, user=None, owner_key: str = "") -> RunQuerySet:
        """Runs ``user`` (or the holder of ``owner_key``) may open by id."""
        return self.filter(readable_q(user, owner_key))

    def readable_by(self, user) -> RunQuerySet:
        """The older name of ``visible_to`` (without an owner key)."""
        return self.visible_to(user)

    def for_list(self) -> RunQuerySet:
        """What a run list (page or API) shows, in a bounded number of queries."""
        return self.select_related(
            "hardware", "hardware__cpu_model", "hardware__disk_model", "baseline"
        )


# The facet columns of a run that the indexes of listed runs carry, so that
# counts and facet counts read the index alone (``Run.Meta.indexes``).
LISTED_FACET_COLUMNS = (*FACETS, "suspect", "hardware", "baseline")
_CACHE_IDX_KEY = ("cache_mode", "hardware")
_CACHE_IDX_INCLUDE = tuple(c for c in LISTED_FACET_COLUMNS if c not in _CACHE_IDX_KEY)


class Run(models.Model):
    """One execution of a benchmark suite in one environment.

    A guest run (``role=guest``) measured inside a VM; a host run
    (``role=host``) is the same suite on the bare host, the native baseline.
    Runs sharing a ``pair_id`` are linked through ``baseline``.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=200, blank=True)
    # Environment.
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.GUEST)
    platform = models.CharField(
        max_length=16, choices=Platform.choices, default=Platform.UNKNOWN
    )
    virtualization = models.CharField(
        max_length=16, choices=Virtualization.choices, default=Virtualization.UNKNOWN
    )
    hypervisor_version = models.CharField(max_length=100, blank=True)
    os_name = models.CharField(max_length=200, blank=True)
    kernel = models.CharField(max_length=200, blank=True)
    # Virtual disk.
    cache_mode = models.CharField(
        max_length=16, choices=CacheMode.choices, default=CacheMode.UNKNOWN
    )
    aio_mode = models.CharField(
        max_length=16, choices=AioMode.choices, default=AioMode.UNKNOWN
    )
    iothread = models.BooleanField(null=True, blank=True)
    image_format = models.CharField(
        max_length=16, choices=ImageFormat.choices, default=ImageFormat.UNKNOWN
    )
    storage_backend = models.CharField(
        max_length=16, choices=StorageBackend.choices, default=StorageBackend.UNKNOWN
    )
    disk_bus = models.CharField(
        max_length=16, choices=DiskBus.choices, default=DiskBus.UNKNOWN
    )
    guest_filesystem = models.CharField(max_length=50, blank=True)
    host_filesystem = models.CharField(max_length=50, blank=True)
    hardware = models.ForeignKey(
        Hardware, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    # The suite.
    suite_id = models.CharField(max_length=64)
    suite_version = models.CharField(max_length=32)
    profile = models.CharField(max_length=32, blank=True)
    agent_version = models.CharField(max_length=32, blank=True)
    ran_at = models.DateTimeField(null=True, blank=True)
    # Provenance.
    source = models.CharField(
        max_length=16, choices=Source.choices, default=Source.MEASURED
    )
    citation = models.TextField(blank=True)
    citation_url = models.URLField(max_length=500, blank=True)
    notes = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    # SHA-256 of the secret key an anonymous submitter got back once.
    owner_key_hash = models.CharField(max_length=64, blank=True)
    visibility = models.CharField(
        max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    # Guest/host pairing.
    pair_id = models.CharField(max_length=64, blank=True)
    baseline = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="guests",
        help_text="The host run that is this guest run's native baseline.",
    )
    # One cache-mode sweep of one VM disk (``benchdb-agent vm --cache-modes``):
    # its guest runs and their host baseline share this id.
    sweep_id = models.CharField(max_length=64, blank=True)
    # A sweep's guest run: its round (every setting once per round, in a
    # fresh random order) and its place in the whole sweep, both from 1;
    # null outside a sweep and for its host baseline.
    sweep_round = models.PositiveSmallIntegerField(null=True, blank=True)
    sweep_position = models.PositiveSmallIntegerField(null=True, blank=True)
    # Where each tag's value came from, as the bundle said: "host-config"
    # (read from the VM's configuration on the host by the agent) or "user".
    tag_sources = JSONField(default=dict, blank=True)
    # Everything the agent detected and every tag, as sent (for display and
    # for facets that have no column yet).
    environment = JSONField(default=dict, blank=True)
    tags = JSONField(default=dict, blank=True)
    warnings = JSONField(default=list, blank=True)
    # Moderation and plausibility.
    suspect = models.BooleanField(default=False)
    # A host run measured inside a virtual machine (agent --allow-virtual-host,
    # or a host bundle whose detection found a hypervisor): its disk is a
    # virtual one, so it is never a guest's bare-metal baseline.
    virtual_host = models.BooleanField(default=False)
    suspect_reasons = JSONField(default=list, blank=True)
    hidden = models.BooleanField(default=False)
    hidden_reason = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(source=Source.PUBLISHED) | ~Q(citation=""),
                name="%(app_label)s_%(class)s_published_has_citation",
            ),
            models.CheckConstraint(
                condition=Q(hidden=False) | ~Q(hidden_reason=""),
                name="%(app_label)s_%(class)s_hidden_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(baseline__isnull=True) | Q(role=Role.GUEST),
                name="%(app_label)s_%(class)s_only_guests_have_baseline",
            ),
        ]
        indexes = [
            # Browse: public, not hidden, newest first.
            models.Index(
                fields=["visibility", "hidden", "-created"],
                name="results_run_browse_idx",
            ),
            # Listed runs only, newest first, with every facet column: counts,
            # facet counts, cache-mode sets and the overhead report read this
            # small index instead of the wide rows (environment JSON) of the
            # table.  Its condition is RunQuerySet.listed's.
            models.Index(
                fields=["-created", "-id"],
                include=[*LISTED_FACET_COLUMNS, "suite_id", "suite_version"],
                condition=Q(visibility=Visibility.PUBLIC, hidden=False),
                name="results_run_listed_idx",
            ),
            # The same listed runs by cache mode, the facet most filtered on
            # (the cache-mode report, ?cache_mode=): a count of one cache
            # mode's runs, on its own or with the hardware's disk type or
            # another facet, reads only that mode's entries instead of
            # every listed run's.
            models.Index(
                fields=list(_CACHE_IDX_KEY),
                include=list(_CACHE_IDX_INCLUDE),
                condition=Q(visibility=Visibility.PUBLIC, hidden=False),
                name="results_run_listed_cache_idx",
            ),
            # The listed host runs by cache mode: the hosts of a filtered list,
            # counted under their guests' platforms (the browse page's platform
            # facet, ``summaries.add_hosts_by_guest_platform``).  PostgreSQL
            # cannot know that hosts have no guest cache mode, so without it
            # ``role = 'host' AND cache_mode IN (...)`` read every listed
            # run's entry to find none.
            models.Index(
                fields=list(_CACHE_IDX_KEY),
                include=list(_CACHE_IDX_INCLUDE),
                condition=Q(visibility=Visibility.PUBLIC, hidden=False, role=Role.HOST),
                name="results_run_listed_host_idx",
            ),
            # Published data sets (the home page, the reports' published
            # figures): a few rows, found without reading the table.
            models.Index(
                fields=["citation", "id"],
                condition=Q(source=Source.PUBLISHED),
                name="results_run_published_idx",
            ),
            # Listed runs that may stand for bare metal (``listed().bare_metal()``):
            # the overhead report's paired guests (``reads.overhead_guests``,
            # its bounded count) probe their baselines here, not in the
            # table, whose pages ``virtual_host`` alone sent them through.
            models.Index(
                fields=["id"],
                condition=Q(
                    visibility=Visibility.PUBLIC, hidden=False, virtual_host=False
                ),
                name="results_run_listed_bare_idx",
            ),
            # The runs a report's answer leaves out (suspect, unlisted,
            # imported), counted per cache mode on every cache-mode report
            # (``reports.left_out``, ``reports.LEFT_OUT``): a few percent of
            # the runs, instead of every guest run of the setup.  What the
            # counts tell apart rides along (INCLUDE): no run's heap page read.
            models.Index(
                fields=["role", "cache_mode"],
                include=["id", "visibility", "suspect", "source"],
                condition=Q(hidden=False)
                & ~Q(visibility=Visibility.PRIVATE)
                & (
                    Q(suspect=True)
                    | Q(visibility=Visibility.UNLISTED)
                    | Q(source=Source.IMPORTED)
                ),
                name="results_run_left_out_idx",
            ),
            # The facet filters most asked for (cache mode report, by layout).
            models.Index(fields=["cache_mode"], name="results_run_cache_idx"),
            models.Index(fields=["storage_backend"], name="results_run_storage_idx"),
            models.Index(
                fields=["platform", "virtualization"], name="results_run_hv_idx"
            ),
            models.Index(fields=["disk_bus"], name="results_run_bus_idx"),
            # Linking a guest run to its host baseline by pair id.
            models.Index(fields=["pair_id", "role"], name="results_run_pair_idx"),
            # The runs of one cache-mode sweep (/sweeps/<id>/).
            models.Index(
                fields=["sweep_id"],
                name="results_run_sweep_idx",
                condition=~Q(sweep_id=""),
            ),
            # Free-form tag queries (tags @> '{"key": "value"}').
            GinIndex(fields=["tags"], name="results_run_tags_gin"),
        ]

    def __str__(self) -> str:
        if self.title:
            return self.title
        # An untitled run is named by what tells it apart in a list.
        parts = [f"Run {self.pk}", self.role]
        if self.role == Role.GUEST:
            parts += [f"cache {self.cache_mode}", self.disk_bus, self.image_format]
        return " · ".join(parts)

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.pk])

    def set_owner_key(self) -> str:
        """Give the run a fresh owner key; returns it (shown once)."""
        key = new_secret("bdo")
        self.owner_key_hash = hash_secret(key)
        return key

    def check_owner_key(self, key: str) -> bool:
        return bool(self.owner_key_hash) and secrets.compare_digest(
            self.owner_key_hash, hash_secret(key)
        )

    def claim(self, user) -> None:
        """Move an anonymous run into ``user``'s account; the key stops working.
        No answer counts owners: the data changed, nothing left a population."""
        with transaction.atomic():
            self.owner = user
            self.owner_key_hash = ""
            self.save(update_fields=["owner", "owner_key_hash", "updated"])
            # No run logged: no stored answer reads the owner.
            refresh.announce(removal=False)

    def moderate(self, action: str, reason: str = "") -> None:
        """Staff moderation: flag/unflag (suspect, with the reason) or
        hide/unhide (out of every reader but its owner and staff,
        ``readable_q``; its page says why).  Any of them but unhiding can take
        a listed run out of a population (unflagging: out of the answers over
        suspect runs)."""
        listed = self.is_listed()
        if action == "flag":
            self.suspect = True
            self.suspect_reasons = [
                *self.suspect_reasons,
                f"flagged by staff: {reason}",
            ]
        elif action == "unflag":
            self.suspect, self.suspect_reasons = False, []
        elif action == "hide":
            self.hidden, self.hidden_reason = True, reason
        elif action == "unhide":
            self.hidden, self.hidden_reason = False, ""
        else:
            raise ValueError(f"unknown moderation action {action!r}")
        with transaction.atomic():
            self.save()
            refresh.announce(removal=listed, run=self.pk)

    def is_visible_to(self, user=None, owner_key: str = "") -> bool:
        """``readable_q`` for a loaded row: may ``user`` open this run?"""
        if user is not None and user.is_authenticated:
            if user.is_staff or self.owner_id == user.pk:
                return True
        if self.visibility in OPEN_VISIBILITIES and not self.hidden:
            return True
        return bool(owner_key) and self.check_owner_key(owner_key)

    def is_listed(self) -> bool:
        """``RunQuerySet.listed`` for a loaded row."""
        return self.visibility == Visibility.PUBLIC and not self.hidden


# What a result's figure columns hold (``stats.centre``), for the API schema.
FIGURE = (
    "The run's figure (%s) in the main direction, as its pages show it: the "
    "geometric mean of the repeats (the arithmetic mean where a repeat "
    "measured zero)."
)


class Result(models.Model):
    """One test of a run (one test id) and the statistics over its repeats.

    ``stats`` holds, per direction and metric, ``{"n", "mean", "gmean",
    "stdev", "ci95_low", "ci95_high"…}`` in the metric's unit; the
    ``iops_mean``, ``bw_bytes_mean`` and ``lat_mean_ns_mean`` columns hold the
    run's figure of the main direction as every page shows it
    (``stats.centre``: the geometric mean of the repeats, the arithmetic one
    where a repeat measured zero), so lists, ranks, reports and exports sort
    and filter in SQL on the run page's number.  Their names are the API's
    and the exports' field names, kept as published.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    test_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=8, choices=Tool.choices)
    title = models.CharField(max_length=200, blank=True)
    group = models.CharField(max_length=64, blank=True)
    comparability_key = models.CharField(max_length=300)
    # False for tests outside the standard suite (e.g. a published archive
    # time): shown, never compared with the agent's tests.
    comparable = models.BooleanField(default=True)
    # Published figures the text gives only approximately ("about 190 MB/s").
    approximate = models.BooleanField(default=False)
    options = JSONField(default=dict, blank=True)
    command = JSONField(default=list, blank=True)
    tool_version = models.CharField(max_length=64, blank=True)
    preconditioned = models.BooleanField(default=False)
    extra_repeats = models.PositiveSmallIntegerField(default=0)
    repeat_count = models.PositiveSmallIntegerField(default=0)
    stats = JSONField(default=dict, blank=True)
    # [main direction, the per-repeat values in it of the compared metrics
    # (``metrics.MAIN_METRICS`` order, null where none) or null when stats
    # keep no values]: what a comparison reads of a result, written from
    # ``stats`` by a trigger on every insert and update (migration 0013), so
    # that a comparison does not decompress each result's whole statistics.
    main_values = JSONField(null=True, blank=True, editable=False)
    # A guest result's overhead against its baseline's result of the same
    # comparability key, computed when ingest links the pair and read by
    # comparisons and the run page while the baseline is still that run
    # (``overheads.store_overheads``; null: computed on each request).
    overhead = JSONField(null=True, blank=True, editable=False)
    # The version of the formula ``overhead`` was computed by
    # (``overheads.OVERHEAD_VERSION``); another version's is stale, never read.
    overhead_version = models.PositiveSmallIntegerField(
        null=True, blank=True, editable=False
    )
    iops_mean = models.FloatField(null=True, blank=True, help_text=FIGURE % "IOPS")
    bw_bytes_mean = models.FloatField(
        null=True, blank=True, help_text=FIGURE % "bandwidth, bytes/s"
    )
    lat_mean_ns_mean = models.FloatField(
        null=True, blank=True, help_text=FIGURE % "mean latency, ns"
    )

    class Meta:
        ordering = ["run", "test_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "test_id"], name="%(app_label)s_%(class)s_unique_test"
            ),
            models.CheckConstraint(
                condition=Q(iops_mean__isnull=True) | Q(iops_mean__gte=0),
                name="%(app_label)s_%(class)s_iops_nonnegative",
            ),
            models.CheckConstraint(
                condition=Q(bw_bytes_mean__isnull=True) | Q(bw_bytes_mean__gte=0),
                name="%(app_label)s_%(class)s_bw_nonnegative",
            ),
            models.CheckConstraint(
                condition=Q(lat_mean_ns_mean__isnull=True) | Q(lat_mean_ns_mean__gte=0),
                name="%(app_label)s_%(class)s_lat_nonnegative",
            ),
        ]
        indexes = [
            # A comparison's memo key (``compare._result_ids``): the ids of
            # some runs' comparable results, an index-only scan.  The plain
            # (run_id) index does not hold ``comparable``, so each result's
            # heap page was read, cold on a new comparison: 52% of a new
            # 10-run comparison's time at a million results.
            models.Index(
                fields=["run", "id"],
                condition=Q(comparable=True),
                name="results_result_comparable_idx",
            ),
            # Aggregates, percentile ranks and compare: all results of one
            # comparable measurement across runs.
            # The metric columns ride along (INCLUDE) so aggregates, ranks
            # and the overhead summary are index-only scans: a result row is
            # wide (options, stats JSON) and each one sits on its own page.
            models.Index(
                fields=["comparability_key", "run"],
                include=[
                    "comparable",
                    "iops_mean",
                    "bw_bytes_mean",
                    "lat_mean_ns_mean",
                ],
                name="results_result_key_idx",
            ),
            # A run page's nearest runs by figure (``standing.nearest_runs``,
            # its headlines: IOPS and bandwidth): one key's figures in a
            # range around the run's, instead of every result of that key
            # sorted by its distance (41,668 of them at a million results).
            models.Index(
                fields=["comparability_key", "iops_mean"],
                include=["run"],
                condition=Q(comparable=True, iops_mean__isnull=False),
                name="results_result_key_iops_idx",
            ),
            models.Index(
                fields=["comparability_key", "bw_bytes_mean"],
                include=["run"],
                condition=Q(comparable=True, bw_bytes_mean__isnull=False),
                name="results_result_key_bw_idx",
            ),
            models.Index(
                fields=["test_id", "comparability_key"],
                include=[
                    "run",
                    "comparable",
                    "iops_mean",
                    "bw_bytes_mean",
                    "lat_mean_ns_mean",
                ],
                name="results_result_test_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.test_id}"


class Measurement(models.Model):
    """One normalized record of one repeat: a direction of a job, as parsed.

    A plain read test gives one record per repeat; a mixed read/write test
    gives two (read and write); the metrics are in the units their names say.
    """

    result = models.ForeignKey(
        Result, on_delete=models.CASCADE, related_name="measurements"
    )
    repeat = models.PositiveSmallIntegerField()
    job = models.CharField(max_length=200, blank=True)
    direction = models.CharField(max_length=8, choices=Direction.choices)
    iops = models.FloatField(null=True, blank=True)
    bw_bytes = models.FloatField(null=True, blank=True)
    io_bytes = models.FloatField(null=True, blank=True)
    runtime_s = models.FloatField(null=True, blank=True)
    lat_mean_ns = models.FloatField(null=True, blank=True)
    clat_mean_ns = models.FloatField(null=True, blank=True)
    clat_p50_ns = models.FloatField(null=True, blank=True)
    clat_p99_ns = models.FloatField(null=True, blank=True)
    clat_p99_9_ns = models.FloatField(null=True, blank=True)
    lat_min_ns = models.FloatField(null=True, blank=True)
    lat_max_ns = models.FloatField(null=True, blank=True)
    lat_stdev_ns = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["result", "repeat", "direction", "job"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    *(
                        Q(**{f"{f}__isnull": True}) | Q(**{f"{f}__gte": 0})
                        for f in METRIC_FIELDS
                    )
                ),
                name="%(app_label)s_%(class)s_metrics_nonnegative",
            ),
            models.UniqueConstraint(
                fields=["result", "repeat", "direction", "job"],
                name="%(app_label)s_%(class)s_unique_record",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.result_id}#{self.repeat} {self.direction}"

    def metrics(self) -> dict:
        return {f: getattr(self, f) for f in METRIC_FIELDS}


class RawOutput(models.Model):
    """A tool's raw output for one repeat, gzip-compressed, for re-parsing."""

    result = models.ForeignKey(
        Result, on_delete=models.CASCADE, related_name="raw_outputs"
    )
    repeat = models.PositiveSmallIntegerField()
    format = models.CharField(max_length=32)
    data_gzip = models.BinaryField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["result", "repeat"]
        constraints = [
            models.UniqueConstraint(
                fields=["result", "repeat"], name="%(app_label)s_%(class)s_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.result_id}#{self.repeat} ({self.format})"


class Submission(models.Model):
    """An uploaded bundle and what became of it.

    The API stores the row and answers 202; the ``ingest`` task turns it into
    a Run.  ``bundle_id`` is unique: a resent bundle finds this row again.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        PROCESSING = "processing", "Processing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    bundle_id = models.UUIDField(unique=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    # The body as it was sent (``JSONTextField``: stored and read back whole).
    bundle = JSONTextField()
    # What the API's check parsed from the bundle's raw outputs
    # (``ingest.parsed_of``): the worker stores those records instead of
    # parsing the same outputs again.  NULL: the worker parses them.
    parsed = JSONTextField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True)
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="submission"
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    owner_key_hash = models.CharField(max_length=64, blank=True)
    visibility = models.CharField(
        max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    # Ingest attempts started (a worker marked the row processing).
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the ingest message last reached the broker; NULL while it never
    # did (the broker was down): requeue_stale and a resend queue it then.
    enqueued = models.DateTimeField(null=True, blank=True)
    # The last thing that went wrong (broker unreachable, a worker lost),
    # shown on the status URL; failures of the bundle itself are in errors.
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            # The worker's "what is still queued" sweep and the status page.
            models.Index(fields=["status", "created"], name="results_sub_status_idx"),
        ]

    def __str__(self) -> str:
        return f"Submission {self.bundle_id} ({self.status})"


class Comparison(models.Model):
    """A saved comparison: a permanent short link to a set of runs."""

    slug = models.SlugField(max_length=16, unique=True)
    run_ids = models.JSONField(help_text="Run ids in the order shown.")
    reference_run_id = models.BigIntegerField(null=True, blank=True)
    options = models.JSONField(default=dict, blank=True)
    title = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.title or self.slug

    def get_absolute_url(self) -> str:
        return reverse("comparison-share", args=[self.slug])

    @staticmethod
    def new_slug() -> str:
        return secrets.token_urlsafe(6).replace("-", "x").replace("_", "y")


class ApiToken(models.Model):
    """A named API token of a user.  Only its SHA-256 is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    # The first characters, so a user can tell tokens apart in a list.
    prefix = models.CharField(max_length=12)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def revoke(self) -> None:
        """Stop the token working (kept, with the time, for the owner's list)."""
        if self.revoked is None:
            self.revoked = timezone.now()
            self.save(update_fields=["revoked"])

    @classmethod
    def issue(cls, user, name: str) -> tuple[ApiToken, str]:
        """Create a token; returns the row and the secret (shown once)."""
        key = new_secret("bdt")
        token = cls.objects.create(
            user=user, name=name, key_hash=hash_secret(key), prefix=key[:10]
        )
        return token, key


class DataVersion(models.Model):
    """One row: what every across-runs answer depends on (``answer_cache``).

    ``version`` goes up by one with every transaction that changes runs: the
    write functions announce it (``refresh.announce``), and a plain trigger
    (migration 0018) bumps it for writes made outside them.  ``removed`` is
    set to the new version by a write function that may have taken a listed
    run out of a population (deleted, hidden, made unlisted or private,
    flagged, retagged or edited), so a stored answer computed before it is
    never served again.
    """

    version = models.BigIntegerField(default=0)
    removed = models.BigIntegerField(default=0)
    changed = models.DateTimeField(null=True)
    # Set when a summary refresh is queued, cleared when it starts: many
    # uploads in a row queue one refresh (``results.refresh``).
    refresh_queued = models.DateTimeField(null=True)

    class Meta:
        db_table = "results_dataversion"

    def __str__(self) -> str:
        return f"data version {self.version} (removed at {self.removed})"


class ChangedRun(models.Model):
    """A run a write function changed (``refresh.announce``), at the data
    version of that write.

    - ``removal``: the write took a listed run out of the populations; a
      stored answer computed before it leaves it out while it is computed
      again (``answer_cache.fetch_or_compute``).
    - Any change: the refresh recomputes only the stored answers the changed
      runs can reach (``results.changes``); the others are current as they
      are.

    ``run_id`` is None when the write could not name the run (then every
    answer counts as reached).  Not a foreign key: a deleted run stays
    named.  Kept while an answer stored before it may still be served or
    refreshed (``refresh``)."""

    version = models.BigIntegerField(db_index=True)
    run_id = models.BigIntegerField(null=True)
    removal = models.BooleanField(default=True)
    at = models.DateTimeField()

    class Meta:
        db_table = "results_changedrun"

    def __str__(self) -> str:
        what = "removed" if self.removal else "changed"
        return f"run {self.run_id} {what} at version {self.version}"


class AnswerSummary(models.Model):
    """An across-runs answer as the live function computed it, stored.

    ``name`` is the function, ``digest`` its arguments (``args``, JSON);
    ``answer`` is the function's return value as JSON text; ``version`` the
    data version of the snapshot it was computed in, ``computed`` when, and
    ``runs`` how many runs were listed in that snapshot.  Refreshed by the
    worker (``results.refresh``), read by the pages and the API
    (``results.answer_cache``).
    """

    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64)
    args = models.TextField()
    answer = models.TextField()
    version = models.BigIntegerField()
    computed = models.DateTimeField()
    runs = models.IntegerField()
    seconds = models.FloatField(default=0)
    requested = models.DateTimeField()

    class Meta:
        db_table = "results_answersummary"
        constraints = [
            models.UniqueConstraint(
                fields=["name", "digest"], name="results_answersummary_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.args} (version {self.version})"
