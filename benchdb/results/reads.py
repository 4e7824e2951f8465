"""The read path: what the pages and the API show, and to whom.

Pages (benchdb/web/views.py) and the API (benchdb/api/views.py) call these
functions with the same arguments and get the same runs, the same limits and
the same figures; the views only shape the answer (HTML or JSON).  Who may
see a run is decided by one rule in models.py, ``readable_q``, moderation
included, in two shapes:

- ``Run.objects.visible_to(user, owner_key)`` / ``Run.is_visible_to``: a
  run's figures wherever they are shown, by id (its page, comparisons and
  their exports, saved links, a baseline under its guest): public or
  unlisted and not hidden; any run for its owner, the holder of its owner
  key, and staff;
- ``Run.objects.listed()``: lists, reports, aggregates and the public dump
  (the same for anyone, less unlisted runs).

A hidden run asked for by id by someone else answers 410 Gone with the
moderators' reason (``check_gone``) instead of 404.

A run's host baseline is a run too: its id and figures are shown only to
whoever may open it (``shown_baseline``), and in lists only when it is
listed itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from django.conf import settings
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Count,
    Exists,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    prefetch_related_objects,
)

from benchdb.results import (
    aggregates,
    answer_cache,
    answers,
    metrics,
    overheads,
    rows,
    stats,
    summaries,
)
from benchdb.results import compare as compare_mod
from benchdb.results import similar as similar_mod
from benchdb.results.filters import FilterError, RunFilterSet
from benchdb.results.models import (
    METRIC_FIELDS,
    Comparison,
    Hardware,
    RawOutput,
    Result,
    Run,
    RunQuerySet,
    Submission,
    readable_q,
)
from benchdb.results.vocab import (
    FACETS,
    HARDWARE_FACETS,
    LABELS,
    Role,
    Source,
    Visibility,
)
from benchdb_agent import suite as agent_suite
from benchdb_agent import vocab as agent_vocab
from benchdb_agent.contract import text_problem

# Runs one comparison (page, API, saved link) may hold: charts and tables stay
# readable, and a saved link always opens.
MAX_COMPARE_RUNS = 12
COMPARISON_TITLE_MAX = 200
# Saved options are display preferences (chosen metric, scale): a few keys.
COMPARISON_OPTIONS_MAX_CHARS = 4000


class ReadError(ValueError):
    """A request the read path cannot answer; ``field`` names the bad input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class NotReadable(LookupError):
    """Runs that do not exist or that the viewer may not open."""

    def __init__(self, run_ids: list[int]):
        super().__init__(f"no such run (or not yours to read): {run_ids}")
        self.run_ids = run_ids


class RunHidden(LookupError):
    """A run the moderators hid, asked for by someone who may not see it
    hidden: pages and API both answer 410 Gone with the reason."""

    def __init__(self, run: Run):
        super().__init__(f"run {run.pk} was hidden by the moderators")
        self.run = run
        self.reason = run.hidden_reason


# Runs ------------------------------------------------------------------------


def readable_runs(user=None, owner_key: str = "") -> RunQuerySet:
    """Runs ``user`` (or the holder of ``owner_key``) may open by id."""
    return Run.objects.visible_to(user, owner_key)


def run_list(user=None, *, mine: bool = False) -> RunQuerySet:
    """A run list (page, API, export): listed runs, or all of one's own.

    Ordered fully (newest first, id as the tie-breaker) so pages are stable.
    """
    if mine:
        if user is None or not user.is_authenticated:
            raise PermissionError("mine=true needs a signed-in user")
        qs = Run.objects.filter(owner=user)
    else:
        qs = Run.objects.listed()
    return qs.for_list().order_by("-created", "-id")


# The columns a run list row does not show (the API's RunListSerializer, the
# browse table): JSON and long text, decoded for nothing.  A list of 50 runs
# with their baselines decoded 500 JSON values per request.
LIST_DEFERRED = (
    "environment",
    "tags",
    "tag_sources",
    "warnings",
    "notes",
    "citation",
    "citation_url",
)
# What a list reads of a run's baseline: whether the reader may open it
# (``Run.is_visible_to``) and whether it is listed.
BASELINE_READ = ("id", "visibility", "hidden", "owner", "owner_key_hash")


def list_columns(qs: RunQuerySet) -> RunQuerySet:
    """``qs`` (``for_list``) without the columns a list row never shows."""
    baseline = [
        f"baseline__{f.name}"
        for f in Run._meta.concrete_fields
        if f.name not in BASELINE_READ
    ]
    return qs.defer(*LIST_DEFERRED, *baseline)


def list_rows(
    qs: QuerySet, links: rows.Links, user=None, owner_key: str = ""
) -> list[rows.RunRow]:
    """The runs of ``qs`` as ``rows.run_row``s, in its order: one ``values()``
    query of what a row shows (``rows.RUN_PATHS``), no model instances, the
    baseline's visibility answered in it by the rule of ``readable_q``
    (``Run.is_visible_to``'s, for rows not loaded)."""
    return list_rows_of(list_values(qs, user, owner_key), links)


def list_values(qs: QuerySet, user=None, owner_key: str = "") -> QuerySet:
    """The ``values()`` query of ``list_rows``: what a row shows
    (``rows.RUN_PATHS``), the baseline's id and whether the reader may open
    it."""
    shown = Exists(
        Run.objects.filter(readable_q(user, owner_key), pk=OuterRef("baseline_id"))
    )
    return qs.annotate(baseline_shown=shown).values(
        *rows.RUN_PATHS, "baseline_id", "baseline_shown"
    )


def list_rows_of(values: Iterable[Mapping], links: rows.Links) -> list[rows.RunRow]:
    """``list_values``' rows as ``rows.run_row``s."""
    return [
        rows.run_row(v, links, v["baseline_id"] if v["baseline_shown"] else None)
        for v in values
    ]


def list_page_rows(ids: QuerySet) -> RunQuerySet:
    """The runs of ``ids`` (a subquery of pks) with what a list row shows
    (``for_list``, ``list_columns``): the rows of a page of a run list, read
    by ``IdPaginator`` without the list's filters."""
    return list_columns(Run.objects.for_list().filter(pk__in=ids))


def count_cap() -> int:
    """How many rows a list counts before it says "more than" (settings'
    ``BENCHDB_COUNT_CAP``, read at each call: tests lower it)."""
    return settings.BENCHDB_COUNT_CAP


def bounded_count(qs: QuerySet, cap: int) -> int:
    """The rows of ``qs`` counted up to ``cap + 1`` (``SELECT count(*) FROM
    (SELECT id ... LIMIT cap + 1)``): a count costs what the cap does, not
    what the list's length does; ``cap + 1`` means "more than ``cap``"."""
    return qs.order_by().values("pk")[: cap + 1].count()


