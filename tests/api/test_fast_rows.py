"""The run list, run detail and hardware list: their rows are built once
(``results.rows``) and are what the OpenAPI schema says, key for key; lists
page by ids first (``reads.IdPaginator``), with a fixed number of queries."""

from __future__ import annotations

import re
from unittest import mock

import jsonschema
import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from drf_spectacular.generators import SchemaGenerator

from benchdb.results import rows
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Hardware, Run
from benchdb.results.vocab import Visibility
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

READ = "fio-rand-read-4k-q1t1"


@pytest.fixture
def shapes(fio, alice):
    """Runs of every shape a row can have: a guest with a listed host
    baseline, one whose baseline is private, an owned run with tags and
    warnings, one without hardware, a hidden and a suspect one."""
    host = store_bundle(make_bundle(fio, role="host", pair_id="p1", speed="slow"))
    guest = store_bundle(
        make_bundle(
            fio,
            tests=(READ, "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync"),
            pair_id="p1",
            tags={"cache_mode": "none", "disk_type": "nvme-ssd", "note": "é ✓"},
        )
    )
    private_host = store_bundle(make_bundle(fio, role="host", pair_id="p2"))
    Run.objects.filter(pk=private_host.pk).update(visibility=Visibility.PRIVATE)
    store_bundle(make_bundle(fio, pair_id="p2", tags={"cache_mode": "writeback"}))
    owned = store_bundle(make_bundle(fio, tags={"disk_type": "hdd"}))
    Run.objects.filter(pk=owned.pk).update(
        owner=alice,
        warnings=[{"code": "x", "message": "a warning", "test_id": READ}],
        suspect=True,
        suspect_reasons=["too fast"],
        iothread=True,
        title="Owned",
    )
    bare = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=bare.pk).update(hardware=None, ran_at=None)
    hidden = store_bundle(make_bundle(fio))
    Run.objects.filter(pk=hidden.pk).update(hidden=True, hidden_reason="spam")
    return {"host": host, "guest": guest, "owned": owned, "bare": bare}


def strict(node):
    """An OpenAPI 3.0 schema node as JSON Schema: ``nullable`` as a null
    alternative, references into ``$defs``, objects closed to undeclared
    keys (the keys they must hold: the schema's ``required``)."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if k != "nullable"}
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/components/schemas/", "#/$defs/")
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="module")
def responses():
    """url path -> its GET answer's JSON Schema, for the API's operations."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    defs = strict(schema["components"]["schemas"])
    out = []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if not get:
            continue
        content = get["responses"].get("200", {}).get("content", {})
        body = content.get("application/json", {}).get("schema")
        if body is not None:
            pattern = re.sub(r"\{[^}]+\}", "[^/]+", path)
            out.append((re.compile(pattern + "$"), {**strict(body), "$defs": defs}))
    return out


def check(client, url: str, responses) -> dict:
    answer = client.get(url)
    assert answer.status_code == 200, (url, answer.content)
    path = url.split("?")[0]
    [schema] = [s for pattern, s in responses if pattern.match(path)]
    jsonschema.validate(answer.json(), schema)
    return answer.json()


def test_rows_are_what_the_schema_says(api, alice, shapes, responses):
    urls = [
        "/api/v1/runs/",
        "/api/v1/runs/?page_size=2&page=2",
        "/api/v1/runs/?cache_mode=none&disk_type=nvme-ssd",
        "/api/v1/runs/?ordering=disk_type",
        "/api/v1/hardware/",
        "/api/v1/hardware/?disk_type=hdd",
        *(f"/api/v1/runs/{run.pk}/" for run in shapes.values()),
        f"/api/v1/hardware/{shapes['guest'].hardware_id}/",
        *(
            f"/api/v1/runs/{run.pk}/similar/?test_id={READ}{query}"
            for run in shapes.values()
            for query in ("", "&metric=lat_mean_ns&match=cache_mode,platform")
        ),
    ]
    for url in urls:
        check(api, url, responses)
    owner = token_client(alice)
    for url in ("/api/v1/runs/?mine=true", f"/api/v1/runs/{shapes['owned'].pk}/"):
        check(owner, url, responses)
    # Every shape was seen: a baseline with its overheads, no hardware.
    guest = check(api, f"/api/v1/runs/{shapes['guest'].pk}/", responses)
    assert guest["baseline"] == shapes["host"].pk
    assert any(t["overhead"] for t in guest["tests"])
    bare = check(api, f"/api/v1/runs/{shapes['bare'].pk}/", responses)
    assert bare["hardware"] is None and bare["ran_at"] is None


