"""The v1 API: thin views over results' querysets, ingest and compare.

Uploads follow persist -> enqueue on commit -> 202 with a status URL; reads
use ``Run.objects`` querysets (``visible`` for lists and aggregates,
``readable_by`` for a single run), the shared ``RunFilterSet`` and
``results.compare``.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from functools import cached_property, partial

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.db.models.functions import Cast
from django.http import FileResponse, Http404, StreamingHttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.utils import translate_validation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from benchdb.api import serializers as s
from benchdb.api.exceptions import BundleInvalid
from benchdb.api.parsers import BODY_TEXT
from benchdb.api.permissions import (
    IsRunOwnerOrReadOnly,
    IsStaff,
    TokensBySessionOnly,
    bundle_owner_key,
    holds_owner_key,
    owner_key,
)
from benchdb.api.renderers import CSVRenderer, FastJSONRenderer
from benchdb.api.throttling import (
    ComparisonSaveThrottle,
    SubmissionAddressThrottle,
    SubmissionTokenThrottle,
    client_address,
)
from benchdb.api.validation import check_upload
from benchdb.lib.collector import paused_gc
from benchdb.results import (
    answer_cache,
    answers,
    exports,
    ingest,
    owning,
    population,
    reads,
    rows,
    similar,
)
from benchdb.results.compiled import (
    Compiled,
    execute,
    list_statements,
    params_of,
    stand_ins,
)
from benchdb.results.filters import HardwareFilterSet, RunFilterSet
from benchdb.results.models import (
    ApiToken,
    Comparison,
    Hardware,
    JSONTextField,
    Run,
    Submission,
    hash_secret,
)
from benchdb.results.tasks import (
    dump_is_current,
    enqueue,
    filtered_dump,
    read_latest_dump,
)
from benchdb.results.vocab import Visibility
from benchdb_agent import vocab as agent_vocab

ERRORS = s.ErrorsSerializer
OWNER_KEY_PARAM = OpenApiParameter(
    "X-Owner-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="The owner key an anonymous submission got back (instead of "
    "signing in).",
)


# The columns of a submission its status answer shows and others may change.
REFRESHED = ["status", "run", "errors", "attempts", "enqueued", "last_error", "updated"]


def error_responses(*codes: int) -> dict:
    return {code: OpenApiResponse(ERRORS) for code in codes}


class StablePagination(PageNumberPagination):
    """Page numbers over a queryset that is always fully ordered.  The rows
    are counted up to a cap (``reads.IdPaginator``, ``BENCHDB_COUNT_CAP``):
    ``count`` is exact below it and null above it, ``count_capped`` says
    which, and ``count_estimate`` is the count or, above the cap,
    PostgreSQL's estimate."""

    page_size_query_param = "page_size"
    max_page_size = 500
    # Ids first, then the page's rows (reads.IdPaginator).
    django_paginator_class = reads.IdPaginator

    def paginate_queryset(self, queryset, request, view=None):
        # A list the view found compiled SQL for (``compiled_list``).
        compiled = getattr(view, "_compiled_list", None)
        if compiled is not None:
            self.django_paginator_class = partial(
                CompiledIdPaginator,
                statements=compiled[0],
                values=compiled[1],
                read=self.compiled_read(request),
            )
        return super().paginate_queryset(queryset, request, view)

    def compiled_read(self, request):
        """The rows of a compiled list's page from its ``values()`` rows."""
        return list

    def get_paginated_response(self, data):
        paginator = self.page.paginator
        return Response(
            {
                "count": None if paginator.capped else paginator.count,
                "count_capped": paginator.capped,
                "count_estimate": paginator.estimate,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema):
        answer = super().get_paginated_response_schema(schema)
        props = answer["properties"]
        cap = settings.BENCHDB_COUNT_CAP
        props["count"] = {
            "type": "integer",
            "nullable": True,
            "example": 123,
            "description": f"The rows listed, exact up to the cap ({cap}, "
            "BENCHDB_COUNT_CAP); null above it (count_capped).",
        }
        props["count_capped"] = {
            "type": "boolean",
            "description": "True when the list holds more rows than the cap: "
            "count is null, count_estimate is PostgreSQL's estimate.",
        }
        props["count_estimate"] = {
            "type": "integer",
            "example": 123,
            "description": "count when exact; above the cap, PostgreSQL's "
            "estimate of the rows (never below the cap).",
        }
        answer["properties"] = {
            name: props[name]
            for name in ("count", "count_capped", "count_estimate", *props)
            if name in props
        }
        answer["required"] = list(answer["properties"])
        return answer


class CompiledIdPaginator(reads.IdPaginator):
    """``reads.IdPaginator`` sending a list's ``ListStatements`` (compiled
    once per shape of its filters, ``compiled_run_list``) with this
    request's ``values``: the same queries, the same pages.  ``read`` takes
    the page's ``values()`` rows."""

    def __init__(self, object_list, per_page, *, statements, values, **kwargs):
        super().__init__(object_list, per_page, **kwargs)
        self.statements, self.values = statements, values

    @cached_property
    def count(self) -> int:
        return execute(self.statements.count, self.values)[0][0]

    def estimated(self) -> int:
        pks = self.statements.pks
        return reads.estimated_rows(pks.sql, params_of(pks, self.values))

    def page_rows(self, bottom: int, top: int) -> list:
        if top <= bottom:  # an empty slice: no query, as Django's
            return self.read([])
        page = self.statements.page
        found = execute(page, self.values, self.statements.page_sql(bottom, top))
        return self.read([dict(zip(page.names, row, strict=True)) for row in found])


class RunListPagination(StablePagination):
    """The run list's pages as ``reads.list_rows`` (``rows.run_row``s) for
    the request's reader, read by ids first (``reads.IdPaginator``), by
    compiled SQL where the view found it (``compiled_run_list``)."""

    def compiled_read(self, request):
        links = s.run_links(request)
        return lambda values: reads.list_rows_of(values, links)

    def paginate_queryset(self, queryset, request, view=None):
        compiled = getattr(view, "_compiled_list", None)
        if compiled is None and getattr(view, "action", None) == "list":
            links, reader = s.run_links(request), (request.user, owner_key(request))
            self.django_paginator_class = partial(
                reads.IdPaginator,
                rows=reads.list_page_rows,
                read=lambda qs: reads.list_rows(qs, links, *reader),
            )
        return super().paginate_queryset(queryset, request, view)


def readable_runs(request):
    """Runs this request may open (``reads.readable_runs``)."""
    return reads.readable_runs(request.user, owner_key(request))


# The run list for a reader anyone could be --------------------------------
# Building and compiling the list's three queries (count, estimate, page)
# cost Django more than PostgreSQL takes to answer them.  Their SQL depends
# on which filters are given, how many values each has, the booleans and
# the ordering (the shape): compiled once per shape with stand-ins for the
# text values, which a request puts in their places (``compiled``).  A
# filter whose value is not a parameter of its own (a LIKE pattern, a
# date, a number) leaves its shape to the query set, as before.


def _filter_shape(cleaned: dict) -> tuple[tuple, dict] | None:
    """(shape, text values by name) of a run filter form's cleaned data;
    None where a value is neither text, a list of text nor a boolean."""
    shape, values = [], {}
    for name, value in cleaned.items():
        if name == "ordering":
            shape.append((name, tuple(value) if value else None))
        elif value is None or isinstance(value, bool):
            shape.append((name, value))
        elif value == "" or value == []:
            shape.append((name, None))
        elif isinstance(value, str):
            values[name] = value
            shape.append((name, "text"))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            for i, v in enumerate(value):
                values[f"{name}.{i}"] = v
            shape.append((name, ("texts", len(value))))
        else:
            return None
    return tuple(shape), values


def _cleaned_of(shape: tuple, values: dict) -> dict:
    """The cleaned data ``_filter_shape`` read ``shape`` and ``values`` from
    (an empty value as None: every filter skips both)."""
    cleaned = {}
    for name, kind in shape:
        if kind == "text":
            cleaned[name] = values[name]
        elif isinstance(kind, tuple) and kind and kind[0] == "texts":
            cleaned[name] = [values[f"{name}.{i}"] for i in range(kind[1])]
        elif name == "ordering" and kind:
            cleaned[name] = list(kind)
        else:
            cleaned[name] = kind
    return cleaned


def _filtered(filterset_class, base, shape: tuple, stand_in: dict):
    """``base`` filtered as a valid form's cleaned data of ``shape`` (with
    ``stand_in``'s values) filters it, then ordered: the filter set's
    ``qs``."""
    filters = filterset_class(queryset=base.none())
    for name, value in _cleaned_of(shape, stand_in).items():
        base = filters.filters[name].filter(base, value)
    if not base.query.order_by:
        base = base.order_by(*base.model._meta.ordering)
    return base


def _anyone_run_list(shape: tuple, values: dict, cap: int):
    """``ListStatements`` of the run list an anonymous reader is given,
    filtered by ``shape`` with stand-ins for ``values`` (None: not
    compilable)."""
    stand_in = stand_ins(values)
    runs = reads.list_columns(reads.run_list(None))
    runs = _filtered(RunFilterSet, runs, shape, stand_in)
    order = runs.query.order_by

    def rows_of(ids):
        return reads.list_values(reads.list_page_rows(ids).order_by(*order))

    return list_statements(runs, rows_of, stand_in, cap)


def _hardware_list(shape: tuple, values: dict, cap: int):
    """``ListStatements`` of the hardware list (the same for every reader),
    its rows as ``rows.hardware_row`` reads them."""
    stand_in = stand_ins(values)
    hardware = _filtered(HardwareFilterSet, reads.hardware_list(), shape, stand_in)
    hardware = hardware.values(*rows.HARDWARE_PATHS, "run_count")
    # IdPaginator's rows without ``rows``: the list's own query, by ids.
    return list_statements(
        hardware, lambda ids: hardware.filter(pk__in=ids), stand_in, cap
    )


def compiled_list(filterset_class, params, make) -> tuple | None:
    """(statements, values) of a list filtered by ``params`` when their
    shape compiles (``make(shape, values, cap)``, kept per shape and cap);
    invalid filters answer 400 as the filter backend does."""
    errors, cleaned = checked_filters(filterset_class, params)
    if errors:
        raise translate_validation(errors)
    found = _filter_shape(cleaned)
    if found is None:
        return None
    shape, values = found
    cap = reads.count_cap()
    statements = _kept(_LIST_SQL, (make, shape, cap), lambda: make(shape, values, cap))
    return None if statements is None else (statements, values)


# Shape -> its statements (None: not compilable), the most recent kept.
_LIST_SQL: OrderedDict = OrderedDict()
# Query parameters (but the page number) -> their filter form's errors and
# cleaned data: a pure function of them, kept rather than validated again.
_CHECKED: OrderedDict = OrderedDict()
_KEPT = 256
_KEPT_LOCK = threading.Lock()  # gthread workers share them


def _kept(kept: OrderedDict, key, make):
    """``kept[key]``, made by ``make()`` when missing; the ``_KEPT`` most
    recently used are kept."""
    with _KEPT_LOCK:
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
    made = make()
    with _KEPT_LOCK:
        kept[key] = made
        while len(kept) > _KEPT:
            kept.popitem(last=False)
    return made


def checked_filters(filterset_class, params) -> tuple[dict, dict]:
    """(errors, cleaned data) of ``filterset_class``'s form of ``params``
    (``bound_form``), kept for the most recent parameters: a pure function
    of them, whose validation was a large part of a small answer's time."""

    def check():
        form = filterset_class.bound_form(params)
        return form.errors, (form.cleaned_data if not form.errors else {})

    key = tuple((name, tuple(v)) for name, v in params.lists() if name != "page")
    return _kept(_CHECKED, (filterset_class, key), check)


# Submissions -----------------------------------------------------------------


def _json_text(text: str) -> Cast:
    """JSON text for a ``JSONTextField`` column, kept by PostgreSQL as it is."""
    return Cast(Value(text), output_field=JSONTextField())


def _as_sent(request, doc: dict):
    """The bundle for ``Submission.bundle``: the body's JSON text as sent
    (``parsers.BODY_TEXT``), kept as it is, instead of ``doc`` encoded
    again (2-3 ms of a standard bundle's upload).  The same value as ``doc``
    (the parser refuses duplicate keys, NaN and Infinity): the worker reads
    back what this request checked."""
    text = getattr(request, BODY_TEXT, None)
    return doc if text is None else _json_text(text)


def _encoded(value):
    """``value`` for a ``JSONTextField`` column, encoded by orjson (the same
    value as json.dumps gives; json's encoder where orjson has no answer,
    e.g. an integer past 64 bits)."""
    try:
        return _json_text(orjson.dumps(value).decode())
    except TypeError:
        return value


@extend_schema_view(
    retrieve=extend_schema(
        summary="Status of a submission",
        description="queued, processing, done (with the run's URL) or failed "
        "(with the reasons, as JSON pointers into the bundle).",
        responses={200: s.SubmissionSerializer, **error_responses(404)},
    ),
)
class SubmissionViewSet(
    mixins.CreateModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = Submission.objects.order_by("pk")
    serializer_class = s.SubmissionSerializer
    lookup_field = "bundle_id"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    permission_classes = [permissions.AllowAny]
    filter_backends: list = []

    def get_throttles(self):
        if self.action == "create":
            return [SubmissionTokenThrottle(), SubmissionAddressThrottle()]
        return super().get_throttles()

    def get_object(self):
        try:
            uuid.UUID(self.kwargs["bundle_id"])
        except ValueError:
            raise exceptions.NotFound() from None
        return super().get_object()

    @extend_schema(
        summary="Upload a bundle",
        description=(
            "Validates the bundle (docs/bundle.md), stores it and queues its "
            "ingestion; answers 202 at once with the status URL. A bundle "
            "already received (same bundle_id) answers 200 with the existing "
            "submission and creates nothing (an anonymous resend of the very "
            "same bundle gets its owner key again, in case the first answer was "
            "lost); one whose run was deleted is ingested again (202). "
            "Anonymous uploads (when allowed) get an owner key, derived from "
            "the bundle. Field errors are JSON pointers."
        ),
        request={"application/json": OpenApiTypes.OBJECT},
        parameters=[
            OpenApiParameter(
                "visibility",
                OpenApiTypes.STR,
                enum=[v for v, _ in agent_vocab.VISIBILITY],
                description="public (default), unlisted or private",
            )
        ],
        responses={
            202: s.SubmissionCreatedSerializer,
            200: s.SubmissionSerializer,
            **error_responses(400, 401, 413, 415, 429),
        },
    )
    # The bundle decoded, checked, kept and answered with no collector walk
    # over its objects (benchdb/lib/collector.py).
    @paused_gc()
    def create(self, request, *args, **kwargs):
        user = request.user if request.user.is_authenticated else None
        if user is None and not settings.ALLOW_ANONYMOUS_SUBMISSIONS:
            raise exceptions.NotAuthenticated(
                "Anonymous submissions are disabled: send 'Authorization: Token "
                "<key>' (manage.py create_api_token USERNAME)."
            )
        visibility = request.query_params.get("visibility", Visibility.PUBLIC)
        if visibility not in Visibility.values:
            raise BundleInvalid(
                [
                    {
                        "pointer": None,
                        "message": f"visibility {visibility!r} is not one of "
                        f"{', '.join(Visibility.values)}",
                    }
                ]
            )
        doc = request.data
        checked = check_upload(doc, allow_published=bool(user and user.is_staff))
        if checked.errors:
            raise BundleInvalid(checked.errors)
        bundle_id = uuid.UUID(doc["bundle_id"])
        existing = (
            Submission.objects.defer("bundle", "parsed")
            .filter(bundle_id=bundle_id)
            .first()
        )
        key = bundle_owner_key(doc) if user is None else None
        deleted = (
            existing is not None
            and existing.run_id is None
            and (existing.status == Submission.Status.DONE)
        )
        if existing is not None and not deleted:
            return self._existing(existing, key)
        fields = {
            "bundle": _as_sent(request, doc),
            # The raw outputs as the check just parsed them: the worker
            # stores these records (ingest.parsed_of).
            "parsed": _encoded(ingest.parsed_of(checked)),
            "submitted_by": user,
            "owner_key_hash": hash_secret(key) if key else "",
            "visibility": visibility,
            "remote_addr": client_address(request),
        }
        queued = {}
        try:
            with transaction.atomic():
                if existing is None:
                    sub = Submission.objects.create(bundle_id=bundle_id, **fields)
                else:
                    # Its run was deleted: the same bundle may be sent again,
                    # and is ingested again on the same row.
                    sub = self._again(existing, fields)
                    if sub is None:
                        return self._existing(existing, key)
                # After the commit, so the worker finds the row; at once (the
                # commit is this block's end), so the answer can say whether
                # the message reached the broker.
                transaction.on_commit(lambda: queued.update(ok=enqueue(sub.pk)))
        except IntegrityError:
            # The same bundle arrived twice at once: the other request won.
            return self._existing(
                Submission.objects.defer("bundle", "parsed").get(bundle_id=bundle_id),
                key,
            )
        # What enqueue (or a fast worker) changed; not the bundle and what
        # was parsed from it, which this request sent and would decode again.
        sub.refresh_from_db(fields=REFRESHED)
        sub.owner_key = key
        data = s.SubmissionCreatedSerializer(sub, context={"request": request}).data
        if queued.get("ok") is False:
            return self._not_queued(data)
        return Response(
            data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": data["status_url"]},
        )

    @staticmethod
    def _again(sub: Submission, fields: dict) -> Submission | None:
        """The row of a done submission whose run was deleted, queued again
        with this upload's bundle and owner; None if it changed meanwhile."""
        locked = (
            Submission.objects.select_for_update()
            .filter(pk=sub.pk, status=Submission.Status.DONE, run__isnull=True)
            .first()
        )
        if locked is None:
            return None
        for name, value in fields.items():
            setattr(locked, name, value)
        locked.status = Submission.Status.QUEUED
        locked.errors, locked.attempts = [], 0
        locked.enqueued, locked.last_error = None, ""
        locked.save()
        return locked

    def _existing(self, sub: Submission, key: str | None = None) -> Response:
        """A bundle received before: 200 with its status; a submission whose
        message never reached the broker is queued now (202), or 503 again.

        An anonymous resend of the very same bundle gets its owner key again
        (``bundle_owner_key``): the first answer may never have arrived."""
        if key is None or not holds_owner_key(sub, key):
            key = None
        serializer = s.SubmissionCreatedSerializer if key else s.SubmissionSerializer
        # enqueued NULL with an error: its enqueue failed (not merely "in
        # flight" in the request that stored it a moment ago).
        not_queued = sub.enqueued is None and bool(sub.last_error)
        requeued = sub.status == Submission.Status.QUEUED and not_queued
        if requeued:
            ok = enqueue(sub.pk)
            sub.refresh_from_db(fields=REFRESHED)
        sub.owner_key = key
        data = serializer(sub, context={"request": self.request}).data
        if requeued and not ok:
            return self._not_queued(data)
        if requeued:
            return Response(
                data,
                status=status.HTTP_202_ACCEPTED,
                headers={"Location": data["status_url"]},
            )
        return Response(data, status=status.HTTP_200_OK)

    def _not_queued(self, data: dict) -> Response:
        """503: stored, but the broker could not be reached.  The submission
        (and an anonymous owner key, shown only here) is in the body; resend
        the same bundle after Retry-After, or wait: it is queued by itself
        once the broker is back (tasks.requeue_stale)."""
        retry = settings.SUBMISSION_RETRY_AFTER_S
        body = {
            **data,
            "errors": [
                {
                    "pointer": None,
                    "message": "The bundle is stored but its ingest could not be "
                    "queued (the task broker is unreachable). Send the same bundle "
                    f"again in {retry} s, or follow status_url: it is queued by "
                    "itself once the broker is back.",
                    "code": "queue_unavailable",
                }
            ],
        }
        return Response(
            body,
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(retry), "Location": data["status_url"]},
        )


# Runs ------------------------------------------------------------------------


def similar_runs(user, key: str, asked: tuple | None):
    """The runs a reader may rank among similar systems (the similar
    action's query set): what it reads of a run, the match facets and the
    disk type, not the other 50 columns nor the baseline's row; with its
    result's key and figure (``asked``: (test id, metric), valid ones)."""
    runs = (
        reads.readable_runs(user, key)
        .select_related("hardware")
        .only(*reads.SIMILAR_READ, "hardware__disk_type")
        .order_by("-created", "-id")
    )
    if asked is not None:
        runs = runs.annotate(**similar.similar_result(*asked))
    return runs


# The run to rank as ``similar_runs`` reads it for a reader anyone could be:
# its columns (in the model's order), its hardware's disk type, its result's.
_RANKED = [f.attname for f in Run._meta.concrete_fields if f.name in reads.SIMILAR_READ]
_RESULT = ("similar_key", "similar_value", "similar_comparable")
RUN_TO_RANK = Compiled(
    lambda metric, pk, test_id: (
        similar_runs(None, "", (test_id, metric))
        .filter(pk=pk)
        .order_by()
        .values_list(*_RANKED, "hardware__disk_type", *_RESULT)
    )
)


def run_to_rank(row: tuple) -> Run:
    """A ``RUN_TO_RANK`` row as the run ``similar_runs`` gives: its columns
    loaded, its hardware's disk type, its result's annotations."""
    db = Run.objects.db
    n = len(_RANKED)
    run = Run.from_db(db, _RANKED, row[:n])
    disk_type = row[n]
    for name, value in zip(_RESULT, row[n + 1 :], strict=True):
        setattr(run, name, value)
    hardware = None
    if run.hardware_id is not None:
        hardware = Hardware.from_db(
            db, ["id", "disk_type"], [run.hardware_id, disk_type]
        )
    Run._meta.get_field("hardware").set_cached_value(run, hardware)
    return run


EXPORT_PARAM = OpenApiParameter(
    "format",
    OpenApiTypes.STR,
    enum=["json", "csv"],
    description="json (default) or csv",
)


@extend_schema_view(
    list=extend_schema(
        summary="List runs",
        description="Public, not hidden runs (or your own with mine=true), "
        "filtered by any environment or hardware facet, searched with q, "
        "ordered (always with id as the tie-breaker) and paginated.",
        parameters=[
            OpenApiParameter(
                "mine",
                OpenApiTypes.BOOL,
                description="Only your own runs (any "
                "visibility); needs a signed-in user or token.",
            )
        ],
        # 404: a page number past the last page.
        responses={200: s.RunListSerializer(many=True), **error_responses(400, 404)},
    ),
    retrieve=extend_schema(
        summary="A run with every test's statistics and repeats",
        description="A hidden run is shown with its reason to its owner and "
        "staff; anyone else gets 410 Gone with the reason (`hidden_reason`), "
        "as on its page. Overhead is the guest figure divided by its host "
        "baseline's.",
        parameters=[OWNER_KEY_PARAM],
        responses={200: s.RunDetailSerializer, **error_responses(404, 410)},
    ),
    partial_update=extend_schema(
        summary="Edit a run's title, notes, visibility or tags (owner only)",
        parameters=[OWNER_KEY_PARAM],
        request=s.RunUpdateSerializer,
        responses={200: s.RunDetailSerializer, **error_responses(400, 403, 404)},
    ),
    destroy=extend_schema(
        summary="Delete a run (owner only)",
        parameters=[OWNER_KEY_PARAM],
        responses={204: None, **error_responses(403, 404)},
    ),
)
class RunViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    filter_backends = [DjangoFilterBackend]
    filterset_class = RunFilterSet
    pagination_class = RunListPagination
    permission_classes = [IsRunOwnerOrReadOnly]

    def get_queryset(self):
        if self.action in ("list", "export"):
            mine = self.request.query_params.get("mine") in ("true", "1", "yes")
            try:
                runs = reads.run_list(self.request.user, mine=mine)
            except PermissionError as exc:
                raise exceptions.NotAuthenticated(str(exc)) from None
            return reads.list_columns(runs) if self.action == "list" else runs
        if self.action == "similar":
            return similar_runs(
                self.request.user,
                owner_key(self.request),
                getattr(self, "_similar_asked", None),
            )
        if self.action in ("retrieve", "partial_update"):
            # The results: reads.attach_tests, after the visibility checks.
            qs = reads.detail_runs(self.request.user, owner_key(self.request))
        else:
            qs = readable_runs(self.request).select_related(
                "hardware", "hardware__cpu_model", "hardware__disk_model", "baseline"
            )
        return qs.order_by("-created", "-id")

    def filter_queryset(self, queryset):
        # One run by its id with no query parameters: the filter set would
        # filter nothing, and building and validating its form is a large
        # part of a detail's time.  With parameters it applies.
        if self.detail and not self.request.query_params:
            return queryset
        return super().filter_queryset(queryset)

    def get_object(self):
        try:
            return super().get_object()
        except Http404:
            # A hidden run (readable by its owner and staff only): 410 with
            # the reason for anyone else, as its page answers
            # (reads.check_gone; RunHidden becomes 410 in api/exceptions.py).
            reads.check_gone(self.kwargs[self.lookup_url_kwarg or self.lookup_field])
            raise

    def get_serializer_class(self):
        if self.action == "retrieve":
            return s.RunDetailSerializer
        if self.action == "partial_update":
            return s.RunUpdateSerializer
        return s.RunListSerializer

    def get_serializer_context(self):
        context = super().get_serializer_context()
        run = getattr(self, "_detail_run", None)
        if run is not None:
            baseline, overheads = reads.run_overheads(
                run, self.request.user, owner_key(self.request)
            )
            context["baseline_results"] = baseline
            context["overheads"] = overheads
        return context

    def _with_tests(self, run):
        return reads.attach_tests(run, self.request.user, owner_key(self.request))

    def _detail(self, run) -> dict:
        """The detail answer of ``run`` (``attach_tests``); its results are
        released once written (``reads.release``)."""
        self._detail_run = run
        context = self.get_serializer_context()
        try:
            return s.RunDetailSerializer(run, context=context).data
        finally:
            # The answer keeps its serializer and context, and DRF's response
            # and view reference each other: what they hold waits for the
            # garbage collector.  Not the results.
            self._detail_run = None
            context.pop("baseline_results", None)
            context.pop("overheads", None)
            reads.release(run)

    def list(self, request, *args, **kwargs):
        # The page holds the rows as served (RunListPagination).
        self._compiled_list = self.compiled_run_list()
        if self._compiled_list is not None:
            queryset = Run.objects.none()  # the paginator sends the statements
        else:
            queryset = self.filter_queryset(self.get_queryset())
        return self.get_paginated_response(self.paginate_queryset(queryset))

    def compiled_run_list(self) -> tuple | None:
        """(statements, values) of this list when a reader anyone could be
        (not signed in, no owner key, not ``mine``) asks for it with filters
        of a compilable shape; invalid filters answer 400 as the filter
        backend does."""
        request = self.request
        params = request.query_params
        if (
            request.user.is_authenticated
            or owner_key(request)
            or params.get("mine") in ("true", "1", "yes")
        ):
            return None
        return compiled_list(RunFilterSet, params, _anyone_run_list)

    def retrieve(self, request, *args, **kwargs):
        return Response(self._detail(self._with_tests(self.get_object())))

    def perform_destroy(self, instance):
        owning.delete_run(instance)

    def partial_update(self, request, *args, **kwargs):
        run = self.get_object()
        serializer = s.RunUpdateSerializer(run, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        owning.edit_run(run, serializer.validated_data)
        run = self._with_tests(self.get_queryset().get(pk=run.pk))
        return Response(self._detail(run))

    @extend_schema(
        summary="Claim an anonymous run into your account",
        description="Needs a signed-in user (or token) and the run's owner key "
        "in X-Owner-Key; the key stops working afterwards.",
        request=None,
        parameters=[OWNER_KEY_PARAM],
        responses={200: s.RunListSerializer, **error_responses(401, 403, 404)},
    )
    @action(
        detail=True, methods=["post"], permission_classes=[permissions.IsAuthenticated]
    )
    def claim(self, request, pk=None):
        run = self.get_object()
        if not owning.claim_run(run, request.user, owner_key(request)):
            raise exceptions.PermissionDenied("X-Owner-Key does not match this run.")
        return Response(s.RunListSerializer(run, context={"request": request}).data)

    @extend_schema(
        summary="Moderate a run (staff)",
        description="flag/unflag marks it suspect with a reason; hide/unhide "
        "takes it out of lists and aggregates (its page says why).",
        request=s.ModerationSerializer,
        responses={200: s.RunListSerializer, **error_responses(400, 401, 403, 404)},
    )
    @action(detail=True, methods=["post"], permission_classes=[IsStaff])
    def moderate(self, request, pk=None):
        run = self.get_object()
        serializer = s.ModerationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run.moderate(
            serializer.validated_data["action"],
            serializer.validated_data.get("reason", "").strip(),
        )
        return Response(s.RunListSerializer(run, context={"request": request}).data)

    @extend_schema(
        summary="Percentile rank among similar systems",
        description="Among visible, not suspect runs with a result of the same "
        "comparability key on the same disk type (and the same values of the "
        "match facets).",
        parameters=[s.SimilarQuerySerializer, OWNER_KEY_PARAM],
        responses={200: s.SimilarSerializer, **error_responses(400, 404, 410)},
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def similar(self, request, pk=None):
        try:
            q = s.validated(s.SimilarQuerySerializer, request.query_params)
        except exceptions.ValidationError as exc:
            q, invalid = {}, exc
        else:
            invalid = None
            self._similar_asked = (q["test_id"], q["metric"])
        run = self._run_to_rank()  # 404 and 410 before 400, as always
        if invalid is not None:
            raise invalid
        try:
            answer = reads.similar(run, q["test_id"], q["metric"], q.get("match"))
        except LookupError as exc:
            raise exceptions.NotFound(str(exc)) from None
        return Response(s.represent(s.SimilarSerializer, answer))

    def _run_to_rank(self) -> Run:
        """``get_object`` of the similar action: for a reader anyone could be
        (not signed in, no owner key) asking a valid question, by the SQL of
        its query set compiled once per metric (``RUN_TO_RANK``)."""
        request, asked = self.request, getattr(self, "_similar_asked", None)
        if asked is None or request.user.is_authenticated or owner_key(request):
            return self.get_object()
        pk = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        try:
            found = RUN_TO_RANK.rows(asked[1], pk=int(pk), test_id=asked[0])
        except ValueError:  # as the query set's lookup of a pk that is none
            found = []
        if not found:
            reads.check_gone(pk)
            raise Http404
        run = run_to_rank(found[0])
        self.check_object_permissions(request, run)
        return run

    @extend_schema(
        summary="Export a run list (one row per run and test), a page at a time",
        description="Streams the results of up to `limit` runs (default "
        f"{exports.PAGE_RUNS}, at most {exports.MAX_PAGE_RUNS}) in run id order, "
        "filtered like the list. The next page's URL is in the Link header "
        '(rel="next") and in JSON\'s `next`; the last page has none. All public '
        "runs at once: the compressed dump, /api/v1/dump/.",
        parameters=[
            EXPORT_PARAM,
            OpenApiParameter("cursor", OpenApiTypes.INT, description="after run id"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="runs per page"),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiTypes.STR,
            **error_responses(400),
        },
    )
    @action(
        detail=False,
        methods=["get"],
        renderer_classes=[JSONRenderer, CSVRenderer],
        pagination_class=None,
    )
    def export(self, request):
        runs = self.filter_queryset(self.get_queryset())
        fmt = "csv" if request.accepted_renderer.format == "csv" else "json"
        try:
            return exports.run_export_response(request, runs, fmt)
        except exports.ExportError as exc:
            raise exceptions.ValidationError({exc.parameter: [str(exc)]}) from None


# Compare, aggregates, vocabularies, hardware ---------------------------------


def _nested(field: str, message: str) -> dict:
    """``options/metric`` -> {"options": {"metric": [message]}}: the error's
    pointer names the exact key."""
    detail: object = [message]
    for part in reversed(field.split("/")):
        detail = {part: detail}
    return detail


def compare_runs(request, run_ids: list[int], reference_id: int | None) -> dict:
    """``reads.comparison`` for this request; 400 naming the bad field."""
    try:
        _runs, _reference, data = reads.comparison(
            run_ids, reference_id, request.user, owner_key(request)
        )
    except reads.ReadError as exc:
        raise exceptions.ValidationError({exc.field: [exc.message]}) from None
    except reads.NotReadable as exc:
        raise exceptions.ValidationError({"runs": [str(exc)]}) from None
    return data


class CompareView(APIView):
    renderer_classes = [FastJSONRenderer, CSVRenderer]

    @extend_schema(
        summary="Compare runs: means, intervals, deltas and significance",
        description="For every test the runs share (same comparability key): "
        "each run's mean, geometric mean and its 95% interval (log scale, 3+ "
        "repeats), the ratio to the reference with its interval (Welch's t-test "
        "on the logs), the p-value Holm-corrected over the runs compared, and a "
        "verdict: faster, slower, equivalent (interval within the equivalence "
        "margin) or cannot tell (with the repeats that would be needed). "
        "Guest runs with a visible host baseline carry their overhead.",
        parameters=[s.CompareQuerySerializer, EXPORT_PARAM, OWNER_KEY_PARAM],
        responses={
            (200, "application/json"): s.ComparisonResultSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **error_responses(400),
        },
    )
    # Its reads, checks and answer with no collector pass either
    # (compare.comparison pauses it while the answer is computed).
    @paused_gc()
    def get(self, request):
        query = s.CompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        result = compare_runs(
            request, query.validated_data["runs"], query.validated_data.get("reference")
        )
        if request.accepted_renderer.format == "csv":
            return exports.comparison_csv_response(result, "benchdb-compare")
        return Response(result)


def filter_parameters() -> list[OpenApiParameter]:
    """RunFilterSet's parameters for views that are not lists (aggregates)."""
    params = []
    for name, flt in RunFilterSet.base_filters.items():
        if name == "ordering":
            continue
        kind = type(flt).__name__
        if "Range" in kind:
            for suffix in ("after", "before"):
                params.append(
                    OpenApiParameter(f"{name}_{suffix}", OpenApiTypes.DATETIME)
                )
        elif kind == "BooleanFilter":
            params.append(OpenApiParameter(name, OpenApiTypes.BOOL))
        elif kind == "MultipleChoiceFilter":
            params.append(
                OpenApiParameter(
                    name,
                    OpenApiTypes.STR,
                    many=True,
                    explode=True,
                    enum=[c[0] for c in flt.extra["choices"]],
                )
            )
        elif kind == "NumberFilter":
            params.append(OpenApiParameter(name, OpenApiTypes.INT))
        else:
            params.append(OpenApiParameter(name, OpenApiTypes.STR))
    return params


# Parameters of the aggregates view that are not run filters.
AGGREGATE_OWN_PARAMS = ("test_id", "metric", "group_by", "comparability_key", "format")


class AggregatesView(APIView):
    @extend_schema(
        summary="Distribution of a test's metric, grouped by a facet",
        description="count, min, quartiles, median and max computed in "
        "PostgreSQL over visible runs narrowed by any run filter, e.g. 4k random "
        "read IOPS at QD1 by cache_mode for disk_type=nvme-ssd&platform=proxmox. "
        "Suspect runs are left out unless the suspect filter is given.",
        parameters=[s.AggregateQuerySerializer, *filter_parameters()],
        responses={200: s.AggregateSerializer, **error_responses(400)},
    )
    def get(self, request):
        q = s.validated(s.AggregateQuerySerializer, request.query_params)
        # Stored and served by the data version (results.answer_cache); the
        # filters are the answer's arguments, minus this view's own.
        filters = population.filter_items(request.query_params, AGGREGATE_OWN_PARAMS)
        try:
            answer, found = answers.aggregates.with_freshness(
                filters,
                q["test_id"],
                q["metric"],
                q.get("group_by"),
                q.get("comparability_key"),
            )
        except reads.FilterError as exc:
            raise exceptions.ValidationError(exc.errors) from None
        answer = {**answer, "freshness": answer_cache.freshness_of(found)}
        return Response(s.represent(s.AggregateSerializer, answer))


class VocabulariesView(APIView):
    @extend_schema(
        summary="Vocabularies for filter menus, tags, metrics and units",
        responses={200: s.VocabulariesSerializer},
    )
    def get(self, request):
        return Response(reads.vocabularies())


@extend_schema_view(
    list=extend_schema(
        summary="Hardware that visible runs ran on",
        responses={200: s.HardwareSerializer(many=True), **error_responses(404)},
    ),
    retrieve=extend_schema(
        summary="One hardware description",
        responses={200: s.HardwareSerializer, **error_responses(404)},
    ),
)
class HardwareViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = s.HardwareSerializer
    pagination_class = StablePagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = HardwareFilterSet

    def get_queryset(self):
        return reads.hardware_list()

    def list(self, request, *args, **kwargs):
        # The page's rows read as ``rows.hardware_row`` reads them (a
        # ``values()`` query of its paths and run count, the same joins),
        # not as model instances then serialized one by one; by SQL compiled
        # once per shape of the filters (``compiled_list``).
        self._compiled_list = compiled_list(
            HardwareFilterSet, request.query_params, _hardware_list
        )
        if self._compiled_list is not None:
            page = self.paginate_queryset(Hardware.objects.none())
        else:
            queryset = self.filter_queryset(self.get_queryset())
            page = self.paginate_queryset(
                queryset.values(*rows.HARDWARE_PATHS, "run_count")
            )
        return self.get_paginated_response([rows.hardware_row(v) for v in page])


# Saved comparisons, tokens, dump ----------------------------------------------


class ComparisonViewSet(
    mixins.CreateModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = Comparison.objects.order_by("pk")
    lookup_field = "slug"
    lookup_value_regex = "[A-Za-z0-9]{1,16}"
    serializer_class = s.SavedComparisonSerializer
    permission_classes = [permissions.AllowAny]
    filter_backends: list = []

    def get_throttles(self):
        if self.action == "create":
            return [*super().get_throttles(), ComparisonSaveThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Save a comparison as a share link",
        request=s.ComparisonCreateSerializer,
        responses={201: s.ComparisonSerializer, **error_responses(400)},
    )
    def create(self, request, *args, **kwargs):
        body = s.ComparisonCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            saved = reads.save_comparison(
                data["runs"],
                data.get("reference"),
                title=data.get("title", ""),
                options=data.get("options") or {},
                user=request.user,
                owner_key=owner_key(request),
            )
        except reads.ReadError as exc:
            raise exceptions.ValidationError(_nested(exc.field, exc.message)) from None
        except reads.NotReadable as exc:
            raise exceptions.ValidationError({"runs": [str(exc)]}) from None
        out = s.ComparisonSerializer(saved, context={"request": request}).data
        return Response(out, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="A saved comparison, computed now",
        description="Runs that are no longer readable (deleted, made private, "
        "hidden by the moderators) are left out and counted in "
        "`unavailable_runs`; `comparison` is null when none is left.",
        responses={200: s.SavedComparisonSerializer, **error_responses(404)},
    )
    def retrieve(self, request, *args, **kwargs):
        saved = self.get_object()
        view_of = reads.saved_comparison(saved, request.user, owner_key(request))
        context = {"request": request, "view_of": view_of}
        return Response(s.SavedComparisonSerializer(saved, context=context).data)


@extend_schema_view(
    list=extend_schema(
        summary="Your API tokens (secrets are never shown again)",
        responses={200: s.ApiTokenSerializer(many=True), **error_responses(401, 404)},
    ),
    create=extend_schema(
        summary="Create a token; the key is in the answer, once",
        description="Signed in (a session) only: an API token cannot create "
        "tokens (403).",
        responses={201: s.ApiTokenCreatedSerializer, **error_responses(400, 401, 403)},
    ),
    destroy=extend_schema(
        summary="Revoke a token",
        description="Signed in (a session) only: an API token cannot revoke "
        "tokens (403).",
        responses={204: None, **error_responses(401, 403, 404)},
    ),
)
class ApiTokenViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = s.ApiTokenSerializer
    permission_classes = [permissions.IsAuthenticated, TokensBySessionOnly]
    pagination_class = StablePagination
    filter_backends: list = []

    def get_queryset(self):
        if not self.request.user.is_authenticated:
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user).order_by(
            "-created", "-id"
        )

    def create(self, request, *args, **kwargs):
        body = s.ApiTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, key = ApiToken.issue(request.user, body.validated_data["name"])
        token.key = key
        return Response(
            s.ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED
        )

    def perform_destroy(self, instance):
        instance.revoke()


class DumpView(generics.GenericAPIView):
    @extend_schema(
        summary="The latest full public dump (gzip'd CSV or JSON Lines)",
        description="All listed runs' results, written daily by the "
        "public_dump task and again within minutes of a run leaving the "
        "public set (deleted, hidden, made private or unlisted); until then "
        "that run's rows are left out as the dump is served.",
        parameters=[OpenApiParameter("kind", OpenApiTypes.STR, enum=["csv", "jsonl"])],
        responses={
            (200, "application/gzip"): OpenApiTypes.BINARY,
            **error_responses(400, 404),
        },
    )
    def get(self, request):
        kind = request.query_params.get("kind", "csv")
        if kind not in ("csv", "jsonl"):
            raise exceptions.ValidationError({"kind": ["csv or jsonl"]})
        # Asked before the file is opened: a dump written in between is newer
        # than the answer says (filtered for nothing), never older.
        current = dump_is_current()
        handle = read_latest_dump(f"{kind}.gz")
        if handle is None:
            raise exceptions.NotFound("No dump has been written yet.")
        filename = f"benchdb-public.{kind}.gz"
        if current:
            response = FileResponse(
                handle,
                as_attachment=True,
                filename=filename,
                content_type="application/gzip",
            )
        else:
            response = StreamingHttpResponse(
                filtered_dump(handle, f"{kind}.gz"), content_type="application/gzip"
            )
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
        # Served again within a minute: a cache in front must not keep rows
        # of a run taken out of the public set for longer.
        response["Cache-Control"] = "public, max-age=60"
        return response
