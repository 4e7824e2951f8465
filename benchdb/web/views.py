"""Server-rendered pages.  Same querysets, filters and statistics as the API.

Charts get their data as JSON through ``json_script`` and are drawn by one
small script per page (static/js/); the tables carry every number, so the
pages work without JavaScript.
"""

from __future__ import annotations

import gzip
import hashlib
from functools import lru_cache

from django.contrib import admin
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from benchdb.api.throttling import (
    account_form_allowed,
    comparison_save_allowed,
    login_allowed,
    remember_device,
)
from benchdb.results import (
    answer_cache,
    exports,
    hostcost,
    metrics,
    reads,
    reports,
    standing,
    stats,
)
from benchdb.results import answers as stored
from benchdb.results import compare as compare_mod
from benchdb.results.models import (
    Comparison,
    RawOutput,
    Run,
)
from benchdb.results.vocab import Source
from benchdb.web import answers, kept, owner, present
from benchdb.web.forms import SignupForm
from benchdb.web.imports import ImportForm
from benchdb.web.templatetags import partials
from benchdb.web.templatetags.benchdb_format import metric_words
from benchdb_agent import vocab as agent_vocab

MAX_COMPARE = reads.MAX_COMPARE_RUNS
CACHE_ORDER = reads.CACHE_ORDER


@kept.page
def home(request):
    context = reads.home_summary()
    context["latest"] = list(context["latest"])
    reads.label_host_platforms([r for r in context["latest"] if r.role == "host"])
    context["latest_rows"] = present.home_rows(context["latest"])
    return render(request, "web/home.html", context)


@kept.page
def run_list(request):
    params = request.GET.copy()
    ordering = params.get("ordering", "")
    if ordering.lstrip("-") in reads.BROWSE_HEADLINES:
        params.pop("ordering")  # not a column: reads.browse_page sorts by it
    try:
        filterset = reads.browse(params, request.user)
    except reads.FilterError as exc:
        return render(
            request,
            "web/runs.html",
            {
                "filterset": exc.filterset,
                "errors": exc.errors,
                "chips": present.chips(request.GET, []),
            },
            status=400,
        )
    facets, total, freshness = reads.facets_and_total(
        params, user=request.user, filterset=filterset
    )
    page = reads.browse_page(filterset.qs, ordering, request.GET.get("page"), total)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "web/runs.html",
        {
            "filterset": filterset,
            "facets": facets,
            "chips": present.chips(request.GET, facets),
            "page": page,
            "rows": present.browse_rows(page),
            "freshness": freshness,
            "query": query.urlencode(),
            "ordering": ordering,
            "q": request.GET.get("q", ""),
        },
    )


# Owner keys this browser opened runs with (``run_detail``'s ``?key=``), by
# run id, in its session: the pages of an anonymous private run then open
# for its uploader as the API does with X-Owner-Key (and its owner's
# controls, web/owner.py).
SESSION_OWNER_KEYS = owner.SESSION_OWNER_KEYS


def _readable_run(request, pk: int) -> Run:
    key = request.session.get(SESSION_OWNER_KEYS, {}).get(str(pk), "")
    try:
        return reads.run_detail(pk, request.user, key)
    except Run.DoesNotExist:
        raise Http404("no such run") from None


def _remember_owner_key(request, pk: int):
    """``?key=OWNER_KEY`` (the address the agent prints for an anonymous
    upload): kept in the session if it opens the run, then the same page
    without it, so the key leaves the address bar and is never a Referer."""
    key = request.GET.get("key", "").strip()[:200]
    if key and reads.readable_runs(None, key).filter(pk=pk).exists():
        keys = dict(request.session.get(SESSION_OWNER_KEYS, {}))
        keys[str(pk)] = key
        request.session[SESSION_OWNER_KEYS] = keys
    return redirect(request.path)


def _hidden(request, exc: reads.RunHidden):
    return render(request, "web/run_hidden.html", {"run": exc.run}, status=410)


