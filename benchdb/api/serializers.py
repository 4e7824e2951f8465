"""Serializers of the v1 API: explicit fields, units in the names.

Response-only serializers of computed answers (compare, similar, aggregates)
exist so the OpenAPI schema describes exactly what those views return.
"""

from __future__ import annotations

import functools

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from benchdb.api.permissions import owner_key
from benchdb.api.validation import DIGITS, check_tags
from benchdb.results import reads, rows, vocab
from benchdb.results.aggregates import GROUP_BY
from benchdb.results.metrics import METRIC_COLUMNS
from benchdb.results.models import (
    METRIC_FIELDS,
    ApiToken,
    Comparison,
    Hardware,
    Result,
    Run,
    Submission,
)
from benchdb.results.similar import SIMILAR_MATCH
from benchdb_agent import contract


@functools.cache
def _kept(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    return serializer_class()


def represent(serializer_class: type[serializers.Serializer], answer) -> dict:
    """``serializer_class(answer).data`` of a plain (not model) serializer,
    by one instance of the class kept for the process: a serializer copies
    its class's fields, and each nested serializer its own, on every new
    instance (the most of a stored answer's serializing), and writes nothing
    of an answer on itself."""
    return _kept(serializer_class).to_representation(answer)


def validated(serializer_class: type[serializers.Serializer], data) -> dict:
    """``serializer_class(data=data)``'s validated data, or the
    ValidationError ``is_valid(raise_exception=True)`` raises (the same
    400), by one instance of a query serializer kept for the process
    (``represent``)."""
    return _kept(serializer_class).run_validation(data)


def absolute(request, path: str) -> str:
    return request.build_absolute_uri(path) if request is not None else path


def viewer(context) -> tuple:
    """(user, owner key) of the request being answered, for the read rules."""
    request = context.get("request")
    if request is None:
        return None, ""
    return getattr(request, "user", None), owner_key(request)


# Output ----------------------------------------------------------------------
# Runs, results, hardware and similar-system answers are written by
# ``benchdb.results.rows``, the one place each is built; the serializers
# below declare their fields for the OpenAPI schema (and for input), and
# tests/api/test_fast_rows.py holds the rows to that schema.


def run_links(request) -> rows.Links:
    """(API URL, page URL) of a run by id, absolute for ``request``,
    each reversed once."""
    return _url_maker(request, "api:run-detail"), _url_maker(request, "run-detail")


def _url_maker(request, name: str):
    """pk -> ``absolute(request, reverse(name, args=[pk]))``, reversing once."""
    sentinel = "918273645"
    head, tail = absolute(request, reverse(name, args=[sentinel])).split(sentinel)
    return lambda pk: f"{head}{pk}{tail}"


def _links(serializer) -> rows.Links:
    """``run_links`` of the serializer's request, made once per serializer
    (a list serializer's child writes every row of a page)."""
    links = getattr(serializer, "_links", None)
    if links is None:
        links = serializer._links = run_links(serializer.context.get("request"))
    return links


# Submissions -----------------------------------------------------------------


class SubmissionSerializer(serializers.ModelSerializer):
    """What the status URL says about an upload."""

    id = serializers.UUIDField(source="bundle_id", read_only=True)
    status_url = serializers.SerializerMethodField()
    run = serializers.SerializerMethodField(
        help_text="The run's id once stored, if you may open it (its owner: "
        "signed in or with X-Owner-Key, or a public or unlisted run)."
    )
    run_url = serializers.SerializerMethodField()
    errors = serializers.ListField(child=serializers.DictField(), read_only=True)
    last_error = serializers.CharField(
        read_only=True,
        help_text="What last went wrong outside the bundle (broker unreachable, "
        "a worker lost mid-ingest); empty when nothing did.",
    )
    queued_at = serializers.DateTimeField(
        source="enqueued",
        read_only=True,
        allow_null=True,
        help_text="When the ingest was last handed to the task queue; null "
        "while the queue could not be reached (it is queued again by itself).",
    )

    class Meta:
        model = Submission
        fields = [
            "id",
            "status",
            "status_url",
            "run",
            "run_url",
            "errors",
            "attempts",
            "last_error",
            "queued_at",
            "created",
            "updated",
        ]
        read_only_fields = fields

    def get_status_url(self, obj) -> str:
        return absolute(
            self.context.get("request"),
            reverse("api:submission-detail", args=[obj.bundle_id]),
        )

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_run(self, obj) -> int | None:
        return reads.submission_run_id(obj, *viewer(self.context))

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_run_url(self, obj) -> str | None:
        run_id = reads.submission_run_id(obj, *viewer(self.context))
        if run_id is None:
            return None
        return absolute(
            self.context.get("request"), reverse("api:run-detail", args=[run_id])
        )


class SubmissionCreatedSerializer(SubmissionSerializer):
    """The 202 answer: the status URL, and the owner key for anonymous uploads."""

    owner_key = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="Anonymous submissions only, shown once: send it as X-Owner-Key "
        "to edit, unlist, delete or claim the run.",
    )

    class Meta(SubmissionSerializer.Meta):
        fields = [*SubmissionSerializer.Meta.fields, "owner_key"]
        read_only_fields = fields