def test_the_check_finds_an_undeclared_or_missing_key(api, shapes, responses):
    """The strict schema refuses a row with a key too many or too few."""
    url = f"/api/v1/runs/{shapes['guest'].pk}/"
    row = check(api, url, responses)
    [schema] = [s for pattern, s in responses if pattern.match(url)]
    for bad in ({**row, "extra": 1}, {k: v for k, v in row.items() if k != "uuid"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_list_rows_show_a_baseline_to_whoever_may_open_it(api, shapes):
    """The run list's rows (reads.list_rows) answer "may the reader open the
    baseline?" in SQL: a private baseline's id for the holder of its owner
    key and for staff, None for anyone else, as DRF's path answers from the
    loaded baseline (Run.is_visible_to)."""
    from django.contrib.auth.models import User

    from benchdb.results import reads

    private = Run.objects.get(pair_id="p2", role="host")
    key = private.set_owner_key()
    private.save()
    guest = Run.objects.get(pair_id="p2", role="guest")
    url = "/api/v1/runs/?cache_mode=writeback"

    def baseline_of(client) -> int | None:
        body = client.get(url).json()
        [row] = [r for r in body["results"] if r["id"] == guest.pk]
        return row["baseline"]

    assert baseline_of(api) is None
    api.credentials(HTTP_X_OWNER_KEY=key)
    assert baseline_of(api) == private.pk
    staff = User.objects.create_user("staff", is_staff=True)
    assert baseline_of(token_client(staff)) == private.pk
    # The detail answers as the list does (Run.is_visible_to, loaded).
    api.credentials()
    assert api.get(f"/api/v1/runs/{guest.pk}/").json()["baseline"] is None
    # The rows are read as the rows served (rows.run_row), in one query.
    links = (str, str)
    one = Run.objects.filter(pk=guest.pk)
    with CaptureQueriesContext(connection) as queries:
        [row] = reads.list_rows(one, links, None, key)
    assert len(queries) == 1
    assert row["baseline"] == private.pk and row["url"] == str(guest.pk)
    assert reads.list_rows(one, links)[0]["baseline"] is None


def test_pages_by_ids_keep_order_count_and_every_run(api, fio):
    for _ in range(7):
        store_bundle(make_bundle(fio))
    expected = list(
        Run.objects.listed().order_by("-created", "-id").values_list("pk", flat=True)
    )
    seen = []
    for page in range(1, 5):
        body = api.get(f"/api/v1/runs/?page_size=2&page={page}").json()
        assert body["count"] == 7
        seen += [r["id"] for r in body["results"]]
    assert seen == expected


def test_list_hardware_and_detail_queries_are_fixed(api, fio, shapes):
    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(url).status_code == 200
        return len(ctx.captured_queries)

    counts = (
        queries("/api/v1/runs/"),
        queries("/api/v1/hardware/"),
        queries(f"/api/v1/runs/{shapes['guest'].pk}/"),
    )
    for _ in range(3):
        store_bundle(make_bundle(fio, tests=(READ, "fio-rand-write-4k-q1t1")))
    # count, the page's rows (its ids a subquery); the detail: run, both
    # runs' results (reads.attach_tests), repeats with their raw formats (the
    # repeat values are in the statistics loaded: overheads.result_overheads).
    assert counts == (2, 2, 3)
    # similar, once its population is stored: the run with its result's key
    # and figure, the stored population.
    similar = f"/api/v1/runs/{shapes['guest'].pk}/similar/?test_id={READ}"
    assert queries(similar) > queries(similar) == 2
    assert (
        queries("/api/v1/runs/"),
        queries("/api/v1/hardware/"),
        queries(f"/api/v1/runs/{shapes['guest'].pk}/"),
    ) == counts
    assert Hardware.objects.count() >= 2


def test_home_system_count_and_hardware_counts_are_the_old_definitions(shapes):
    """The rewritten queries (a distinct count of listed runs' hardware, EXISTS
    and a per-row count) answer what the joins and GROUP BY answered."""
    from django.db.models import Count, Q

    from benchdb.results import reads

    listed = Run.objects.listed()
    Run.objects.filter(pk=shapes["owned"].pk).update(visibility=Visibility.UNLISTED)
    old_systems = Hardware.objects.filter(runs__in=listed).distinct().count()
    assert old_systems >= 2
    assert reads.home_summary()["system_count"] == old_systems
    listed_q = Q(runs__visibility=Visibility.PUBLIC, runs__hidden=False)
    old = (
        Hardware.objects.annotate(run_count=Count("runs", filter=listed_q))
        .filter(run_count__gt=0)
        .order_by("id")
    )
    assert [(h.pk, h.run_count) for h in reads.hardware_list()] == [
        (h.pk, h.run_count) for h in old
    ]


def test_repeats_read_as_rows_are_what_the_model_instances_gave(api, client, shapes):
    """reads.attach_repeats (one query, tuples) against the prefetched
    Measurement and RawOutput instances the API and the run page used."""
    from django.template import Context, Template

    from benchdb.results import reads
    from benchdb.results.models import Measurement, RawOutput
    from benchdb.web import present

    run = shapes["guest"]
    # The API: every repeat's records and raw format, as built before.
    tests = api.get(f"/api/v1/runs/{run.pk}/").json()["tests"]
    for test in tests:
        res = run.results.get(test_id=test["test_id"])
        formats = {r.repeat: r.format for r in RawOutput.objects.filter(result=res)}
        by_repeat: dict[int, list] = {}
        for m in Measurement.objects.filter(result=res).order_by(
            "repeat", "direction", "job"
        ):
            by_repeat.setdefault(m.repeat, []).append(
                {"job": m.job, "direction": m.direction, **m.metrics()}
            )
        assert test["repeats"] == [
            {"repeat": r, "records": recs, "raw_format": formats.get(r)}
            for r, recs in sorted(by_repeat.items())
        ]
    # The run page: its repeats column, against the template it replaced.
    old = Template(
        "{% load benchdb_format %}{% for m in repeats %}{% if m.direction == "
        "result.stats.main_direction %}<span>{{ m|get_metric:metric }}</span>"
        "{% if m.repeat in raw_repeats %} <a href=\"{% url 'raw-output' run.pk "
        'result.pk m.repeat %}">raw</a>{% endif %}{% endif %}{% endfor %}'
    )
    new = Template(
        "{% for c in cells %}<span>{{ c.value }}</span>{% if c.raw %} "
        '<a href="{{ c.raw }}">raw</a>{% endif %}{% endfor %}'
    )
    page = client.get(run.get_absolute_url())
    rows = page.context["rows"]
    assert len(rows) == 3
    for row in rows:
        res = row["result"]
        RawOutput.objects.filter(result=res, repeat=1).delete()
        fresh = run.results.get(pk=res.pk)
        for metric in (row["metric"], "iops", None):
            before = old.render(
                Context(
                    {
                        "repeats": list(fresh.measurements.all()),
                        "raw_repeats": {r.repeat for r in fresh.raw_outputs.all()},
                        "result": fresh,
                        "metric": metric,
                        "run": run,
                    }
                )
            )
            page_run = reads.run_detail(run.pk)
            again = next(r for r in page_run.results.all() if r.pk == res.pk)
            after = new.render(
                Context({"cells": present.repeat_cells(page_run, again, metric)})
            )
            assert after == before
            assert before.count("<span>") == 3
        assert "raw</a>" in before


def test_run_page_queries_are_fixed(client, fio, shapes):
    def queries(url: str) -> int:
        # The page written, not kept (benchdb/web/kept.py).
        with override_settings(BENCHDB_PAGE_MEMO=0):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    small = store_bundle(make_bundle(fio, tests=(READ,)))
    big = shapes["guest"]
    # run, both runs' results, repeats with their raw formats; then where the
    # run stands (standing.run_standing): per headline test at most the
    # stored similar-systems answer (its nearest runs are found when the
    # page's link asks: views.run_nearest).  Fixed: the same for a run of
    # one test as for a run of the whole suite.
    from benchdb.web import present

    bound = 3 + len(present.HEADLINES)
    assert queries(big.get_absolute_url()) <= bound
    assert queries(small.get_absolute_url()) == queries(big.get_absolute_url())


def test_browse_pages_by_ids_in_every_order(client, fio, shapes):
    """The browse page pages by ids first too: a page holds the runs the
    ordered list holds, sorted by a column or by a headline figure (the
    offsets themselves: test_pages_by_ids_keep_order_count_and_every_run)."""
    for _ in range(3):
        store_bundle(make_bundle(fio))
    from benchdb.results import reads

    for ordering in ("", "title", "-disk_type", "-rand4k_iops"):
        params = f"ordering={ordering}&" if ordering else ""
        page = client.get(f"/runs/?{params}page=1").context["page"]
        seen = [r.pk for r in page]
        qs = reads.with_headlines(reads.browse({}).qs)
        if ordering == "-rand4k_iops":
            qs = reads.order_by_headline(qs, ordering)
        elif ordering:
            qs = qs.order_by(present_order(ordering), "-id")
        expected = list(qs.values_list("pk", flat=True))
        assert seen == expected, ordering
        assert page.paginator.count == len(expected) >= 8


def present_order(ordering: str) -> str:
    from benchdb.results.filters import ORDERING_FIELDS

    name = ordering.lstrip("-")
    return ("-" if ordering.startswith("-") else "") + ORDERING_FIELDS[name]


def test_export_page_rows_are_result_rows(shapes):
    """exports.page_rows (the runs' columns once, then their results) gives
    the tuples of exports.result_rows (one joined row per result), baselines
    shown or not, with and without the statistics; page_csv_lines the text
    csv_lines makes of them, quoting and defusing included."""
    from benchdb.results.models import Result

    odd = '=cmd, "quoted"\nline'
    Run.objects.filter(pk=shapes["owned"].pk).update(suite_version=odd)
    Result.objects.filter(run=shapes["owned"]).update(comparability_key=odd)
    from benchdb.results import exports

    ids = list(Run.objects.order_by("pk").values_list("pk", flat=True))
    assert len(ids) >= 7
    column = exports.EXPORT_COLUMNS.index("baseline_id")
    shown = {row[column] for row in exports.page_rows(ids)}
    assert shown == {None, shapes["host"].pk}  # the private baseline is not
    for stats in (False, True):
        for chosen in (ids, ids[1:4], []):
            expected = list(
                exports.result_rows(Run.objects.filter(pk__in=chosen), stats=stats)
            )
            assert list(exports.page_rows(chosen, stats=stats)) == expected
            if not stats:
                text = "".join(exports.csv_lines(exports.EXPORT_COLUMNS, expected))
                assert "".join(exports.page_csv_lines(chosen)) == text
    assert exports.RUN_PATHS[0] == "id" and exports.RESULT_PATHS[0] == "test_id"


def test_home_counts_are_stored_as_the_live_answer_and_say_how_fresh(
    client, fio, shapes
):
    """The home page's community counts are a stored answer (answer_cache):
    the live function's own result, shown with the time and run count it
    was computed over; after an upload it is served with "newer uploads"
    until the refresh, after a run leaves the list it is computed again."""
    from benchdb.results import answers, refresh

    page = client.get("/")
    live = answers.home_counts.live()
    assert {k: page.context[k] for k in live} == live
    assert page.context["freshness"]["runs"] == live["run_count"]
    assert page.context["freshness"]["current"]
    assert "Community figures as of" in page.content.decode()

    store_bundle(make_bundle(fio))  # an upload: served as of before, said so
    page = client.get("/")
    assert page.context["run_count"] == live["run_count"]
    assert not page.context["freshness"]["current"]
    assert "newer uploads are added by the next refresh" in page.content.decode()
    refresh.refresh()
    page = client.get("/")
    assert page.context["run_count"] == live["run_count"] + 1
    assert page.context["freshness"]["current"]

    # A run leaving the list: never served from before.
    Run.objects.get(pk=shapes["guest"].pk).moderate("hide", "test")
    page = client.get("/")
    assert page.context["run_count"] == live["run_count"]
    assert {k: page.context[k] for k in live} == answers.home_counts.live()


def test_filter_sets_share_a_form_class_not_their_data():
    """RunFilterSet builds its form class once; each filter set still has
    its own form, its own dict of fields and its own errors."""
    from django.http import QueryDict

    from benchdb.results.filters import RunFilterSet

    good = RunFilterSet(QueryDict("cache_mode=none"), queryset=Run.objects.all())
    bad = RunFilterSet(QueryDict("cache_mode=bogus"), queryset=Run.objects.all())
    assert type(good.form) is type(bad.form)
    assert good.form.fields is not bad.form.fields
    assert good.is_valid() and not bad.is_valid()
    assert "cache_mode" in bad.errors and not good.errors


def _field_state(field) -> dict:
    """What a form field, its widget and their parts hold, each attribute's
    dict or list copied, to see them unchanged later."""
    parts = [field, field.widget]
    for sub in getattr(field, "fields", ()):
        parts += [sub, sub.widget]
    parts += getattr(field.widget, "widgets", [])
    return [
        {
            k: (type(v)(v) if isinstance(v, dict | list | set) else v)
            for k, v in vars(p).items()
        }
        for p in parts
    ]


def test_filter_forms_share_their_fields_and_leave_them_unchanged():
    """The forms of a filter set share their class's fields
    (filters.SharedFields): a field assigned on one form stays its own, and
    validating good and bad values or rendering a form leaves the shared
    fields, their widgets and their parts as they were."""
    from django.http import QueryDict

    from benchdb.results.filters import RunFilterSet
    from benchdb.results.vocab import CacheMode

    one = RunFilterSet(QueryDict("cache_mode=none"), queryset=Run.objects.all())
    two = RunFilterSet(QueryDict(""), queryset=Run.objects.all())
    base_fields = type(one.form).base_fields
    assert one.form.fields["cache_mode"] is base_fields["cache_mode"]
    before = {name: _field_state(f) for name, f in base_fields.items()}
    for query in (
        "cache_mode=none&created_after=2024-01-01T00:00:00Z&q=x&has_baseline=true",
        "cache_mode=bogus&created_after=nope&hardware=x&ordering=zz",
        "",
    ):
        fs = RunFilterSet(QueryDict(query), queryset=Run.objects.all())
        fs.is_valid()
        fs.form.as_p()
    assert {name: _field_state(f) for name, f in base_fields.items()} == before
    from django import forms

    one.form.fields["cache_mode"] = forms.ChoiceField(choices=[("none", "none")])
    assert two.form.fields["cache_mode"] is base_fields["cache_mode"]
    assert [v for v, _ in base_fields["cache_mode"].choices] == [
        v for v, _ in CacheMode.choices
    ]
    assert two.is_valid() and not two.form.cleaned_data["cache_mode"]
    bad = RunFilterSet(QueryDict("cache_mode=bogus"), queryset=Run.objects.all())
    assert not bad.is_valid() and "cache_mode" in bad.errors


def test_filter_sets_copy_their_filters_and_share_their_arguments():
    """Each filter set has its own filters (filters.SharedFilters): its own
    parent and model, a method filter calling its own set's method, while
    the arguments the filters were made with are the class's; filtering is
    what it was."""
    from django.http import QueryDict

    from benchdb.results.filters import RunFilterSet

    one = RunFilterSet(QueryDict("platform=proxmox&q=x"), queryset=Run.objects.all())
    two = RunFilterSet(QueryDict(""), queryset=Run.objects.listed())
    base = RunFilterSet.base_filters
    for name, f in one.filters.items():
        assert f is not two.filters[name] and f is not base[name]
        assert f.parent is one and two.filters[name].parent is two
        assert f.extra is base[name].extra
    for name in ("platform", "q", "test_id", "has_baseline"):
        assert one.filters[name].filter.f is one.filters[name]
        assert two.filters[name].filter.f is two.filters[name]
        assert one.filters[name].filter.method.__self__ is one
    # The reader a method filter uses is its own set's.
    one.reader, two.reader = ("a", ""), ("b", "")
    assert one.filters["has_baseline"].filter.method.__self__.reader == ("a", "")
    assert not hasattr(base["platform"], "parent")
    assert one.is_valid()
    got = str(one.qs.order_by("pk").query)
    assert "proxmox" in got and "%x%" in got.replace("'", "")
    assert two.is_valid() and str(two.qs.query).count("proxmox") == 0


def test_facet_counts_without_a_facet_are_a_filter_set_without_it():
    """RunFilterSet.qs_without (a chosen facet's counts, reads.facets_and_total)
    lists the runs a filter set built without that parameter lists."""
    from django.http import QueryDict

    from benchdb.results.filters import RunFilterSet

    params = QueryDict(
        "cache_mode=none&cache_mode=writeback&platform=proxmox&disk_type=nvme-ssd"
        "&q=a&ordering=-title"
    )
    full = RunFilterSet(params, queryset=Run.objects.listed())
    assert full.is_valid()
    for name in ("cache_mode", "platform", "disk_type", "q"):
        others = params.copy()
        others.pop(name)
        want = RunFilterSet(others, queryset=Run.objects.listed()).qs
        got = full.qs_without(name, Run.objects.listed())
        assert str(got.order_by("pk").query) == str(want.order_by("pk").query)


def test_overheads_are_the_per_pair_answers_of_the_stored_values(shapes):
    """overheads.result_overheads (the values in the loaded statistics, the t
    functions once for every pair) against what it did before: the values
    read by ``repeat_values`` and ``stats.overhead`` pair by pair, bit for
    bit; results stored without their values fall back to the measurements."""
    from benchdb.results import metrics, overheads, reads, stats
    from benchdb.results.models import Result

    def reference(results, baselines) -> dict:
        pairs = [
            (r, baselines[r.comparability_key])
            for r in results
            if r.comparability_key in baselines
        ]
        values = metrics.repeat_values([r.pk for pair in pairs for r in pair])
        out = {}
        for guest, host in pairs:
            direction = guest.stats["main_direction"]
            out[guest.pk] = {}
            for metric, info in metrics.MAIN_METRICS.items():
                if metric in metrics.PERCENTILE_METRICS:
                    continue
                g = values.get(guest.pk, {}).get(direction, {}).get(metric, [])
                h = values.get(host.pk, {}).get(direction, {}).get(metric, [])
                if g and h:
                    out[guest.pk][metric] = stats.overhead(
                        g, h, info["higher_is_better"]
                    )
        return out

    guest = shapes["guest"]
    for _ in range(2):
        run = reads.run_detail(guest.pk)
        results = list(run.results.all())
        baselines = reads.baseline_results(run)
        assert len(baselines) == 1
        found = overheads.result_overheads(results, baselines)
        assert found == reference(results, baselines)
        assert {m for per in found.values() for m in per} >= {"iops", "bw_bytes"}
        assert any(o["low"] is not None for per in found.values() for o in per.values())
        # The host's results as stored before the values were kept.
        host_ids = [r.pk for r in baselines.values()]
        Result.objects.filter(pk__in=host_ids).update(stats={"main_direction": "read"})


def test_run_page_rows_escape_and_say_what_they_lack(client, fio, shapes):
    """The run page's results table (templates/jinja2/web/_result_rows.html): the
    uploader's words as text, badges, a missing raw output, fewer than three
    repeats said so; each cell labelled by its column's header."""
    from benchdb.results.models import RawOutput, Result

    few = store_bundle(make_bundle(fio, tests=(READ,), repeats=2))
    odd = Result.objects.filter(run=shapes["owned"]).first()
    odd.title = '<b>"odd" & title</b>'
    odd.approximate, odd.comparable = True, False
    odd.save()
    RawOutput.objects.filter(result__run=shapes["guest"], repeat=1).delete()
    page = client.get(shapes["owned"].get_absolute_url()).content.decode()
    # Escaped by Jinja2 (markupsafe writes " as &#34;, Django as &quot;).
    assert "&lt;b&gt;&#34;odd&#34; &amp; title&lt;/b&gt;" in page
    assert '<b>"odd"' not in page
    assert '<span class="badge">approximate</span>' in page
    assert '<span class="badge">outside the suite</span>' in page
    assert '<span class="badge warn">x</span>' in page  # the warning's code
    page = client.get(shapes["guest"].get_absolute_url()).content.decode()
    assert "(arithmetic mean)" not in page and ">raw</a>" in page
    for label in ("Test", "Figure", "Geometric mean", "95% interval", "vs host"):
        assert f'data-label="{label}"' in page
    page = client.get(few.get_absolute_url()).content.decode()
    assert "(min–max: not enough repeats to estimate noise)" in page


def test_detail_and_page_free_their_results_without_the_collector(api, shapes):
    """reads.release: once the detail or the page is written, its results
    and their statistics are freed by reference counting, not left in a
    cycle with their run for the garbage collector.  (The page through its
    view: the test client keeps every page's context.)"""
    import gc
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    from benchdb.results.models import Result
    from benchdb.web import views

    def results_alive() -> int:
        return sum(type(o) is Result for o in gc.get_objects())

    guest = shapes["guest"]

    def page():
        # What the middleware gives a page: a user and a session.
        request = RequestFactory().get(guest.get_absolute_url())
        request.user = AnonymousUser()
        request.session = import_module(settings.SESSION_ENGINE).SessionStore()
        return views.run_detail.__wrapped__(request, guest.pk)  # written, not kept

    def detail():
        return api.get(f"/api/v1/runs/{guest.pk}/")

    # What each answer leaves for the collector: nothing for the detail; the
    # page's rows (Django's template Context holds its values in a cycle),
    # not its baseline's results nor the run's.
    guest_results = guest.results.count()
    for get, leftover in ((detail, 0), (page, guest_results)):
        assert get().status_code == 200  # warm: nothing left from before
        gc.collect()
        gc.disable()
        try:
            before = results_alive()
            assert get().status_code == 200
            assert results_alive() - before == leftover, get
            before = results_alive()
            with mock.patch("benchdb.results.reads.release"):
                assert get().status_code == 200
            assert results_alive() - before > leftover, get
        finally:
            gc.enable()
            gc.collect()


def test_api_answers_are_freed_with_their_response(shapes, settings):
    """api.middleware.free_answers: DRF's response and view reference each
    other; once rendered, the answer's data no longer waits for the garbage
    collector (through Django's WSGI handler, as gunicorn calls it: the test
    client keeps responses in cycles of its own)."""
    import gc
    import io

    from django.core.handlers.wsgi import WSGIHandler
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    guest, host = shapes["guest"], shapes["host"]
    urls = (f"/api/v1/runs/{guest.pk}/", f"/api/v1/compare/?runs={guest.pk},{host.pk}")

    def cyclic_garbage(handler, url: str) -> int:
        path, _, query = url.partition("?")
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "testserver",
            "SERVER_PORT": "80",
            "HTTP_HOST": "testserver",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.input": io.BytesIO(b""),
            "wsgi.url_scheme": "http",
        }
        statuses = []
        b"".join(handler(environ, lambda status, headers: statuses.append(status)))
        assert statuses == ["200 OK"], url
        return gc.collect()

    def per_request(middleware: list) -> list[int]:
        settings.MIDDLEWARE = middleware
        handler = WSGIHandler()
        for url in urls:
            cyclic_garbage(handler, url)  # warm
        gc.collect()
        gc.disable()
        try:
            return [cyclic_garbage(handler, url) for url in urls]
        finally:
            gc.enable()

    # A comparison computed each time: a kept one (compare._MEMO) is meant
    # to outlive its response.
    settings.BENCHDB_COMPARISON_MEMO = 0
    middleware = list(settings.MIDDLEWARE)
    ours = "benchdb.api.middleware.free_answers"
    assert ours in middleware
    # As the test client does: the test's connection stays open.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        freed = per_request(middleware)
        kept = per_request([m for m in middleware if m != ours])
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    for with_it, without in zip(freed, kept, strict=True):
        assert without - with_it >= 40, (freed, kept)  # the answer's dicts


def test_similar_reads_its_result_with_the_run(api, shapes):
    """similar.similar_result: the run's result read with the run gives the
    answer similar_systems gives reading it itself, no such test included;
    and the API's errors keep their order (404 before 400)."""
    from benchdb.results import reads, similar

    seen = 0
    for run in shapes.values():
        for test_id in (READ, "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync", "x"):
            for metric in ("iops", "lat_mean_ns", "bw_bytes"):
                annotated = Run.objects.annotate(
                    **similar.similar_result(test_id, metric)
                ).get(pk=run.pk)
                outcomes = []
                for one in (Run.objects.get(pk=run.pk), annotated):
                    try:
                        outcomes.append(reads.similar(one, test_id, metric, None))
                    except LookupError as exc:
                        outcomes.append(str(exc))
                assert outcomes[0] == outcomes[1], (run, test_id, metric)
                seen += isinstance(outcomes[0], dict)
    assert seen >= 8
    guest = shapes["guest"].pk
    assert api.get(f"/api/v1/runs/{guest}/similar/?test_id=x").status_code == 404
    bad = api.get(f"/api/v1/runs/{guest}/similar/?test_id={READ}&metric=nope")
    assert bad.status_code == 400 and bad.json()["errors"][0]["pointer"] == "/metric"
    assert api.get("/api/v1/runs/999999/similar/?metric=nope").status_code == 404


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-25T09:41:43.123456+00:00",
        "2026-11-25T09:41:43+00:00",
        "1999-12-31T23:59:59.000001+00:00",
        "2026-03-29T01:30:00+02:00",
    ],
)
def test_datetimes_are_written_as_drfs(value):
    """Datetimes are written as DRF's field writes them, in UTC with ``Z``,
    whatever their time zone."""
    import datetime
    import zoneinfo

    from rest_framework import serializers

    parsed = datetime.datetime.fromisoformat(value)
    drf = serializers.DateTimeField()
    for dt in (
        parsed,
        parsed.astimezone(datetime.UTC),
        parsed.astimezone(zoneinfo.ZoneInfo("UTC")),
        parsed.astimezone(zoneinfo.ZoneInfo("Europe/Paris")),
    ):
        assert rows.iso_datetime(dt) == drf.to_representation(dt)
    assert rows.iso_datetime(parsed.astimezone(datetime.UTC)).endswith("Z")
    assert rows.iso_datetime(None) is None