@kept.page
def run_detail(request, pk: int):
    # Kept for anonymous visitors (a shared link asked again): one with the
    # run's owner key in the session, or signed in, is written its own.
    if "key" in request.GET:
        return _remember_owner_key(request, pk)
    try:
        run = _readable_run(request, pk)
    except reads.RunHidden as exc:
        return _hidden(request, exc)
    # Guest/host with its interval, per paired test (results.stats.overhead);
    # empty unless the viewer may open the baseline (reads.shown_baseline).
    baseline, overheads = reads.run_overheads(run, request.user)
    rows = []
    results = list(run.results.all())
    for res in results:
        direction = (res.stats or {}).get("main_direction")
        summary = ((res.stats or {}).get("directions") or {}).get(direction) or {}
        metric = metrics.main_metric(res.test_id) or _first_metric(summary)
        main = summary.get(metric) or {}
        overhead = overheads.get(res.pk, {}).get(metric)
        rows.append(
            {
                "result": res,
                "metric": metric,
                "summary": main,
                "overhead": overhead,
                "host_summary": present.main_summary(
                    baseline.get(res.comparability_key), metric
                ),
                "repeat_cells": present.repeat_cells(run, res, metric),
            }
        )
    present.mark_test_warnings(rows, run.warnings)
    groups = present.run_groups(rows, run, run.baseline)
    chart_data = [{"slug": g["slug"], "bars": g["bars"]} for g in groups]
    guests = []
    if run.role == "host":
        guests = list(run.guests.visible().order_by("id"))
    response = render(
        request,
        "web/run_detail.html",
        {
            "run": run,
            "owner_controls": owner.controls(request, run),
            "baseline": run.baseline,
            "host_cost": hostcost.run_host_cost(run) if run.role == "guest" else None,
            "rows": rows,
            "groups": groups,
            "guests": guests,
            "headlines": present.headlines(rows, run.source == Source.PUBLISHED),
            "standing": standing.run_standing(run, present.HEADLINES),
            **owner.agent_urls(request),
            "warning_groups": present.group_warnings(run.warnings),
            "chart_data": chart_data,
            "safety": agent_vocab.CACHE_MODE_SAFETY.get(run.cache_mode),
            "interval_explanation": stats.INTERVAL_EXPLANATION,
            "figure_legend": stats.figure_legend(r.repeat_count for r in results),
            # A list, not the dict: a tag named "items" would shadow .items
            # in the template.
            "tags": sorted((run.tags or {}).items()),
        },
    )
    reads.release(run)
    return response


def run_nearest(request, pk: int):
    """Where a run page's "compare with the nearest" link goes (``?test=``,
    one of its headline tests): the runs nearest to it in that test, found
    now (``standing.nearest_of_test``), and a redirect to their comparison
    with the run as the reference.  Not found with the page: the page is
    read far more often than the link is followed."""
    key = request.session.get(SESSION_OWNER_KEYS, {}).get(str(pk), "")
    try:
        run = reads.detail_runs(request.user, key).get(pk=pk)
    except Run.DoesNotExist:
        try:
            reads.check_gone(pk)
        except reads.RunHidden as exc:
            return _hidden(request, exc)
        raise Http404("no such run") from None
    test_id = request.GET.get("test", "")
    try:
        nearest = standing.nearest_of_test(run, test_id, present.HEADLINES)
    except LookupError:
        raise Http404("this run has no figure of that test to compare") from None
    if not nearest:
        raise Http404("no other comparable run of this test now")
    runs = ",".join(str(i) for i in (run.pk, *nearest))
    return redirect(f"{reverse('compare')}?runs={runs}&ref={run.pk}")


def _first_metric(summary: dict) -> str | None:
    for metric in ("iops", "bw_bytes", "lat_mean_ns", "runtime_s"):
        if metric in summary:
            return metric
    return None


def raw_output(request, pk: int, result_id: int, repeat: int):
    try:
        run = _readable_run(request, pk)
    except reads.RunHidden as exc:
        return _hidden(request, exc)
    try:
        raw = reads.raw_output(run, result_id, repeat)
    except RawOutput.DoesNotExist:
        raise Http404("no such raw output") from None
    text = gzip.decompress(bytes(raw.data_gzip)).decode("utf-8", "replace")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def _run_ids(value: str | list) -> list[int]:
    parts = value if isinstance(value, list) else [value]
    ids = []
    for part in parts:
        for item in str(part).split(","):
            item = item.strip()
            if not item:
                continue
            if not item.isascii() or not item.isdigit():
                raise ValueError(f"{item!r} is not a run id")
            if int(item) not in ids:
                ids.append(int(item))
    return ids