# Hardware and runs -----------------------------------------------------------


class HardwareSerializer(serializers.ModelSerializer):
    cpu_model = serializers.CharField(
        source="cpu_model.name", default=None, allow_null=True, read_only=True
    )
    disk_model = serializers.CharField(
        source="disk_model.name", default=None, allow_null=True, read_only=True
    )
    run_count = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Visible runs on this hardware (in hardware lists only).",
    )

    class Meta:
        model = Hardware
        fields = [
            "id",
            "cpu_model",
            "cpu_sockets",
            "cpu_cores",
            "cpu_threads",
            "memory_bytes",
            "disk_model",
            "disk_type",
            "disk_count",
            "disk_size_bytes",
            "raid_controller",
            "raid_level",
            "controller_cache_bytes",
            "controller_battery",
            "run_count",
        ]
        read_only_fields = fields

    def to_representation(self, instance) -> rows.HardwareRow:
        return rows.hardware_row(rows.hardware_values(instance))


RUN_LIST_FIELDS = [
    "id",
    "uuid",
    "url",
    "web_url",
    "title",
    *vocab.RUN_ENVIRONMENT,
    "hardware",
    "suite_id",
    "suite_version",
    "profile",
    "agent_version",
    "ran_at",
    "source",
    "visibility",
    "pair_id",
    "sweep_id",
    "virtual_host",
    "baseline",
    "suspect",
    "suspect_reasons",
    "hidden",
    "hidden_reason",
    "owned",
    "created",
    "updated",
]


class RunListSerializer(serializers.ModelSerializer):
    """A run as lists show it: ``rows.run_row``."""

    url = serializers.CharField(read_only=True)
    web_url = serializers.CharField(read_only=True)
    hardware = HardwareSerializer(read_only=True, allow_null=True)
    baseline = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The host run that is this run's native baseline, if you may "
        "open it.",
    )
    suspect_reasons = serializers.ListField(child=serializers.CharField())
    virtual_host = serializers.BooleanField(
        read_only=True,
        help_text="A host run made inside a VM (the agent's --role host "
        "--allow-virtual-host): its own guests are paired with it, but it is "
        "never a bare-metal baseline (the overhead report and population "
        "answers leave it out).",
    )
    owned = serializers.BooleanField(
        read_only=True, help_text="True when the run belongs to an account."
    )

    class Meta:
        model = Run
        fields = RUN_LIST_FIELDS
        read_only_fields = fields

    def to_representation(self, instance) -> rows.RunRow:
        baseline = reads.shown_baseline_id(instance, *viewer(self.context))
        return rows.run_row(
            rows.values_of(instance, rows.RUN_PATHS), _links(self), baseline
        )


# What every interval's flag says (``stats.too_wide``: the one rule).
TOO_WIDE_HELP = (
    "The interval is too wide to estimate anything: its lower bound at or "
    "below zero, or its upper bound more than 10 times its lower. Pages show "
    "'too noisy to estimate' and exports leave the interval empty; the bounds "
    "here stay as computed."
)


class StatSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    mean = serializers.FloatField(
        allow_null=True,
        help_text="Arithmetic mean of the repeats; the interval is not its own.",
    )
    stdev = serializers.FloatField(allow_null=True)
    ci95_low = serializers.FloatField(
        allow_null=True, help_text="95% interval of gmean (log scale), 3+ repeats."
    )
    ci95_high = serializers.FloatField(
        allow_null=True, help_text="95% interval of gmean (log scale), 3+ repeats."
    )
    ci95_too_wide = serializers.BooleanField(help_text=TOO_WIDE_HELP)
    cv = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    gmean = serializers.FloatField(
        allow_null=True, help_text="Geometric mean: the centre of the interval."
    )
    note = serializers.CharField(
        allow_null=True, help_text="Why there is no interval (fewer than 3 repeats)."
    )
    values = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        help_text="Latency percentiles only: each repeat's value (never averaged).",
    )
    interval = serializers.ChoiceField(
        choices=["log-t", "range"],
        required=False,
        help_text="log-t: the t interval of the logs of the repeats; range: "
        "their min and max only (latency percentiles).",
    )


class RecordSerializer(serializers.Serializer):
    job = serializers.CharField()
    direction = serializers.CharField()


for _field in METRIC_FIELDS:
    RecordSerializer._declared_fields[_field] = serializers.FloatField(allow_null=True)


class RepeatSerializer(serializers.Serializer):
    repeat = serializers.IntegerField()
    records = RecordSerializer(many=True)
    raw_format = serializers.CharField(allow_null=True)


class OverheadIntervalSerializer(serializers.Serializer):
    """Guest / host (ratio of geometric means) with its 95% interval."""

    ratio = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    p = serializers.FloatField(allow_null=True)
    n_guest = serializers.IntegerField()
    n_host = serializers.IntegerField()
    percent = serializers.FloatField(allow_null=True)
    slower = serializers.BooleanField(allow_null=True)
    text = serializers.CharField()


class OverheadSerializer(serializers.Serializer):
    """Guest figure / host figure for the same comparable test (1.0 = native).

    ``iops``, ``bw_bytes``, ``lat_mean_ns``: the ratio of the stored
    arithmetic means, with no interval; ``intervals[metric]`` is the ratio of
    geometric means with its 95% interval, the figure the pages show.
    """

    _ARITHMETIC = "Ratio of arithmetic means (no interval; see intervals)."
    baseline_run = serializers.IntegerField()
    iops = serializers.FloatField(allow_null=True, help_text=_ARITHMETIC)
    bw_bytes = serializers.FloatField(allow_null=True, help_text=_ARITHMETIC)
    lat_mean_ns = serializers.FloatField(allow_null=True, help_text=_ARITHMETIC)
    intervals = serializers.DictField(
        child=OverheadIntervalSerializer(),
        help_text="Per metric: guest/host as a ratio of geometric means over "
        "the repeats, with its 95% interval (none below 3 repeats a side).",
    )


class ResultSerializer(serializers.ModelSerializer):
    """A result with its statistics, repeats and guest/host figures:
    ``rows.result_row``."""

    main_direction = serializers.CharField(read_only=True, allow_null=True)
    stats = serializers.DictField(
        child=serializers.DictField(child=StatSerializer()),
        read_only=True,
        help_text="direction -> metric -> summary over repeats.",
    )
    repeats = RepeatSerializer(many=True, read_only=True)
    overhead = OverheadSerializer(allow_null=True, read_only=True)

    class Meta:
        model = Result
        fields = [
            "test_id",
            "title",
            "group",
            "tool",
            "comparability_key",
            "comparable",
            "approximate",
            "options",
            "command",
            "tool_version",
            "preconditioned",
            "extra_repeats",
            "repeat_count",
            "main_direction",
            "iops_mean",
            "bw_bytes_mean",
            "lat_mean_ns_mean",
            "stats",
            "repeats",
            "overhead",
        ]
        read_only_fields = fields

    def to_representation(self, instance) -> rows.ResultRow:
        return rows.result_row(
            instance,
            self.context.get("baseline_results"),
            self.context.get("overheads"),
        )


class RunDetailSerializer(RunListSerializer):
    # Empty when the submitter gave none: a model URLField would be declared
    # `format: uri`, which "" is not (schemathesis found the contradiction).
    citation_url = serializers.CharField(
        read_only=True,
        help_text="Where the run is published or discussed (a URL); empty "
        "when none was given.",
    )
    environment = serializers.DictField()
    tags = serializers.DictField(child=serializers.CharField())
    tag_sources = serializers.DictField(
        child=serializers.CharField(),
        help_text="Where each tag came from: host-config (read from the VM's "
        "configuration on the host by the agent) or user (typed).",
    )
    warnings = serializers.ListField(child=serializers.DictField())
    tests = ResultSerializer(source="results", many=True, read_only=True)

    class Meta(RunListSerializer.Meta):
        fields = [
            *RUN_LIST_FIELDS,
            "notes",
            "citation",
            "citation_url",
            "environment",
            "tags",
            "tag_sources",
            "warnings",
            "tests",
        ]
        read_only_fields = fields

    def to_representation(self, instance) -> rows.RunDetailRow:
        return rows.run_detail_row(
            instance,
            _links(self),
            reads.shown_baseline_id(instance, *viewer(self.context)),
            self.context.get("baseline_results"),
            self.context.get("overheads"),
        )