@pytest.mark.parametrize(
    "bad",
    [
        "cache_mode=turbo",
        "created_after=nope",
        "hardware=x",
        "visibility=nope&has_baseline=maybe",
        "cache_mode=none&ran_at_before=2024-13-01T00:00:00Z&suspect=perhaps",
    ],
)
def test_population_answers_refuse_bad_filters_as_filter_runs_does(api, bad):
    """The population views check run filters without filtering
    (``views.checked_filters``, the filter set's form): the 400 says what
    ``population.filter_runs`` says of them, under the parameter that held
    them."""
    from django.http import QueryDict

    from benchdb.results import population

    with pytest.raises(ValueError) as refused:
        population.filter_runs(QueryDict(bad))
    answer = api.get(
        "/api/v1/population/compare/",
        {"test_id": READ, "a": "cache_mode=none", "b": bad},
    )
    assert answer.status_code == 400
    assert str(refused.value) in str(answer.json()["errors"])
    assert "b" in str(answer.json()["errors"])
    answer = api.get(f"/api/v1/population/?test_id={READ}&{bad}")
    assert answer.status_code == 400 and str(refused.value) in str(answer.json())


def test_kept_serializers_answer_as_new_ones(api, shapes):
    """``serializers.represent`` / ``validated`` (one serializer instance
    kept per class) give what a new serializer's ``data`` / ``is_valid``
    give, errors included, call after call."""
    from rest_framework import exceptions

    from benchdb.api import population as views
    from benchdb.api import serializers as s

    answer = api.get(
        "/api/v1/population/compare/",
        {"test_id": READ, "a": "cache_mode=none", "b": "cache_mode=writeback"},
    ).json()
    for _ in range(2):
        kept = s.represent(views.PopulationCompareSerializer, answer)
        assert kept == views.PopulationCompareSerializer(answer).data == answer
    for query in ({"test_id": READ}, {"metric": "nope"}, {"test_id": "x" * 101}):
        fresh = views.PopulationCompareQuerySerializer(data=query)
        if fresh.is_valid():
            assert s.validated(views.PopulationCompareQuerySerializer, query) == (
                fresh.validated_data
            )
            continue
        with pytest.raises(exceptions.ValidationError) as refused:
            s.validated(views.PopulationCompareQuerySerializer, query)
        assert refused.value.detail == fresh.errors