# Every figure's table is in the compare page while the comparison has at
# most this many (tests x 4 figures x runs, ~500 bytes a row); beyond it each
# group's table is fetched when opened (``compare_table``), so ten runs of
# the standard profile stay under 300 KB of HTML.
INLINE_TABLE_ROWS = 300


def _tables_inline(data: dict, runs: list) -> bool:
    figures = len(metrics.MAIN_METRICS)
    return len(data["tests"]) * figures * len(runs) <= INLINE_TABLE_ROWS


# What a comparison page says of each run's hardware (``_labels``), read
# with the runs in one query.
RUN_HARDWARE = ("hardware__cpu_model", "hardware__disk_model")
# What no comparison page shows of a run: JSON and long text, decoded for
# nothing (tags are shown, as differences).
COMPARED_RUN_DEFERRED = (
    *(c for c in reads.LIST_DEFERRED if c != "tags"),
    "suspect_reasons",
    "hidden_reason",
)


def _compared(request, ids: list[int], ref_id: int | None, figures=None):
    """``reads.comparison`` for a page (``figures``: see ``build_comparison``);
    ValueError (400) or Http404 for bad input."""
    try:
        runs, reference = reads.compared_runs(
            ids,
            ref_id,
            request.user,
            related=RUN_HARDWARE,
            deferred=COMPARED_RUN_DEFERRED,
        )
    except reads.ReadError as exc:
        raise ValueError(exc.message) from None
    except reads.NotReadable as exc:
        raise Http404(f"no run {exc.run_ids[0]}") from None
    return runs, reference, compare_mod.build_comparison(runs, reference, figures)


def _comparison_context(request, ids: list[int], ref_id: int | None) -> dict:
    """The compare page's context; ValueError (400) or Http404 for bad input."""
    runs, reference, data = _compared(request, ids, ref_id)
    return _presented_comparison(runs, reference, data, ids)


def _labels(runs: list[Run]) -> dict:
    """``present.differences`` of the runs, their hardware read in two queries
    unless read with them (``RUN_HARDWARE``)."""
    prefetch_related_objects(runs, *RUN_HARDWARE)
    return present.differences(runs)


COMPARE_ROWS = "web/_compare_rows.html"


def _chart_groups(data: dict, labels: dict, inline: bool) -> list[dict]:
    """``present.chart_groups`` with each group's table rows written
    (``rows_html``) when the tables are inline, kept with a comparison the
    memo keeps (``compare.derived``, as the API keeps its JSON) under the
    run labels and the rows template's code, so a hot comparison's page
    does not write its rows again; made every time for any other.  Readers
    must not change them."""
    rows_template = partials.partial(COMPARE_ROWS)
    key = repr((inline, sorted(labels.items()), partials.code(rows_template)))

    def make() -> list[dict]:
        groups = present.chart_groups(data, labels, rows=inline)
        for group in groups:
            if group["rows"]:
                group["rows_html"] = partials.write(rows_template, rows=group["rows"])
                group["rows"] = []
        return groups

    name = "page groups " + hashlib.sha256(key.encode()).hexdigest()
    return compare_mod.derived(data, name, make)


def _presented_comparison(runs, reference, data: dict, ids: list[int]) -> dict:
    diff = _labels(runs)
    labels = diff["labels"]
    inline = _tables_inline(data, runs)
    groups = _chart_groups(data, labels, inline)
    chart_data = [
        {"slug": g["slug"], "bars": g["bars"], "lines": g["lines"]} for g in groups
    ]
    modes = sorted(
        {r.cache_mode for r in runs if r.cache_mode in agent_vocab.CACHE_MODE_SAFETY},
        key=CACHE_ORDER.index,
    )
    return {
        "data": data,
        "runs": runs,
        "reference": reference,
        "labels": labels,
        "differences": diff,
        "groups": groups,
        "tables_inline": inline,
        "chart_data": chart_data,
        "safety": [(mode, *agent_vocab.CACHE_MODE_SAFETY[mode]) for mode in modes],
        "ids": ",".join(str(i) for i in ids),
        "figure_legend": stats.figure_legend(
            e["n"]
            for t in data.get("tests") or []
            for m in t["metrics"]
            for e in m["runs"]
        ),
    }


def _parse_compare_request(request):
    try:
        ids = _run_ids(request.GET.getlist("runs"))
        ref = request.GET.get("ref")
        ref_id = _run_ids(ref)[0] if ref else None
    except (ValueError, IndexError) as exc:
        return None, None, str(exc)
    return ids, ref_id, None