class RunUpdateSerializer(serializers.ModelSerializer):
    """What an owner may change: title, notes, visibility and tags."""

    tags = serializers.DictField(child=serializers.CharField(), required=False)

    class Meta:
        model = Run
        fields = ["title", "notes", "visibility", "tags"]

    def validate_tags(self, value: dict) -> dict:
        # The contract's tag rules: the same as an upload's and --tag's.
        errors = check_tags(value)
        if errors:
            raise serializers.ValidationError(
                {e["pointer"].lstrip("/"): [e["message"]] for e in errors}
            )
        return value

    def validate_title(self, value: str) -> str:
        return _text(value)

    def validate_notes(self, value: str) -> str:
        if len(value) > contract.MAX_STRING:
            raise serializers.ValidationError(
                f"at most {contract.MAX_STRING} characters"
            )
        return _text(value)


def _text(value: str) -> str:
    problem = contract.text_problem(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class ModerationSerializer(serializers.Serializer):
    ACTIONS = ("flag", "unflag", "hide", "unhide")
    action = serializers.ChoiceField(choices=ACTIONS)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)

    def validate(self, attrs):
        if attrs["action"] in ("flag", "hide") and not attrs.get("reason", "").strip():
            raise serializers.ValidationError({"reason": ["a reason is required"]})
        return attrs


# Compare, similar, aggregates ------------------------------------------------


class CompareQuerySerializer(serializers.Serializer):
    runs = serializers.CharField(
        help_text=f"Comma-separated run ids, 1 to {reads.MAX_COMPARE_RUNS}; the "
        "first is the reference "
        "unless `reference` says otherwise.",
        max_length=400,
    )
    reference = serializers.IntegerField(required=False, min_value=1)

    def validate_runs(self, value: str) -> list[int]:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(DIGITS.fullmatch(p) for p in parts):
            raise serializers.ValidationError("expected run ids like 12,15,19")
        ids = list(dict.fromkeys(int(p) for p in parts))
        try:
            reads.check_run_ids(ids, None)
        except reads.ReadError as exc:
            raise serializers.ValidationError(exc.message) from None
        return ids


class CompareEntrySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    n = serializers.IntegerField()
    mean = serializers.FloatField(
        allow_null=True,
        help_text="Arithmetic mean of the repeats; the interval is not its own.",
    )
    stdev = serializers.FloatField(allow_null=True)
    ci95_low = serializers.FloatField(
        allow_null=True, help_text="95% interval of gmean (log scale), 3+ repeats."
    )
    ci95_high = serializers.FloatField(
        allow_null=True, help_text="95% interval of gmean (log scale), 3+ repeats."
    )
    ci95_too_wide = serializers.BooleanField(help_text=TOO_WIDE_HELP)
    values = serializers.ListField(child=serializers.FloatField())
    delta_percent = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True)
    verdict = serializers.ChoiceField(
        choices=["faster", "slower", "equivalent", "cannot tell"],
        allow_null=True,
    )
    better = serializers.BooleanField(allow_null=True)
    # Statistics (results.stats): see its module docstring.
    gmean = serializers.FloatField(
        allow_null=True,
        help_text="Geometric mean: the centre of the interval, the figure pages plot.",
    )
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    note = serializers.CharField(allow_null=True)
    ratio = serializers.FloatField(
        allow_null=True, help_text="Geometric mean / the reference's."
    )
    ratio_low = serializers.FloatField(allow_null=True)
    ratio_high = serializers.FloatField(allow_null=True)
    ratio_too_wide = serializers.BooleanField(
        help_text="ratio_low…ratio_high is too wide to estimate anything (as "
        "ci95_too_wide)."
    )
    p_adjusted = serializers.FloatField(
        allow_null=True, help_text="Holm-adjusted over the runs compared."
    )
    p_text = serializers.CharField(allow_null=True)
    verdict_text = serializers.CharField(allow_null=True)
    repeats_needed = serializers.IntegerField(allow_null=True)
    overhead = OverheadIntervalSerializer(allow_null=True)