def test_the_run_to_rank_compiled_once_is_the_query_sets(api, shapes):
    """views.RUN_TO_RANK (similar_runs' SQL compiled once per metric) reads
    what the query set reads, for every run (hidden and private ones none),
    test and metric; run_to_rank is the run the query set gives; and the
    anonymous similar answer keeps its 404 / 410 / 400."""
    from benchdb.api import views

    Run.objects.filter(pk=shapes["owned"].pk).update(visibility=Visibility.PRIVATE)
    fields = (*views._RANKED, "hardware__disk_type", *views._RESULT)
    seen = 0
    for run in Run.objects.all():
        for test_id in (READ, "fio-rand-write-4k-q1t1", "x"):
            for metric in ("iops", "lat_mean_ns", "bw_bytes"):
                qs = views.similar_runs(None, "", (test_id, metric))
                want = list(qs.filter(pk=run.pk).order_by().values_list(*fields))
                got = views.RUN_TO_RANK.rows(metric, pk=run.pk, test_id=test_id)
                assert got == want
                if not got:
                    continue
                seen += 1
                ranked, loaded = views.run_to_rank(got[0]), qs.get(pk=run.pk)
                for name in (*views._RANKED, *views._RESULT):
                    assert getattr(ranked, name) == getattr(loaded, name)
                assert ranked.hardware_id == loaded.hardware_id
                if loaded.hardware_id is not None:
                    assert ranked.hardware.disk_type == loaded.hardware.disk_type
                else:
                    assert ranked.hardware is None
    assert seen >= 9
    assert set(views.RUN_TO_RANK._sql) == {"iops", "lat_mean_ns", "bw_bytes"}
    assert all(views.RUN_TO_RANK._sql.values())  # compiled, not given up on
    hidden = Run.objects.get(hidden=True).pk
    for pk, status in (
        (hidden, 410),
        (shapes["owned"].pk, 404),
        ("abc", 404),
        ("99999999999999999999", 404),
        (shapes["guest"].pk, 200),
    ):
        answer = api.get(f"/api/v1/runs/{pk}/similar/?test_id={READ}")
        assert answer.status_code == status, (pk, answer.content)
    bad = api.get(f"/api/v1/runs/{shapes['guest'].pk}/similar/?metric=nope")
    assert bad.status_code == 400


