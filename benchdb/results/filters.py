"""The one filter set for run lists, shared by the API and the pages.

``/api/v1/runs/`` and the browse page read the same query parameters through
``RunFilterSet``, so a URL copied from one works on the other.  Facets take
several values (``?cache_mode=none&cache_mode=writeback``); ``q`` searches
free text word by word; ``ordering`` always ends in a unique column so that
pagination is stable.
"""

from __future__ import annotations

import copy
from datetime import UTC

import django_filters as filters
from django import forms
from django.db.models import Exists, OuterRef, Q, QuerySet
from django_filters.fields import DateRangeWidget, IsoDateTimeField, RangeField
from django_filters.filters import FilterMethod

from benchdb.results.models import Hardware, Result, Run, readable_q
from benchdb.results.vocab import (
    FACET_PATHS,
    FACETS,
    HARDWARE_FACETS,
    LABELS,
    Platform,
    Role,
    Visibility,
)

# Text columns the free-text search looks in.
SEARCH_FIELDS = (
    "title",
    "notes",
    "os_name",
    "kernel",
    "hypervisor_version",
    "pair_id",
    "suite_version",
    "guest_filesystem",
    "host_filesystem",
    "hardware__cpu_model__name",
    "hardware__disk_model__name",
    "hardware__raid_controller",
)

# Public ordering names -> columns.  Every ordering gets ``-id`` appended.
ORDERING_FIELDS = {
    "created": "created",
    "ran_at": "ran_at",
    "title": "title",
    "platform": "platform",
    "cache_mode": "cache_mode",
    "storage_backend": "storage_backend",
    "disk_type": "hardware__disk_type",
    "id": "id",
}


class StableOrderingFilter(filters.OrderingFilter):
    """django-filter's ordering, with ``id`` appended as the tie-breaker.

    Without it two runs created in the same instant could swap places between
    two page requests, and a row would appear on two pages or none.
    """

    def filter(self, qs: QuerySet, value) -> QuerySet:
        ordering = [self.get_ordering_value(p) for p in value or [] if p]
        if not ordering:
            ordering = list(Run._meta.ordering)
        if not any(o.lstrip("-") == "id" for o in ordering):
            ordering.append("-id")
        return qs.order_by(*ordering)


class UTCIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time turned into UTC before it reaches PostgreSQL.

    Python accepts offsets up to ±23:59, PostgreSQL only up to ±15:59; the
    instant is the same in UTC, and an unrepresentable one is a form error.
    """

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError(
                "date-time out of range", code="invalid"
            ) from None


class UTCDateTimeRangeField(RangeField):
    widget = DateRangeWidget

    def __init__(self, *args, **kwargs):
        super().__init__(
            (UTCIsoDateTimeField(), UTCIsoDateTimeField()), *args, **kwargs
        )


class DateTimeRangeFilter(filters.IsoDateTimeFromToRangeFilter):
    """``<name>_after`` / ``<name>_before`` in ISO 8601, any offset."""

    field_class = UTCDateTimeRangeField


class FacetFilter(filters.MultipleChoiceFilter):
    """Any of the values asked for, as one ``IN (...)``.

    django-filter's MultipleChoiceFilter ORs one equality per value
    (``a = 'x' OR a = 'y'``); ``IN`` is the same condition, which
    PostgreSQL matches against an index (``results_run_listed_cache_idx``)
    however many values are asked for.  No DISTINCT: every facet is a
    column of the run or of its (one) hardware row, so no join can repeat
    a run, and django-filter's default SELECT DISTINCT over every selected
    column, JSON included, made PostgreSQL sort and compare whole rows.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("distinct", False)
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet, value) -> QuerySet:
        if not value:
            return qs
        return self.get_method(qs)(**{f"{self.field_name}__in": sorted(set(value))})


class SharedFields(dict):
    """A form class's ``base_fields`` whose forms share the fields themselves.

    Every form deep-copies its class's fields (``BaseForm.__init__``):
    each field's widget, error messages, validators and choices, on every
    API list request, population answer (two for a comparison) and browse
    page, about a quarter of such a request's time.  A form of this filter
    set reads its fields (to clean the values it is given, or to render
    them) and never changes one: each form gets its own dict of the
    class's fields, which it may add to, remove from or reorder, and the
    fields are the class's.  A form that wants to change a field assigns a
    new one (``form.fields[name] = ...``), which stays its own."""

    def __deepcopy__(self, memo):
        return dict(self)