def estimated_count(qs: QuerySet) -> int:
    """PostgreSQL's estimate of the rows of ``qs`` (the planner's, from
    ``EXPLAIN``: no row is read).  It can be far off with several filters:
    shown as "about", never as a count."""
    sql, params = qs.order_by().values("pk").query.sql_with_params()
    return estimated_rows(sql, params)


def estimated_rows(sql: str, params) -> int:
    """PostgreSQL's estimate of the rows of a query (``estimated_count``)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class CappedPage(Page):
    """A page of a list counted past its cap: whether a next page exists is
    read with the page (one row more), not from the count."""

    def __init__(self, object_list, number, paginator, *, more: bool):
        super().__init__(object_list, number, paginator)
        self.more = more

    def has_next(self) -> bool:
        return self.more


class IdPaginator(Paginator):
    """A page in one query of two steps: the page's ids from the ordered,
    filtered query without its joins and wide columns (an index-only scan of
    ``results_run_listed_idx`` for the default order), as a subquery, then
    those rows in full, in the list's order: one OFFSET over the listed
    index instead of over the joined rows, whose cost grows with the page
    number.  Order is the queryset's own.  One query, not two: the ids'
    round trip would cost more than the subquery.

    ``rows``: the rows of a subquery of ids, with the list's columns and
    annotations but not its filters (``list_page_rows``): asked again, the
    filters made the planner AND a filter's index with the primary key.
    Without it, the list's own query limited to the ids.

    ``read``: the page's rows as its list holds them (``list_rows`` for the
    API's run list); model instances without it.

    The count is bounded (``bounded_count`` up to ``count_cap()``): past the
    cap, ``capped`` is true, ``estimate`` is PostgreSQL's estimate (never
    below the cap), any page number may be asked for (one without rows is
    ``EmptyPage``) and a page knows whether another follows by reading one
    row more (``CappedPage``)."""

    def __init__(self, object_list, per_page, *, rows=None, read=list, **kwargs):
        super().__init__(object_list, per_page, **kwargs)
        self.rows = rows
        self.read = read
        self.cap = count_cap()

    # Whether ``count`` was counted up to the cap (else given, exact).
    bounded = True

    @cached_property
    def count(self) -> int:
        return bounded_count(self.object_list, self.cap)

    def given_count(self, count: int, *, bounded: bool) -> None:
        """The count, known already: exact, or counted up to the cap (the
        browse page's facet counts)."""
        self.count, self.bounded = count, bounded

    @property
    def capped(self) -> bool:
        return self.bounded and self.count > self.cap

    @cached_property
    def estimate(self) -> int:
        """The count when exact, else PostgreSQL's estimate (one EXPLAIN)."""
        if not self.capped:
            return self.count
        return max(self.estimated(), self.count)

    def estimated(self) -> int:
        """PostgreSQL's estimate of the list's rows (``estimated_count``)."""
        return estimated_count(self.object_list)

    def validate_number(self, number):
        if not self.capped:
            return super().validate_number(number)
        # Past the cap the last page is not known: any page from the first.
        try:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger(self.error_messages["invalid_page"]) from None
        if number < 1:
            raise EmptyPage(self.error_messages["min_page"])
        return number

    def get_page(self, number):
        try:
            return super().get_page(number)
        except EmptyPage:
            # Past the end of a capped list: the last page the count knows.
            return self.page(self.num_pages)

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if self.capped:
            rows = self.page_rows(bottom, top + 1)
            if not rows and number > 1:
                raise EmptyPage(self.error_messages["no_results"])
            more = len(rows) > self.per_page
            return CappedPage(rows[: self.per_page], number, self, more=more)
        if top + self.orphans >= self.count:
            top = self.count
        return self._get_page(self.page_rows(bottom, top), number, self)

    def page_rows(self, bottom: int, top: int) -> list:
        """The rows ``bottom`` to ``top`` (excluded) of the list, as read."""
        return self.read(self.rows_of(self.object_list.values("pk")[bottom:top]))

    def rows_of(self, ids: QuerySet) -> QuerySet:
        if self.rows is None:
            return self.object_list.filter(pk__in=ids)
        # The list's order, as RunFilterSet.qs reads it.
        query = self.object_list.query
        return self.rows(ids).order_by(*(query.order_by or Run._meta.ordering))


# The browse page -------------------------------------------------------------

# Browse columns: ordering name -> (test id, Result column), both ways.
BROWSE_HEADLINES = {
    "rand4k_iops": ("fio-rand-read-4k-q32t1", "iops_mean"),
    "seq1m_bw": ("fio-seq-read-1m-q8t1", "bw_bytes_mean"),
}


def headline_results() -> dict[str, Q]:
    """Per headline test id (``BROWSE_HEADLINES``), the results that are
    that test, whatever their origin: its test id (agent runs, and imports,
    which ``imports`` names by their workload), or a published source's
    result whose workload it is (``metrics.workload_test_id``): a seed's
    fio randread 4k at iodepth 32 is the list's 4K random read.  One query
    (the published results of the headline tests' tools)."""
    wanted = {test_id for test_id, _column in BROWSE_HEADLINES.values()}
    tools = {agent_suite.get_test(test_id)["tool"] for test_id in wanted}
    published = defaultdict(list)
    # The main direction from ``main_values`` (written from the statistics
    # by a trigger), not from the statistics JSON, decompressed per row.
    rows = (
        Result.objects.filter(
            run__source=Source.PUBLISHED, comparable=True, tool__in=tools
        )
        .order_by()
        .values_list("pk", "tool", "main_values__0", "options")
    )
    for pk, tool, direction, options in rows:
        test_id = metrics.workload_test_id(tool, direction, options)
        if test_id in wanted:
            published[test_id].append(pk)
    return {
        test_id: Q(test_id=test_id) | Q(pk__in=published[test_id])
        if published[test_id]
        else Q(test_id=test_id)
        for test_id in wanted
    }


def with_headlines(qs: RunQuerySet, matches: dict[str, Q] | None = None) -> RunQuerySet:
    """The run list with its headline figures as columns (a correlated
    subquery each; PostgreSQL evaluates them for the page's rows only unless
    the list is sorted by one).  ``matches``: the results that are each
    headline test (``headline_results``), read once per list."""
    if matches is None:
        matches = headline_results()
    return qs.annotate(
        **{
            name: _headline(matches[test_id], "run", column)
            for name, (test_id, column) in BROWSE_HEADLINES.items()
        }
    )


def with_overhead_ids(qs: RunQuerySet, matches: dict[str, Q]) -> RunQuerySet:
    """The ids of a run's 4K result and of its host baseline's, when that
    baseline is listed: the pair ``browse_overheads`` reads."""
    listed = Run.objects.listed().filter(pk=OuterRef(OuterRef("baseline_id")))
    rand4k = matches[BROWSE_HEADLINES["rand4k_iops"][0]]
    return qs.annotate(
        rand4k_result_id=_headline(rand4k, "run", "id"),
        host_rand4k_result_id=_headline(
            rand4k & Q(run__in=listed.values("pk")), "baseline_id", "id"
        ),
    )


def _headline(match: Q, run: str, column: str) -> Subquery:
    """``column`` of the first result matching ``match`` of the outer row's
    ``run`` (its own id, or its baseline's)."""
    run_id = OuterRef("pk" if run == "run" else run)
    return Subquery(
        Result.objects.filter(match, run=run_id).order_by("id").values(column)[:1]
    )


# What the browse table and the home page's latest runs show of a run
# (``web.present.browse_rows`` and ``home_rows``, ``Run.__str__``,
# ``label_host_platforms``): a page's rows read without the columns and
# joins they never show (``for_list``'s models, the baseline).
PAGE_ROW_COLUMNS = (
    "id",
    "title",
    "role",
    "cache_mode",
    "disk_bus",
    "image_format",
    "suspect",
    "source",
    "platform",
    "storage_backend",
    "created",
    "hardware",
    "hardware__disk_type",
)


def page_row_columns(qs: RunQuerySet) -> RunQuerySet:
    """``qs`` reading only ``PAGE_ROW_COLUMNS`` (and the hardware's)."""
    return qs.select_related(None).select_related("hardware").only(*PAGE_ROW_COLUMNS)


def order_by_headline(qs: RunQuerySet, ordering: str) -> RunQuerySet:
    """Sort by a headline figure; runs without it last, either way."""
    expr = F(ordering.lstrip("-"))
    expr = (
        expr.desc(nulls_last=True)
        if ordering.startswith("-")
        else expr.asc(nulls_last=True)
    )
    return qs.order_by(expr, "-id")


def browse_page(qs: RunQuerySet, ordering: str, number, total: Total | None = None):
    """A page of the browse list (``browse``'s runs): 50 runs by ids first
    (``IdPaginator``), read with ``PAGE_ROW_COLUMNS``, their headline
    figures, the overhead of the 4K figure against a listed host baseline
    (``browse_overheads``) and hosts labelled by their guests' platform
    (``label_host_platforms``).
    ``total``: the list's length when known already (``facets_and_total``)."""
    matches = headline_results()
    if ordering.lstrip("-") in BROWSE_HEADLINES:
        # Only a list sorted by a figure needs it to choose its page's ids.
        qs = order_by_headline(with_headlines(qs, matches), ordering)

    def rows(ids):
        runs = page_row_columns(Run.objects.filter(pk__in=ids))
        return with_overhead_ids(with_headlines(runs, matches), matches)

    paginator = IdPaginator(qs, 50, rows=rows)
    if total is not None and total.runs is not None:
        paginator.given_count(total.runs, bounded=total.bounded)
    page = paginator.get_page(number)
    browse_overheads(page)
    label_host_platforms([r for r in page if r.role == Role.HOST])
    return page


def browse_overheads(runs) -> None:
    """``run.rand4k_overhead`` for the list's "4K read vs host" column: the
    guest ÷ host ratio of geometric means with its 95% interval
    (``stats.overhead``, as on the run page), or None without a listed host
    baseline's figure.  One query for the whole page (the pairs'
    ``main_values``), and one more for a pair they do not answer."""
    runs = list(runs)
    paired = [
        r
        for r in runs
        if getattr(r, "rand4k_result_id", None)
        and getattr(r, "host_rand4k_result_id", None)
    ]
    ids = [i for r in paired for i in (r.rand4k_result_id, r.host_rand4k_result_id)]
    main_values = dict(
        Result.objects.filter(pk__in=ids).order_by().values_list("pk", "main_values")
    )
    by_run = dict(
        zip(
            [r.pk for r in paired],
            overheads.main_value_overheads(
                [(r.rand4k_result_id, r.host_rand4k_result_id, "iops") for r in paired],
                main_values,
            ),
            strict=True,
        )
    )
    for run in runs:
        run.rand4k_overhead = by_run.get(run.pk)


def label_host_platforms(hosts: list) -> None:
    """``host.platform_label``: a host baseline's platform is its guests'
    ("Proxmox VE (host)"), where its own is unknown.  One query."""
    platforms = defaultdict(set)
    rows = (
        Run.objects.listed()
        .filter(baseline__in=[h.pk for h in hosts])
        .order_by()
        .values_list("baseline_id", "platform")
        .distinct()
    )
    labels = dict(Run._meta.get_field("platform").choices)
    for baseline_id, platform in rows:
        platforms[baseline_id].add(labels.get(platform, platform))
    for host in hosts:
        own = host.get_platform_display()
        if host.platform == "unknown" and platforms.get(host.pk):
            host.platform_label = ", ".join(sorted(platforms[host.pk])) + " (host)"
        else:
            host.platform_label = own


def check_gone(pk) -> None:
    """After a run was not found among those a viewer may open: RunHidden
    (410 with the reason, pages and API alike) when the moderators hid a run
    that anyone could otherwise open (``RunQuerySet.gone``); nothing else
    (404: a private run stays unknown).  ``pk`` as a URL gave it: anything
    but a run id is no run."""
    if not str(pk).isascii() or not str(pk).isdigit() or int(pk) >= 2**63:
        return
    gone = Run.objects.gone().only("id", "hidden", "hidden_reason")
    found = gone.filter(pk=int(pk)).first()
    if found is not None:
        raise RunHidden(found)


def shown_baseline(run: Run, user=None, owner_key: str = "") -> Run | None:
    """The run's host baseline if the viewer may open it, else None."""
    if run.baseline_id is None:
        return None
    baseline = run.baseline
    return baseline if baseline.is_visible_to(user, owner_key) else None


def shown_baseline_id(run: Run, user=None, owner_key: str = "") -> int | None:
    """``shown_baseline``'s id."""
    baseline = shown_baseline(run, user, owner_key)
    return baseline.pk if baseline is not None else None


def baseline_results(run: Run, user=None, owner_key: str = "") -> dict[str, Result]:
    """The baseline's results by comparability key, if the viewer may see it
    (read with the run's own by ``attach_tests``, else one query)."""
    baseline = shown_baseline(run, user, owner_key)
    if baseline is None:
        return {}
    if "results" in getattr(baseline, "_prefetched_objects_cache", {}):
        results = baseline.results.all()
    else:
        # order_by(): Result's default ordering (by run) joined the run table.
        results = Result.objects.filter(run=baseline).order_by()
    return {r.comparability_key: r for r in results}


# What a run's page and detail read of its host baseline: whether the viewer
# may open it, its name (``Run.__str__``) and whether it was made inside a VM
# (the page says so), not its JSON and long text.
BASELINE_SHOWN = (
    *BASELINE_READ,
    *("title", "role", "cache_mode", "disk_bus", "image_format", "virtual_host"),
)


def detail_runs(user=None, owner_key: str = "") -> RunQuerySet:
    """Runs the viewer may open, with what a run's page and detail show of
    their hardware and baseline (``attach_tests`` adds the results)."""
    baseline = [
        f"baseline__{f.name}"
        for f in Run._meta.concrete_fields
        if f.name not in BASELINE_SHOWN
    ]
    return (
        readable_runs(user, owner_key)
        .select_related(
            "hardware", "hardware__cpu_model", "hardware__disk_model", "baseline"
        )
        .defer(*baseline)
    )


def run_detail(pk: int, user=None, owner_key: str = "") -> Run:
    """One run as the viewer may see it; Run.DoesNotExist otherwise, and
    RunHidden for a hidden run the viewer may not see (``check_gone``).

    The baseline of a run is blanked on the returned (unsaved) instance when
    the viewer may not open it, so no template or serializer can show it.
    """
    try:
        run = detail_runs(user, owner_key).get(pk=pk)
    except Run.DoesNotExist:
        check_gone(pk)
        raise
    return attach_tests(mask_baseline(run, user, owner_key), user, owner_key)


# A run's results in display order.
RESULT_ORDER = ("group", "test_id")


def attach_tests(run: Run, user=None, owner_key: str = "") -> Run:
    """``run.results`` in display order with their repeats
    (``attach_repeats``), and the results of its host baseline when the
    viewer may open it (``baseline_results`` reads them from memory): one
    query for both runs' results."""
    runs = [run]
    baseline = shown_baseline(run, user, owner_key)
    if baseline is not None:
        runs.append(baseline)
    prefetch_related_objects(
        runs, Prefetch("results", queryset=Result.objects.order_by(*RESULT_ORDER))
    )
    return attach_repeats(run)


def release(run: Run) -> None:
    """Drop the results ``attach_tests`` gave ``run`` and its baseline, once
    the answer is written.  A prefetched result references its run (Django
    sets ``result.run``), so the runs, their results and the decoded
    statistics (about 1,600 objects for a standard run and its host) would
    reference each other and wait for the garbage collector, whose passes
    over them would land in the middle of later requests.  Released, they
    are freed with the answer."""
    runs = [run]
    if Run.baseline.is_cached(run) and run.baseline is not None:
        runs.append(run.baseline)
    for obj in runs:
        getattr(obj, "_prefetched_objects_cache", {}).pop("results", None)


# One row per measurement record with its repeat's raw output format (NULL:
# none stored), in repeat, direction, job order.
REPEATS_SQL = (
    "SELECT m.result_id, m.repeat, m.job, m.direction, {metrics}, o.format "
    "FROM results_measurement m LEFT JOIN results_rawoutput o "
    "ON o.result_id = m.result_id AND o.repeat = m.repeat "
    "WHERE m.result_id = ANY(%s) "
    "ORDER BY m.result_id, m.repeat, m.direction, m.job"
).format(metrics=", ".join(f"m.{f}" for f in METRIC_FIELDS))


def attach_repeats(run: Run) -> Run:
    """Give each of ``run.results`` (``attach_tests``) its repeats:
    ``result.records``, the measurement rows as dicts (``repeat``, ``job``,
    ``direction`` and every metric) in repeat, direction, job order, and
    ``result.raw_formats``, repeat -> stored raw output format, for the
    measured repeats (the ones shown).

    One query for the whole run, rows read as tuples: no model instance per
    measurement (a prefetch made ~300 model instances for a standard run),
    no query compiled per request.  The page and the API both read these.
    """
    results = list(run.results.all())
    records: dict[int, list[dict]] = defaultdict(list)
    formats: dict[int, dict[int, str]] = defaultdict(dict)
    names = ("repeat", "job", "direction", *METRIC_FIELDS)
    rows = []
    if results:
        with connection.cursor() as cursor:
            cursor.execute(REPEATS_SQL, [[r.pk for r in results]])
            rows = cursor.fetchall()
    for result_id, *values, fmt in rows:
        records[result_id].append(dict(zip(names, values, strict=True)))
        if fmt is not None:
            formats[result_id][values[0]] = fmt
    for res in results:
        res.records = records.get(res.pk, [])
        res.raw_formats = formats.get(res.pk, {})
    return run


def run_overheads(run: Run, user=None, owner_key: str = "") -> tuple[dict, dict]:
    """(baseline results by comparability key, result id -> metric -> overhead
    with its interval) against the baseline the viewer may open; both empty
    otherwise.  ``run.results`` should be prefetched (``attach_tests``)."""
    baseline = baseline_results(run, user, owner_key)
    if not baseline:
        return {}, {}
    return baseline, overheads.result_overheads(list(run.results.all()), baseline)


def mask_baseline(run: Run, user=None, owner_key: str = "") -> Run:
    """Blank ``run.baseline`` in memory when the viewer may not open it."""
    if run.baseline_id is not None and shown_baseline(run, user, owner_key) is None:
        run.baseline = None
    return run


def raw_output(run: Run, result_id: int, repeat: int) -> RawOutput:
    """One stored raw output of a run the caller already may read."""
    return RawOutput.objects.get(result__run=run, result_id=result_id, repeat=repeat)


def browse(
    params, user=None, *, mine: bool = False, owner_key: str = ""
) -> RunFilterSet:
    """The filtered run list (``RunFilterSet`` over ``run_list``): ``.qs``.

    ``user`` / ``owner_key`` are the reader (``has_baseline`` counts only
    baselines they may open).  FilterError when the parameters do not validate.
    """
    filterset = RunFilterSet(
        params, queryset=run_list(user, mine=mine), user=user, owner_key=owner_key
    )
    if not filterset.is_valid():
        raise FilterError(filterset)
    return filterset


def facet_counts(params, user=None, owner_key: str = "") -> list[dict]:
    """Per facet, its values among listed runs with counts, for the browse menu.

    Each facet counts as if its own filter were off, so its other values stay
    visible and can be added to the selection; ``checked`` marks the values
    chosen in ``params``.
    """
    return facets_and_total(params, user, owner_key)[0]


# Browse parameters that change neither which runs are listed nor how many.
UNFILTERED_PARAMS = frozenset({"page", "ordering"})


def listed_facet_counts() -> dict:
    """``summaries.facet_counts`` over every listed run, what browse shows
    before anything is chosen: a GROUP BY over the whole table, so stored
    and served by the data version
    (``answer_cache``; refreshed by the worker).  Per facet, [value, runs]
    pairs (JSON objects cannot have a null key: runs without a disk type
    are counted under None)."""
    listed = Run.objects.listed()
    counts = summaries.facet_counts(listed, listed, {})
    return {name: [[v, n] for v, n in by.items()] for name, by in counts.items()}


def _stored_facet_counts() -> tuple[dict[str, dict], object]:
    """``listed_facet_counts`` as facet -> {value: runs}, with its freshness.

    Only a current answer is served: a count beside a facet promises the
    number of runs the list shows once it is chosen, and the list is live,
    so a snapshot older than the last upload (served by ``answer_cache``
    until the worker's refresh) would say "none 2" beside a list of 4.
    Then the counts are computed live, as the stored answer computes them
    (freshness None: they are current)."""
    stored, found = answers.listed_facet_counts.with_freshness()
    if found is not None and not found.current:
        stored, found = listed_facet_counts(), None
    return {name: dict(map(tuple, pairs)) for name, pairs in stored.items()}, found


@dataclass(frozen=True)
class Total:
    """The runs a browse list holds: ``runs`` (None when not known from the
    facet counts), exact unless ``bounded`` (counted up to the cap: more than
    the cap when above it)."""

    runs: int | None
    bounded: bool


def facets_and_total(
    params,
    user=None,
    owner_key: str = "",
    *,
    filterset: RunFilterSet | None = None,
) -> tuple[list[dict], Total, dict | None]:
    """``facet_counts``, the number of runs ``params`` list (``Total``) and
    the counts' freshness.  With filters, the counts are live over at most
    ``count_cap() + 1`` runs and the number is read from them
    (``summaries.rows_counted``, bounded: None when every facet is chosen)
    instead of a count of its own, freshness None; but a chosen facet that
    is the only filter is counted over every listed run, so its counts are
    the stored ones, with their freshness.  Without any, the counts are the
    stored ``listed_facet_counts`` with their freshness, and the number is
    their sum over one facet, exact (they are current: stored, or computed
    live when older than the data).  ``filterset``: ``browse``'s answer for
    ``params`` when the caller has it (the chosen facets' counts reuse its
    validated values)."""
    base = Run.objects.listed()
    unfiltered = not any(
        value
        for name in params
        if name not in UNFILTERED_PARAMS
        for value in (
            params.getlist(name) if hasattr(params, "getlist") else [params[name]]
        )
    )
    if unfiltered:
        counts, found = _stored_facet_counts()
        # Every listed run, read from its facet's counts (current: stored,
        # or computed live when the stored ones are older than the data), not
        # a count of every listed run on each request.
        total = Total(summaries.rows_counted(counts, {}), bounded=False)
        return _facet_menu(params, counts), total, answer_cache.freshness_of(found)
    if filterset is None:
        filterset = browse(params, user, owner_key=owner_key)
    all_facets = {**FACETS, **HARDWARE_FACETS}
    chosen = {
        name: filterset.qs_without(name, base) for name in all_facets if name in params
    }
    # A chosen facet with no other filter counts every listed run: the
    # stored counts of the page before anything is chosen (one facet picked,
    # the most common browse).
    unfiltered = [n for n, qs in chosen.items() if qs.query.where == base.query.where]
    known, freshness = {}, None
    if unfiltered:
        stored, found = _stored_facet_counts()
        known = {n: stored[n] for n in unfiltered}
        freshness = answer_cache.freshness_of(found)
    # One GROUPING SETS query for every facet not chosen, one per chosen facet
    # (benchdb/results/summaries.py), instead of a COUNT(DISTINCT) scan each;
    # each over at most cap + 1 runs: exact below the cap, above it a
    # facet's counts are lower bounds ("partial").
    cap = count_cap()
    counts = summaries.facet_counts(base, filterset.qs, chosen, known, cap + 1)
    runs = summaries.rows_counted(counts, chosen)
    partial = {
        n for n, by in counts.items() if n not in known and sum(by.values()) > cap
    }
    menu = _facet_menu(params, counts, partial)
    return menu, Total(runs, bounded=True), freshness


def _facet_menu(params, counts: dict[str, dict], partial=frozenset()) -> list[dict]:
    """The browse menu from facet counts: per facet its values by count,
    labelled, the chosen ones checked; ``partial``: facets whose counts are
    lower bounds (counted over the cap's runs of a longer list)."""
    all_facets = {**FACETS, **HARDWARE_FACETS}
    out = []
    for name, choices in all_facets.items():
        selected = params.getlist(name) if hasattr(params, "getlist") else []
        labels = dict(choices.choices)
        values = sorted(
            ((v, n) for v, n in counts.get(name, {}).items() if v is not None),
            key=lambda vn: (-vn[1], vn[0]),
        )
        out.append(
            {
                "name": name,
                "label": LABELS[name],
                "partial": name in partial,
                "options": [
                    {
                        "value": value,
                        "label": labels.get(value, value),
                        "n": n,
                        "checked": value in selected,
                    }
                    for value, n in values
                ],
            }
        )
    return out


def home_summary() -> dict:
    """The home page's figures: the community counts (``home_counts``, stored
    by the data version, with their ``freshness``), the latest runs with
    their headline figures (``with_headlines``) and the published data sets
    (live)."""
    runs = Run.objects.listed()
    counts, found = answers.home_counts.with_freshness()
    published = runs.filter(source="published").order_by("citation", "id")
    datasets = defaultdict(list)
    for run in published.only("id", "title", "citation", "cache_mode"):
        datasets[run.citation].append(run)
    return {
        **counts,
        "freshness": answer_cache.freshness_of(found),
        # With their headline figures, whatever their origin, as the list's.
        "latest": with_headlines(page_row_columns(runs))[:10],
        "datasets": [
            {"citation": c, "runs": rs, "compare": ",".join(str(r.pk) for r in rs)}
            for c, rs in datasets.items()
        ],
    }


def _label(label) -> str | None:
    return str(label) if label is not None else None


def home_counts() -> dict:
    """Listed runs and systems, and listed runs per cache mode, storage,
    platform and disk type: GROUP BYs over every listed run, so stored and
    served by the data version (``answer_cache``; refreshed by the worker)."""
    runs = Run.objects.listed()
    counts = {}
    for field in ("cache_mode", "storage_backend", "platform"):
        choices = dict(FACETS[field].choices)
        by_value = {
            row[field]: row["n"] for row in runs.values(field).annotate(n=Count("id"))
        }
        if field == "platform":
            # As browse's ?platform= filters: hosts under their guests' platform.
            summaries.add_hosts_by_guest_platform(runs, by_value)
        counts[field] = [
            [value, _label(choices.get(value, value)), n]
            for value, n in sorted(by_value.items(), key=lambda vn: (-vn[1], vn[0]))
        ]
    disk_choices = dict(HARDWARE_FACETS["disk_type"].choices)
    counts["disk_type"] = [
        [
            row["hardware__disk_type"],
            _label(disk_choices.get(row["hardware__disk_type"])),
            row["n"],
        ]
        for row in runs.exclude(hardware=None)
        .values("hardware__disk_type")
        .annotate(n=Count("id"))
        .order_by("-n", "hardware__disk_type")
    ]
    return {
        "run_count": runs.count(),
        # Hardware rows with a listed run: their distinct ids among listed
        # runs (an index-only scan), not DISTINCT over every hardware column
        # of every run joined to its hardware.
        "system_count": runs.aggregate(n=Count("hardware", distinct=True))["n"],
        "facet_counts": counts,
    }


def hardware_list() -> QuerySet:
    """Hardware that listed runs ran on, with the number of those runs."""
    # EXISTS and a per-row count, not a GROUP BY over every run joined to
    # every hardware row: the paginator's count probes one listed run per
    # hardware row, and only the page's rows count their runs.
    listed = Run.objects.listed().filter(hardware=OuterRef("pk"))
    run_count = listed.order_by().values("hardware").annotate(n=Count("*")).values("n")
    return (
        Hardware.objects.select_related("cpu_model", "disk_model")
        .filter(Exists(listed))
        .annotate(run_count=Subquery(run_count))
        .order_by("id")
    )


# What ``similar`` reads of the run.
SIMILAR_READ = (
    *("id", "hardware", *similar_mod.SIMILAR_MATCH),
    *similar_mod.MEMBER_FIELDS,
)


def similar(run: Run, test_id: str, metric: str, match) -> dict:
    """Where a run stands among the other listed, not suspect runs (LookupError if the
    run has no such test).  A run read with ``similar.similar_result``'s
    annotations for this test and metric is not asked again."""
    found = None
    if hasattr(run, "similar_key"):
        found = (run.similar_key, run.similar_value, run.similar_comparable)
    return similar_mod.similar_systems(run, test_id, metric, match or (), found=found)


def vocabularies() -> dict:
    """What clients build filter menus and tag pickers from (the API's
    /vocabularies/): every closed set, the tag rules, metrics and units."""
    return {
        "vocabularies": {
            name: [{"value": v, "label": label} for v, label in vocabulary]
            for name, vocabulary in agent_vocab.VOCABULARIES.items()
        },
        "tags": {
            key: None if allowed is None else list(agent_vocab.values(allowed))
            for key, allowed in agent_vocab.TAG_VOCABULARIES.items()
        },
        "visibility": list(Visibility.values),
        "metrics": metrics.MAIN_METRICS,
        "group_by": list(aggregates.GROUP_BY),
        "similar_match": list(similar_mod.SIMILAR_MATCH),
        "cache_mode_safety": {
            mode: {"safety": safety, "explanation": text}
            for mode, (safety, text) in agent_vocab.CACHE_MODE_SAFETY.items()
        },
        "units": {
            "iops": "operations per second",
            "bw_bytes": "bytes per second",
            "*_ns": "nanoseconds",
            "*_bytes": "bytes",
            "*_s": "seconds",
        },
    }


# Comparisons -----------------------------------------------------------------


def check_run_ids(run_ids: list[int], reference_id: int | None) -> None:
    """The shape every comparison (page, API, saved) must have."""
    if not run_ids:
        raise ReadError("runs", "choose at least one run to compare")
    if len(run_ids) > MAX_COMPARE_RUNS:
        raise ReadError("runs", f"compare at most {MAX_COMPARE_RUNS} runs at once")
    if reference_id is not None and reference_id not in run_ids:
        raise ReadError("reference", "must be one of the compared runs")


def compared_runs(
    run_ids: list[int],
    reference_id: int | None,
    user=None,
    owner_key: str = "",
    related: Sequence[str] = (),
    fields: Sequence[str] = (),
    deferred: Sequence[str] = (),
) -> tuple[list[Run], Run]:
    """The runs to compare, in the order asked, and the reference run
    (``related``: relations read in the same query, ``select_related``;
    ``fields``: only these columns, ``only``; ``deferred``: not these).

    ReadError for a bad shape, NotReadable naming runs the viewer may not open.
    """
    run_ids = list(dict.fromkeys(run_ids))
    check_run_ids(run_ids, reference_id)
    readable = readable_runs(user, owner_key).filter(pk__in=run_ids).order_by()
    if related:
        readable = readable.select_related(*related)
    if fields:
        readable = readable.only(*fields)
    if deferred:
        readable = readable.defer(*deferred)
    found = {r.pk: r for r in readable}
    missing = [rid for rid in run_ids if rid not in found]
    if missing:
        raise NotReadable(missing)
    runs = [found[rid] for rid in run_ids]
    reference = found[reference_id] if reference_id is not None else runs[0]
    return runs, reference


def comparison(
    run_ids: list[int], reference_id: int | None, user=None, owner_key: str = ""
) -> tuple[list[Run], Run, dict]:
    """``compare.build_comparison`` over runs the viewer may open (read with
    what it uses of them only, ``compare.COMPARED_RUN_FIELDS``)."""
    runs, reference = compared_runs(
        run_ids, reference_id, user, owner_key, fields=compare_mod.COMPARED_RUN_FIELDS
    )
    return runs, reference, compare_mod.build_comparison(runs, reference)


def _check_text(field: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise ReadError(field, f"at most {limit} characters")
    problem = text_problem(value)
    if problem:
        raise ReadError(field, problem)
    return value


def _check_options(options: dict) -> dict:
    """Saved options: JSON that PostgreSQL can store, and small."""
    if not isinstance(options, dict):
        raise ReadError("options", "must be an object")

    def walk(value, pointer: str) -> None:
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                raise ReadError(pointer, problem)
        elif isinstance(value, dict):
            for key, item in value.items():
                problem = text_problem(key)
                if problem:
                    raise ReadError(pointer, f"keys {problem}")
                walk(item, f"{pointer}/{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{pointer}/{index}")

    walk(options, "options")
    if len(json.dumps(options)) > COMPARISON_OPTIONS_MAX_CHARS:
        raise ReadError("options", f"at most {COMPARISON_OPTIONS_MAX_CHARS} characters")
    return options


def save_comparison(
    run_ids: list[int],
    reference_id: int | None,
    *,
    title: str = "",
    options: dict | None = None,
    user=None,
    owner_key: str = "",
) -> Comparison:
    """Save a comparison of runs the viewer may open as a share link."""
    run_ids = list(dict.fromkeys(run_ids))
    compared_runs(run_ids, reference_id, user, owner_key)
    title = _check_text("title", title or "", COMPARISON_TITLE_MAX)
    options = _check_options(options or {})
    creator = user if user is not None and user.is_authenticated else None
    for _attempt in range(5):
        try:
            with transaction.atomic():
                return Comparison.objects.create(
                    slug=Comparison.new_slug(),
                    run_ids=run_ids,
                    reference_run_id=reference_id,
                    title=title,
                    options=options,
                    created_by=creator,
                )
        except IntegrityError:
            continue  # the random slug was taken: draw another
    raise RuntimeError("could not allocate a share link")


@dataclass
class SavedView:
    """A saved comparison as one viewer may see it."""

    saved: Comparison
    run_ids: list[int]
    reference_id: int | None
    runs: list[Run]
    reference: Run | None
    data: dict | None
    # How many of the saved runs the viewer may no longer open (deleted,
    # made private, hidden by the moderators): the comparison says so.
    unavailable: int = 0


def saved_comparison(saved: Comparison, user=None, owner_key: str = "") -> SavedView:
    """A saved comparison computed now, over the runs the viewer may open.

    Runs deleted, made private or hidden since it was saved are left out
    (their ids too) and counted in ``unavailable``; when the reference is
    gone the first remaining run is the reference; ``data`` is None when no
    run is left.
    """
    found = {
        r.pk: r for r in readable_runs(user, owner_key).filter(pk__in=saved.run_ids)
    }
    runs = [found[rid] for rid in saved.run_ids if rid in found][:MAX_COMPARE_RUNS]
    reference = found.get(saved.reference_run_id) if saved.reference_run_id else None
    if reference is None and runs:
        reference = runs[0]
    data = compare_mod.build_comparison(runs, reference) if runs else None
    return SavedView(
        saved=saved,
        run_ids=[r.pk for r in runs],
        reference_id=reference.pk if reference is not None else None,
        runs=runs,
        reference=reference,
        data=data,
        unavailable=len(set(saved.run_ids)) - len(runs),
    )


# Reports ---------------------------------------------------------------------

CACHE_ORDER = list(agent_vocab.CACHE_MODES)
FALLBACK_METRICS = ("iops", "bw_bytes", "lat_mean_ns", "runtime_s")


def mean_of(result: Result, metric: str | None) -> float | None:
    """``metric`` in the result's main direction, if stored: the run's
    figure (``stats.centre``), the centre of the overhead's interval."""
    if not metric:
        return None
    direction = (result.stats or {}).get("main_direction")
    summary = ((result.stats or {}).get("directions") or {}).get(direction) or {}
    return stats.centre(summary.get(metric) or {})


OVERHEAD_PAGE_GUESTS = 10
CACHE_GROUPS_PAGE = 50


def overhead_guests() -> QuerySet:
    """Listed guest runs whose host baseline is listed too, and bare metal."""
    listed = Run.objects.listed()
    return listed.filter(role=Role.GUEST, baseline__in=listed.bare_metal())


def overhead_report(page=None) -> dict:
    """The overhead report: quartiles of guest / host per test over every
    pair, computed by PostgreSQL (``summaries.overhead_summary``), and the
    test-by-test rows of one page of guest runs (``OVERHEAD_PAGE_GUESTS``)."""
    guests = overhead_guests()
    summary, freshness = answers.overhead_summary.with_freshness()
    # Counted up to the cap, as the lists are (``IdPaginator``): the pairs
    # grow with the table, a page of them does not.
    paginator = IdPaginator(
        guests.select_related("baseline", "hardware").order_by("pair_id", "id"),
        OVERHEAD_PAGE_GUESTS,
    )
    page_obj = paginator.get_page(page)
    return {
        "summary": summary,
        "rows": overhead_rows(list(page_obj.object_list)),
        "page": page_obj,
        "summary_freshness": answer_cache.freshness_of(freshness),
    }


def overhead_summary_answer() -> list[dict]:
    """The public overhead summary: every listed pair, so stored and served
    by the data version (``answer_cache``)."""
    return summaries.overhead_summary(
        overhead_guests(), Run.objects.listed().bare_metal()
    )


# What the overhead report's rows read of a result: its figures (the figure
# columns, ``stats.centre`` of the main direction, and ``main_values``, the
# per-repeat values of the compared metrics), not its statistics JSON, which
# PostgreSQL decompresses and Python decodes per row.
OVERHEAD_ROW_FIELDS = (
    *("id", "run_id", "comparability_key", "test_id", "title", "main_values"),
    *metrics.METRIC_COLUMNS.values(),
)


class _NeedsStats(LookupError):
    """A figure no column holds: read from the result's statistics."""


def _column_figure(result: Result, metric: str | None) -> float | None:
    """``mean_of`` from the figure columns (which hold it: ingest, migration
    0023); ``_NeedsStats`` for a metric without one."""
    if not metric:
        return None
    if metric not in metrics.METRIC_COLUMNS:
        raise _NeedsStats(metric)
    return getattr(result, metrics.METRIC_COLUMNS[metric])


def _row_figure(guest: Result, host: Result, figure) -> tuple | None:
    """(metric, guest figure, host figure) an overhead row shows: the test's
    main metric, else the first of ``FALLBACK_METRICS`` both sides have; None
    without one.  ``figure``: ``mean_of`` or ``_column_figure``."""
    metric = metrics.main_metric(guest.test_id)
    g_mean, h_mean = figure(guest, metric), figure(host, metric)
    if g_mean is not None and h_mean:
        return metric or "iops", g_mean, h_mean
    for candidate in FALLBACK_METRICS:
        g_mean, h_mean = figure(guest, candidate), figure(host, candidate)
        if g_mean is not None and h_mean:
            return candidate, g_mean, h_mean
    return None


def _main_repeats(result: Result, direction, metric: str) -> list | None:
    """The result's repeat values of ``metric`` in ``direction`` from its
    ``main_values``; None when they are not there (another direction, a
    metric it does not keep, stored without values)."""
    found = result.main_values
    if not isinstance(found, list) or len(found) != 2 or found[0] != direction:
        return None
    if found[1] is None or metric not in metrics.MAIN_METRICS:
        return None
    return found[1][list(metrics.MAIN_METRICS).index(metric)] or []


def overhead_rows(guests: list[Run] | None = None) -> list[dict]:
    """Each listed guest run (of ``guests``, default all) against its listed
    host baseline, test by test.

    Both runs must be listed (public, not hidden): a report is a list, and a
    private or unlisted baseline's figures are not for everyone.

    One query for the runs' results (``OVERHEAD_ROW_FIELDS``); one more for
    the statistics of the rare pair whose figure has no column, and one for
    the repeats of a pair whose ``main_values`` do not hold them.
    """
    if guests is None:
        guests = (
            overhead_guests()
            .select_related("baseline", "hardware")
            .order_by("pair_id", "id")
        )
    ids = [g.pk for g in guests] + [g.baseline_id for g in guests]
    results: dict[int, dict[str, Result]] = defaultdict(dict)
    for res in (
        Result.objects.filter(run_id__in=ids).order_by().only(*OVERHEAD_ROW_FIELDS)
    ):
        results[res.run_id][res.comparability_key] = res
    pairs = []  # (guest run, guest result, host result)
    for guest in guests:
        for key, res in sorted(results[guest.pk].items()):
            host = results[guest.baseline_id].get(key)
            if host is not None:
                pairs.append((guest, res, host))
    figures: dict[int, tuple | None] = {}
    for_stats = []
    for index, (_run, res, host) in enumerate(pairs):
        try:
            figures[index] = _row_figure(res, host, _column_figure)
        except _NeedsStats:
            for_stats.append(index)
    if for_stats:
        wanted = {r.pk for i in for_stats for r in pairs[i][1:]}
        loaded = dict(
            Result.objects.filter(pk__in=wanted).order_by().values_list("pk", "stats")
        )
        for index in for_stats:
            for res in pairs[index][1:]:
                res.stats = loaded.get(res.pk) or {}
            figures[index] = _row_figure(*pairs[index][1:], mean_of)
    rows = []
    for index, (guest, res, host) in enumerate(pairs):
        if figures[index] is None:
            continue
        metric, g_mean, h_mean = figures[index]
        direction = res.main_values[0] if isinstance(res.main_values, list) else None
        rows.append(
            {
                "guest": guest,
                "host": guest.baseline,
                "test": res,
                "metric": metric,
                "guest_mean": g_mean,
                "host_mean": h_mean,
                "overhead": (g_mean / h_mean - 1) * 100,
                "pair": (res, host, direction),
            }
        )
    # Every overhead with its interval (results.stats.overhead): the repeats
    # from ``main_values``, else (rare) one query for those not there.
    repeats = []
    for row in rows:
        res, host, direction = row["pair"]
        repeats.append(
            (
                _main_repeats(res, direction, row["metric"]),
                _main_repeats(host, direction, row["metric"]),
            )
        )
    missing = [
        r.pk
        for row, (g, h) in zip(rows, repeats, strict=True)
        if g is None or h is None
        for r in row["pair"][:2]
    ]
    values = metrics.repeat_values(missing) if missing else {}
    samples = []
    for row, (g, h) in zip(rows, repeats, strict=True):
        res, host, direction = row.pop("pair")
        if g is None or h is None:
            g = values.get(res.pk, {}).get(direction, {}).get(row["metric"], [])
            h = values.get(host.pk, {}).get(direction, {}).get(row["metric"], [])
        samples.append((stats.Sample(h), stats.Sample(g)))
    for row, found in zip(rows, stats.ratios(samples), strict=True):
        row["interval"] = stats.overhead_of(
            found, metrics.higher_is_better(row["metric"])
        )
        if row["interval"]["percent"] is not None:
            # The figure its interval belongs to: the ratio of geometric means.
            row["overhead"] = row["interval"]["percent"]
    return rows


def cache_mode_groups(page=1) -> list[dict]:
    """Listed guest runs that differ only in cache mode: same hardware, layout
    and suite; the first run of each mode, modes in CACHE_ORDER.  One page of
    groups (``CACHE_GROUPS_PAGE``), newest first, grouped by PostgreSQL."""
    return _cache_mode_page(_page_number(page))[0]


def cache_mode_group_page(page: int) -> list:
    """[{cache mode: run id} per group, number of groups] of one page over
    every listed run: stored (``answer_cache``)."""
    pages, total = summaries.cache_mode_group_ids(
        Run.objects.listed(), page, CACHE_GROUPS_PAGE
    )
    return [pages, total]


def _cache_mode_page(number: int) -> tuple[list[dict], int, dict | None]:
    (pages, total), found = answers.cache_mode_group_page.with_freshness(number)
    return summaries.cache_mode_groups_of(pages), total, found


def cache_mode_report(group_key: str | None, page=1) -> dict:
    """A page of cache-mode groups and the chosen one (by its key, the run
    ids joined by "-"), which need not be on that page."""
    number = _page_number(page)
    groups, total, found = _cache_mode_page(number)
    group = None
    if group_key:
        group = next((g for g in groups if g["key"] == group_key), None)
        if group is None:
            group = summaries.cache_mode_group(Run.objects.listed(), group_key)
    # The published sets (the seeds), always offered, first: a reader checks
    # a source's own figures there.  Few runs: read live.
    published, _n = summaries.cache_mode_groups(
        Run.objects.listed().filter(source=Source.PUBLISHED), 1, CACHE_GROUPS_PAGE
    )
    keys = {g["key"] for g in published}
    groups = [g for g in groups if g["key"] not in keys]
    if group_key and group is None:
        group = next((g for g in published if g["key"] == group_key), None)
    if group is None and not group_key:
        group = groups[0] if groups else (published[0] if published else None)
    pages = max(1, -(-total // CACHE_GROUPS_PAGE))
    return {
        "published_groups": published,
        "groups": groups,
        "group": group,
        "group_count": total,
        "group_page": min(number, pages),
        "group_pages": pages,
        "groups_freshness": answer_cache.freshness_of(found),
    }


def _page_number(page) -> int:
    try:
        return max(1, int(page or 1))
    except (TypeError, ValueError):
        return 1


# Submissions -----------------------------------------------------------------


def submission_run_id(sub: Submission, user=None, owner_key: str = "") -> int | None:
    """The run a submission became, if the viewer may open it.

    A status URL is keyed by the bundle id, which is also the run's uuid: it
    must not turn a private run's uuid into its id.
    """
    if sub.run_id is None:
        return None
    run = sub.run
    return run.pk if run is not None and run.is_visible_to(user, owner_key) else None