def test_the_hardware_filter_set_is_what_filterset_fields_made(api, shapes):
    """filters.HardwareFilterSet, made once, has the filters DRF's backend
    made of ``filterset_fields`` on every request, and answers as they did."""
    from django_filters.rest_framework import DjangoFilterBackend

    from benchdb.results.filters import HardwareFilterSet

    class Auto:
        filterset_fields = ["disk_type", "raid_level"]

    auto = DjangoFilterBackend().get_filterset_class(Auto(), Hardware.objects.all())
    assert list(auto.base_filters) == list(HardwareFilterSet.base_filters)
    for name, made in auto.base_filters.items():
        ours = HardwareFilterSet.base_filters[name]
        assert type(ours) is type(made) and ours.lookup_expr == made.lookup_expr
        assert ours.extra == made.extra and ours.field_name == made.field_name
    assert api.get("/api/v1/hardware/?disk_type=bogus").status_code == 400
    listed = api.get("/api/v1/hardware/?disk_type=nvme-ssd")
    assert listed.status_code == 200 and listed.json()["results"]
    assert {h["disk_type"] for h in listed.json()["results"]} == {"nvme-ssd"}


def test_the_compiled_run_list_is_the_query_sets_answer(api, alice, shapes, settings):
    """An anonymous reader's run list is sent as SQL compiled once per shape
    of its filters (``views.compiled_run_list``): byte for byte the answer
    and the number of queries of the filter set's query sets, for every
    shape, page, cap and error; shapes with a LIKE, a date or a number are
    left to the query sets."""
    from benchdb.api import views

    host, owned = shapes["host"], shapes["owned"]
    urls = [
        "/api/v1/runs/",
        "/api/v1/runs/?cache_mode=none&disk_type=nvme-ssd",
        "/api/v1/runs/?cache_mode=writeback&cache_mode=none&cache_mode=none",
        "/api/v1/runs/?platform=proxmox&platform=kvm&suspect=false",
        "/api/v1/runs/?has_baseline=true&iothread=true",
        "/api/v1/runs/?has_baseline=false&ordering=-title",
        f"/api/v1/runs/?test_id={READ}&role=guest&ordering=disk_type",
        f"/api/v1/runs/?pair_id={host.pair_id}&suite_version={host.suite_version}",
        "/api/v1/runs/?page_size=2&page=2",
        "/api/v1/runs/?page_size=2&page=last",
        "/api/v1/runs/?page_size=2&page=99",
        "/api/v1/runs/?page_size=1&page=1&disk_type=hdd",
        "/api/v1/runs/?suspect=true&mine=false",
        "/api/v1/runs/?q=Owned",
        "/api/v1/runs/?kernel=a&guest_os=b",
        "/api/v1/runs/?created_after=2020-01-01T00:00:00Z",
        f"/api/v1/runs/?hardware={owned.hardware_id}",
        "/api/v1/runs/?cache_mode=bogus",
        "/api/v1/runs/?ordering=nope",
        "/api/v1/runs/?page=0",
    ]

    def answer(url: str) -> tuple:
        with CaptureQueriesContext(connection) as queries:
            response = api.get(url)
        return response.status_code, response.content, len(queries)

    views._LIST_SQL.clear()
    for cap in (1000, 2):
        settings.BENCHDB_COUNT_CAP = cap
        for url in urls:
            fast = answer(url)
            with mock.patch.object(views.RunViewSet, "compiled_run_list") as off:
                off.return_value = None
                slow = answer(url)
            assert fast == slow, url
    kept = [v for v in views._LIST_SQL.values() if v is not None]
    assert len(kept) >= 10  # every text, list and boolean shape, at each cap
    assert any(v is None for v in views._LIST_SQL.values())  # q, kernel: LIKE
    # A signed-in reader or an owner key never takes the compiled path.
    request = mock.Mock(query_params={}, user=alice)
    view = views.RunViewSet(request=request)
    assert view.compiled_run_list() is None