class SharedFilters(dict):
    """A filter set class's ``base_filters`` whose copies share what a filter
    is made of.

    Every filter set deep-copies its class's filters (django-filter's
    ``BaseFilterSet.__init__``) to give each its own ``parent`` and
    ``model``: with them went each filter's choice list and keyword
    arguments, through ``copy``'s generic path, on every API list request
    and browse page.  A filter is its name, lookup and arguments, which no
    filter set changes (nor the form fields made from them once per class,
    ``SharedFields``): each set gets its own shallow copy of each filter,
    sharing those, and a filter that calls a method of its set is bound to
    its copy, so that it calls that set's."""

    def __deepcopy__(self, memo):
        out = {}
        for name, base in self.items():
            own = copy.copy(base)
            if base.method is not None:
                own.filter = FilterMethod(own)
            out[name] = own
        return out


def _multi(choices, field_name: str | None = None, label: str = ""):
    return FacetFilter(
        choices=choices.choices,
        field_name=field_name,
        label=label or None,
    )


# One filter per facet of the vocabulary (several values each), so a facet
# added there is a filter of the API and the browse page at once.
FacetFilters = type(
    "FacetFilters",
    (filters.FilterSet,),
    {
        name: _multi(choices, FACET_PATHS[name], LABELS[name])
        for name, choices in {**FACETS, **HARDWARE_FACETS}.items()
    },
)


class SharedFormFilterSet(filters.FilterSet):
    """A filter set whose form class is built once (``get_form_class``) and
    whose forms share its fields (``SharedFields``)."""

    def get_form_class(self):
        """django-filter builds a form class, and a form field per filter, on
        every filter set: the fields depend on nothing but the filters, so
        the class is built once, and its forms share its fields
        (``SharedFields``)."""
        cls = type(self)
        form_class = cls.__dict__.get("_form_class")
        if form_class is None:
            form_class = super().get_form_class()
            form_class.base_fields = SharedFields(form_class.base_fields)
            cls._form_class = form_class
        return form_class

    @classmethod
    def bound_form(cls, data):
        """The form a filter set given ``data`` validates (its errors, its
        cleaned data), without a filter set or a query."""
        form_class = cls.__dict__.get("_form_class") or cls().get_form_class()
        return form_class(data)


class HardwareFilterSet(SharedFormFilterSet):
    """The hardware list's filters: what ``filterset_fields`` made of these
    fields on every request, a class and a form class each time, made once."""

    class Meta:
        model = Hardware
        fields = ["disk_type", "raid_level"]