class CompareMetricSerializer(serializers.Serializer):
    metric = serializers.CharField()
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField(allow_null=True)
    kind = serializers.ChoiceField(
        choices=["figure", "percentile"],
        help_text="percentile: each repeat's value and the range, never averaged.",
    )
    runs = CompareEntrySerializer(many=True)


class CompareTestSerializer(serializers.Serializer):
    test_id = serializers.CharField()
    title = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    tool = serializers.CharField()
    comparability_key = serializers.CharField()
    direction = serializers.CharField(allow_null=True)
    main_metric = serializers.CharField(
        allow_null=True, help_text="The figure the suite says this test is about."
    )
    metrics = CompareMetricSerializer(many=True)


class CompareRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    role = serializers.CharField()
    platform = serializers.CharField()
    cache_mode = serializers.CharField()
    storage_backend = serializers.CharField()
    disk_bus = serializers.CharField()
    suite_version = serializers.CharField(allow_blank=True)


class ComparisonResultSerializer(serializers.Serializer):
    runs = CompareRunSerializer(many=True)
    reference = serializers.IntegerField()
    equivalence_percent = serializers.FloatField()
    interval_explanation = serializers.CharField()
    verdict_explanation = serializers.CharField()
    tests = CompareTestSerializer(many=True)
    not_shared = serializers.ListField(child=serializers.CharField())


class SimilarQuerySerializer(serializers.Serializer):
    test_id = serializers.CharField(max_length=100)
    metric = serializers.ChoiceField(choices=list(METRIC_COLUMNS), default="iops")
    match = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text=f"Comma-separated facets to match too: {', '.join(SIMILAR_MATCH)}",
    )

    def validate_match(self, value: str) -> list[str]:
        facets = [f.strip() for f in value.split(",") if f.strip()]
        bad = [f for f in facets if f not in SIMILAR_MATCH]
        if bad:
            raise serializers.ValidationError(
                f"cannot match on {', '.join(bad)}; one of {', '.join(SIMILAR_MATCH)}"
            )
        return facets


class DistributionSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    min = serializers.FloatField(allow_null=True)
    q1 = serializers.FloatField(allow_null=True)
    median = serializers.FloatField(allow_null=True)
    q3 = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class FreshnessSerializer(serializers.Serializer):
    """How fresh a stored across-runs answer is (``results.answer_cache``)."""

    as_of = serializers.DateTimeField(
        help_text="When the answer was computed (its data snapshot)."
    )
    runs = serializers.IntegerField(help_text="Listed runs in that snapshot.")
    data_version = serializers.IntegerField()
    current = serializers.BooleanField(
        help_text="False: runs were uploaded since; the worker's refresh, "
        "queued by every upload, adds them within minutes."
    )
    updating = serializers.BooleanField(
        required=False,
        help_text="True: a run was removed (hidden, deleted, made private) and "
        "the answer is being computed again; this is the one computed before, "
        "as of as_of, with the removed runs left out where it names runs.",
    )


class SimilarSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    test_id = serializers.CharField()
    comparability_key = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField()
    disk_type = serializers.CharField()
    match = serializers.DictField(child=serializers.CharField(allow_null=True))
    value = serializers.FloatField(allow_null=True)
    percentile = serializers.FloatField(allow_null=True)
    better_than_percent = serializers.FloatField(allow_null=True)
    distribution = DistributionSerializer()
    population = serializers.ListField(
        child=serializers.FloatField(),
        help_text="The other comparable runs' figures (the run's own left out).",
    )
    ranked_among = serializers.IntegerField(
        help_text="How many other runs the run is ranked among."
    )
    freshness = FreshnessSerializer(allow_null=True)

    def to_representation(self, instance) -> rows.SimilarRow:
        return rows.similar_row(instance)


class AggregateQuerySerializer(serializers.Serializer):
    test_id = serializers.CharField(max_length=100)
    metric = serializers.ChoiceField(choices=list(METRIC_COLUMNS), default="iops")
    group_by = serializers.ChoiceField(choices=list(GROUP_BY), required=False)
    comparability_key = serializers.CharField(max_length=300, required=False)