def _bad_request(request, message: str, template: str = "web/compare.html"):
    """A 400 page with the message as text: it often quotes the caller's input,
    so it goes through the template's escaping, never into HTML as is."""
    return render(request, template, {"error": message}, status=400)


def _bad_request_text(message: str) -> HttpResponse:
    """A 400 for machine-facing URLs (CSV, form posts): plain text, not HTML."""
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


@kept.page
def compare(request):
    ids, ref_id, error = _parse_compare_request(request)
    if error:
        return _bad_request(request, error)
    # Two or three runs mostly fit with their tables: every figure at once.
    # More: what the charts show, and every figure only for inline tables.
    few = len(ids) <= 3
    try:
        runs, reference, data = _compared(
            request, ids, ref_id, None if few else present.charted_figures
        )
    except ValueError as exc:
        return _bad_request(request, str(exc))
    if not few and _tables_inline(data, runs):
        data = compare_mod.build_comparison(runs, reference)
    context = _presented_comparison(runs, reference, data, ids)
    return render(request, "web/compare.html", context)


def compare_csv(request):
    ids, ref_id, error = _parse_compare_request(request)
    if error:
        return _bad_request_text(error)
    try:
        _runs, _reference, data = _compared(request, ids, ref_id)
    except ValueError as exc:
        return _bad_request_text(str(exc))
    # The API's column set (benchdb/results/exports.py), streamed.
    return exports.comparison_csv_response(data)


def compare_table(request):
    """One group's table of every figure (``?group=`` its slug), as a page:
    the compare page fetches it when the group's table is opened."""
    ids, ref_id, error = _parse_compare_request(request)
    if error:
        return _bad_request(request, error)
    slug = request.GET.get("group", "")
    try:
        runs, reference, data = _compared(request, ids, ref_id)
    except ValueError as exc:
        return _bad_request(request, str(exc))
    tests = [t for t in data["tests"] if present.group_slug(t) == slug]
    if not tests:
        raise Http404("no such group of tests in this comparison")
    [group] = present.chart_groups(
        {**data, "tests": tests}, _labels(runs)["labels"], rows=True
    )
    context = {
        "g": group,
        "runs": runs,
        "reference": reference,
        "ids": ",".join(str(i) for i in ids),
    }
    return render(request, "web/compare_table.html", context)


def compare_markdown(request):
    """The comparison as a Markdown table (``present.markdown``), as text."""
    ids, ref_id, error = _parse_compare_request(request)
    if error:
        return _bad_request_text(error)
    try:
        runs, _reference, data = _compared(
            request, ids, ref_id, present.charted_figures
        )
    except ValueError as exc:
        return _bad_request_text(str(exc))
    groups = present.chart_groups(data, _labels(runs)["labels"], rows=True)
    return HttpResponse(
        present.markdown(groups), content_type="text/plain; charset=utf-8"
    )


def run_export(request):
    """The browse page's filters as a CSV (or JSON) export, a page at a time:
    the same rows and columns as /api/v1/runs/export/."""
    try:
        filterset = reads.browse(request.GET, request.user)
    except reads.FilterError as exc:
        return _bad_request_text(
            "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
        )
    fmt = "json" if request.GET.get("format") == "json" else "csv"
    try:
        return exports.run_export_response(request, filterset.qs, fmt)
    except exports.ExportError as exc:
        return _bad_request_text(f"{exc.parameter}: {exc}")


@require_POST
def compare_save(request):
    if not comparison_save_allowed(request):
        return HttpResponse(
            "Too many comparisons saved from here lately; try again later.",
            status=429,
            content_type="text/plain; charset=utf-8",
        )
    try:
        ids = _run_ids(request.POST.get("runs", ""))
        ref = request.POST.get("ref")
        ref_id = _run_ids(ref)[0] if ref else None
        comparison = reads.save_comparison(
            ids, ref_id, title=request.POST.get("title") or "", user=request.user
        )
    except (ValueError, IndexError) as exc:
        return _bad_request(request, getattr(exc, "message", str(exc)))
    except reads.NotReadable as exc:
        raise Http404(f"no run {exc.run_ids[0]}") from None
    return redirect(comparison.get_absolute_url())