class RunFilterSet(FacetFilters, SharedFormFilterSet):
    """Filters on every environment and hardware field of a run."""

    q = filters.CharFilter(method="search", label="Free-text search")
    # A host baseline runs no hypervisor of its own: it is listed under the
    # platform of the listed guests measured against it, so filtering by
    # Proxmox keeps the Proxmox guests' baselines.  Only listed guests count:
    # a private or hidden guest must not show through its host.
    platform = filters.MultipleChoiceFilter(
        choices=Platform.choices, method="platform_or_guests_platform"
    )
    iothread = filters.BooleanFilter(label=LABELS["iothread"])
    visibility = _multi(Visibility)
    disk_model = filters.CharFilter(
        field_name="hardware__disk_model__name",
        lookup_expr="icontains",
        label="Disk model contains",
    )
    cpu = filters.CharFilter(
        field_name="hardware__cpu_model__name",
        lookup_expr="icontains",
        label="CPU model contains",
    )
    guest_os = filters.CharFilter(
        field_name="os_name", lookup_expr="icontains", label="Operating system contains"
    )
    kernel = filters.CharFilter(lookup_expr="icontains", label="Kernel contains")
    guest_filesystem = filters.CharFilter(lookup_expr="iexact")
    host_filesystem = filters.CharFilter(lookup_expr="iexact")
    hypervisor_version = filters.CharFilter(lookup_expr="icontains")
    suite_version = filters.CharFilter()
    profile = filters.CharFilter()
    pair_id = filters.CharFilter()
    sweep_id = filters.CharFilter()
    hardware = filters.NumberFilter(field_name="hardware_id", label="Hardware id")
    test_id = filters.CharFilter(method="has_test", label="Has a result of test id")
    created = DateTimeRangeFilter(
        label="Uploaded between (created_after, created_before)"
    )
    ran_at = DateTimeRangeFilter(label="Ran between (ran_at_after, ran_at_before)")
    # Only a baseline the reader may open counts (the rule of the ``baseline``
    # field, reads.shown_baseline): a private one stays unseen here too.
    has_baseline = filters.BooleanFilter(
        method="has_shown_baseline", label="Has baseline"
    )
    suspect = filters.BooleanFilter()
    ordering = StableOrderingFilter(
        fields=[(column, name) for name, column in ORDERING_FIELDS.items()],
        label="Ordering (prefix - for descending); id breaks ties",
    )

    class Meta:
        model = Run
        fields: list[str] = []

    def __init__(
        self,
        data=None,
        queryset=None,
        *,
        request=None,
        prefix=None,
        user=None,
        owner_key: str | None = None,
    ):
        super().__init__(data, queryset, request=request, prefix=prefix)
        # The reader: given, or the request's (the API's filter backend).
        if user is None and request is not None:
            user = getattr(request, "user", None)
        if owner_key is None:
            meta = getattr(request, "META", {}) if request is not None else {}
            owner_key = meta.get("HTTP_X_OWNER_KEY", "").strip()
        self.reader = (user, owner_key)

    def qs_without(self, name: str, queryset: QuerySet) -> QuerySet:
        """``queryset`` filtered by every filter of this set but ``name``'s,
        unordered: a facet's counts as if its own filter were off
        (``reads.facets_and_total``), from the values this set validated
        already instead of a filter set and form of its own per facet."""
        for field, value in self.form.cleaned_data.items():
            if field != name and field != "ordering":
                queryset = self.filters[field].filter(queryset, value)
        return queryset

    def has_shown_baseline(self, qs: QuerySet, name: str, value) -> QuerySet:
        if value is None:
            return qs
        shown = Exists(
            Run.objects.filter(readable_q(*self.reader), pk=OuterRef("baseline_id"))
        )
        return qs.filter(shown) if value else qs.exclude(shown)

    def has_test(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        """EXISTS (a result of this test id): no join that repeats runs, so
        no DISTINCT."""
        return qs.filter(
            Exists(Result.objects.filter(run_id=OuterRef("pk"), test_id=value))
        )

    def platform_or_guests_platform(self, qs: QuerySet, name: str, value) -> QuerySet:
        if not value:
            return qs
        guests = Run.objects.listed().filter(
            baseline=OuterRef("pk"), platform__in=value
        )
        return qs.filter(Q(platform__in=value) | (Q(role=Role.HOST) & Exists(guests)))

    def search(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        """Every word must appear in one of the text fields (any of them)."""
        for word in value.split()[:10]:
            cond = Q()
            for field in SEARCH_FIELDS:
                cond |= Q(**{f"{field}__icontains": word})
            qs = qs.filter(cond)
        return qs

    @property
    def qs(self) -> QuerySet:
        # Always ordered, even when the ordering parameter is absent or invalid.
        qs = super().qs
        if not qs.query.order_by:
            qs = qs.order_by(*Run._meta.ordering)
        return qs


RunFilterSet.base_filters = SharedFilters(RunFilterSet.base_filters)


def problems(errors: dict) -> str:
    """Form errors of run filters in one line: "name: message; …"."""
    return "; ".join(
        f"{field}: {' '.join(str(e) for e in messages)}"
        for field, messages in errors.items()
    )


class FilterError(ValueError):
    """Run filters that do not validate; ``errors`` maps parameter -> messages."""

    def __init__(self, filterset: RunFilterSet):
        super().__init__("invalid run filters")
        self.filterset = filterset
        self.errors = filterset.errors