class AggregateGroupSerializer(DistributionSerializer):
    value = serializers.JSONField(
        allow_null=True, help_text="The facet value (string, boolean or null)."
    )


class AggregateSerializer(serializers.Serializer):
    test_id = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    comparability_key = serializers.CharField(allow_null=True)
    group_by = serializers.CharField(allow_null=True)
    overall = DistributionSerializer()
    groups = AggregateGroupSerializer(many=True)
    freshness = FreshnessSerializer(allow_null=True)


# Saved comparisons and tokens ------------------------------------------------


class ComparisonCreateSerializer(serializers.Serializer):
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        min_length=1,
        max_length=reads.MAX_COMPARE_RUNS,
    )
    reference = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    options = serializers.DictField(required=False)

    def validate(self, attrs):
        runs = list(dict.fromkeys(attrs["runs"]))
        attrs["runs"] = runs
        reference = attrs.get("reference")
        if reference is not None and reference not in runs:
            raise serializers.ValidationError(
                {"reference": ["must be one of the compared runs"]}
            )
        return attrs


class ComparisonSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    share_url = serializers.SerializerMethodField()
    run_ids = serializers.ListField(child=serializers.IntegerField())
    options = serializers.DictField()

    class Meta:
        model = Comparison
        fields = [
            "slug",
            "url",
            "share_url",
            "title",
            "run_ids",
            "reference_run_id",
            "options",
            "created",
        ]
        read_only_fields = fields

    def get_url(self, obj) -> str:
        return absolute(
            self.context.get("request"),
            reverse("api:comparison-detail", args=[obj.slug]),
        )

    def get_share_url(self, obj) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())


class SavedComparisonSerializer(ComparisonSerializer):
    """A saved comparison as the reader may see it (``reads.SavedView``):
    runs the reader may not open are left out, ids included."""

    run_ids = serializers.SerializerMethodField()
    reference_run_id = serializers.SerializerMethodField()
    comparison = serializers.SerializerMethodField()
    unavailable_runs = serializers.SerializerMethodField(
        help_text="How many of the saved runs are no longer available to you "
        "(deleted, made private or hidden by the moderators): left out."
    )

    class Meta(ComparisonSerializer.Meta):
        fields = [*ComparisonSerializer.Meta.fields, "comparison", "unavailable_runs"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_run_ids(self, obj) -> list[int]:
        return self.context["view_of"].run_ids

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_reference_run_id(self, obj) -> int | None:
        return self.context["view_of"].reference_id

    @extend_schema_field(ComparisonResultSerializer(allow_null=True))
    def get_comparison(self, obj) -> dict | None:
        return self.context["view_of"].data

    def get_unavailable_runs(self, obj) -> int:
        return self.context["view_of"].unavailable


class ApiTokenSerializer(serializers.ModelSerializer):
    name = serializers.CharField(max_length=100)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "last_used", "revoked"]
        read_only_fields = ["id", "prefix", "created", "last_used", "revoked"]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    key = serializers.CharField(
        read_only=True, help_text="The token, shown once: store it now."
    )

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]
        read_only_fields = fields


class ErrorSerializer(serializers.Serializer):
    pointer = serializers.CharField(
        allow_null=True,
        help_text="JSON pointer into the request body; '' for the body as a "
        "whole; null when the error is not about the body.",
    )
    message = serializers.CharField()
    code = serializers.CharField()


class ErrorsSerializer(serializers.Serializer):
    errors = ErrorSerializer(many=True)


class VocabularyEntrySerializer(serializers.Serializer):
    value = serializers.CharField()
    label = serializers.CharField()


@extend_schema_field(OpenApiTypes.OBJECT)
class AnyObjectField(serializers.JSONField):
    pass


class VocabulariesSerializer(serializers.Serializer):
    vocabularies = serializers.DictField(child=VocabularyEntrySerializer(many=True))
    tags = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField(), allow_null=True)
    )
    visibility = serializers.ListField(child=serializers.CharField())
    metrics = serializers.DictField(child=AnyObjectField())
    group_by = serializers.ListField(child=serializers.CharField())
    similar_match = serializers.ListField(child=serializers.CharField())
    cache_mode_safety = serializers.DictField(child=AnyObjectField())
    units = serializers.DictField(child=serializers.CharField())