def comparison_share(request, slug: str):
    comparison = get_object_or_404(Comparison, slug=slug)
    # Runs the viewer may not open (deleted, made private, hidden) are left
    # out, and the page says how many.
    view = reads.saved_comparison(comparison, request.user)
    if view.data is None:
        context = {"error": "None of this comparison's runs can be shown any more."}
    else:
        context = _presented_comparison(
            view.runs, view.reference, view.data, view.run_ids
        )
    context["saved"] = comparison
    context["unavailable"] = view.unavailable
    context["share_url"] = request.build_absolute_uri(comparison.get_absolute_url())
    return render(request, "web/compare.html", context)


def _answer_context(request, cache_sweep: bool) -> dict:
    """The setup form and what it needs (shared by both reports)."""
    question = "cache" if cache_sweep else "overhead"
    setup = answers.chosen_setup(request.GET)
    options, found = answers.workload_options(question, setup)
    links, linked = answers.setup_links(question, request.path)
    return {
        "_found": [*found, linked],
        "setup_fields": answers.setup_choices(),
        "setup": setup,
        "setup_links": links,
        "workloads": options,
        "workload": answers.chosen_workload(request.GET, options),
        "agent_command": answers.agent_command(
            setup, request.build_absolute_uri("/").rstrip("/"), cache_sweep
        ),
    }


def _setup_query(setup: dict, **more) -> str:
    query = QueryDict(mutable=True)
    query.update({**setup, **more})
    return query.urlencode()


def _left_out_links(setup: dict, mode: str, counts: dict) -> list[dict]:
    """What an answer left out of one cache mode, with where to see it."""
    base = {**setup, "role": "guest", "cache_mode": mode}
    out = []
    if counts.get("suspect"):
        out.append(
            {
                "n": counts["suspect"],
                "what": "suspect",
                "url": f"{reverse('run-list')}?{_setup_query(base, suspect='true')}",
            }
        )
    if counts.get("imported"):
        out.append(
            {
                "n": counts["imported"],
                "what": "imported, configuration not verified",
                "url": f"{reverse('run-list')}?{_setup_query(base, source='imported')}",
            }
        )
    if counts.get("unlisted"):
        out.append({"n": counts["unlisted"], "what": "unlisted", "url": ""})
    return out


@kept.page
def cache_mode_report(request):
    context = reads.cache_mode_report(request.GET.get("group"), request.GET.get("page"))
    # The sets of runs the page offers, apart from the shown set's comparison
    # (``_comparison_context``), whose chart groups are its "groups".
    context["sets"] = context.pop("groups")
    context.update(_answer_context(request, cache_sweep=True))
    workload = context["workload"]
    if workload:
        setup = context["setup"]
        context["answers"], found = stored.cache_mode_answers.with_freshness(
            setup, workload
        )
        context["ranking"], ranked = stored.cache_mode_ranking.with_freshness(
            setup, workload
        )
        context["cd"] = present.cd_diagram(context["ranking"])
        context["_found"] += [found, ranked]
        left = reports.left_out(setup, workload["test_id"])
        for row in context["answers"]:
            row["left_out"] = _left_out_links(
                setup, row["mode"], left.get(row["mode"], {})
            )
            if not row["has_data"]:
                row["elsewhere"] = [
                    {**w, "url": f"?{_setup_query(setup, workload=w['test_id'])}"}
                    for w in answers.elsewhere(
                        context["workloads"], workload, row["mode"]
                    )[:2]
                ]
        context["none_row"] = context["answers"][0] if context["answers"] else None
        context["recommendation"] = reports.recommendation(context["answers"])
    context["freshness"] = answer_cache.freshness_of(
        *context.pop("_found"),
        context.get("groups_freshness"),
        context.get("summary_freshness"),
    )
    context["published"] = answers.published(
        Run.objects.listed()
        .filter(source="published")
        .exclude(cache_mode="unknown")
        .order_by("id")
    )
    group = context["group"]
    if group:
        runs = group["runs"]
        reference = next((r for r in runs if r.cache_mode == "none"), runs[0])
        context.update(_comparison_context(request, [r.pk for r in runs], reference.pk))
        context["extremes"] = _extremes(context["data"], context["labels"])
    return render(request, "web/report_cache_modes.html", context)


def _extremes(data: dict, labels: dict) -> list[dict]:
    """Best and worst among real differences only (``compare.extremes``)."""
    out = []
    for e in compare_mod.extremes(data):
        out.append(
            {
                **e,
                "metric_text": metric_words(e["metric"]),
                "fastest": labels.get(e["fastest"]),
                "slowest": labels.get(e["slowest"]),
                "significant": [labels[rid] for rid in e["significant"]],
            }
        )
    return out


@kept.page
def overhead_report(request):
    context = reads.overhead_report(request.GET.get("page"))
    context["rows"] = present.overhead_rows(context["rows"])
    context.update(_answer_context(request, cache_sweep=False))
    workload = context["workload"]
    if workload:
        context["answer"], found = stored.overhead_answer.with_freshness(
            context["setup"], workload
        )
        context["by_storage"], by_found = stored.overhead_by.with_freshness(
            "storage_backend", context["setup"], workload
        )
        context["_found"] += [found, by_found]
        context["chart_data"] = present.overhead_chart(
            workload, context["answer"], context["by_storage"]
        )
        if not context["answer"]["runs"]:
            context["elsewhere"] = [
                {
                    **w,
                    "url": f"?{_setup_query(context['setup'], workload=w['test_id'])}",
                }
                for w in answers.elsewhere(context["workloads"], workload)[:3]
            ]
    # A guest faster than its host is marked, with why (reports.ABOVE_HOST).
    context["above_host"] = reports.ABOVE_HOST
    context["summary"] = [
        {
            **t,
            "above_host": reports.beats_host(
                (t.get("main") or {}).get("median"), t["metric"]
            ),
        }
        for t in context["summary"]
    ]
    context["summary_above_host"] = any(t["above_host"] for t in context["summary"])
    context["by_storage_above"] = any(
        r.get("above_host") for r in context.get("by_storage") or []
    )
    context["freshness"] = answer_cache.freshness_of(
        *context.pop("_found"),
        context.get("groups_freshness"),
        context.get("summary_freshness"),
    )
    context["published"] = answers.published(
        Run.objects.listed().filter(source="published", role="host").order_by("id")
    )
    return render(request, "web/report_overhead.html", context)


@lru_cache(maxsize=1)
def _zipapp() -> bytes:
    from benchdb_agent import zipapp_build

    return zipapp_build.build_bytes()


def agent_download(request):
    response = HttpResponse(_zipapp(), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="benchdb-agent.pyz"'
    return response


def submit(request):
    context = {
        **owner.agent_urls(request),
        **owner.token_context(request),
        "import_form": ImportForm(),
    }
    return render(request, "web/submit.html", context)


class LoginView(auth_views.LoginView):
    """Django's sign-in page with a brute-force limit: after
    LOGIN_FAILURE_LIMIT failures from one address or for one user name within
    LOGIN_FAILURE_WINDOW_S, it answers 429 without checking the password
    (failures are counted, and the limit enforced on every sign-in path, by
    ``throttling.LoginLimitBackend``).
    The per-name limit spares browsers the user has signed in from before
    (their device cookie has a limit of its own), so it cannot be used to
    lock the user out."""

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        if not login_allowed(request, username):
            form = self.get_form()
            form.errors.clear()
            form.add_error(
                None, "Too many failed sign-ins; wait a few minutes and try again."
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        remember_device(self.request, response, form.get_user().get_username())
        return response


login_view = LoginView.as_view()


def admin_login(request):
    """The admin's sign-in page, 429 over the sign-in limits as ours is (its
    password check refuses then: ``throttling.LoginLimitBackend``)."""
    limited = request.method == "POST" and not login_allowed(
        request, request.POST.get("username", "")
    )
    response = admin.site.login(request)
    if limited:
        response.status_code = 429
    return response


def _too_many(request, template: str, form):
    form.add_error(None, "Too many requests from your address; try again later.")
    return render(request, template, {"form": form}, status=429)


def signup(request):
    form = SignupForm(request.POST or None)
    if request.method == "POST" and not account_form_allowed(request):
        return _too_many(request, "registration/signup.html", form)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        response = redirect("submit")
        remember_device(request, response, user.get_username())
        return response
    return render(request, "registration/signup.html", {"form": form})


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset by e-mail (a one-time link; the same answer whether or
    not the address has an account), limited per address like sign-ups."""

    def post(self, request, *args, **kwargs):
        if not account_form_allowed(request):
            return _too_many(request, self.template_name, self.get_form())
        return super().post(request, *args, **kwargs)
