"""Stored across-runs answers (results/answer_cache.py, results/refresh.py).

- A stored answer is exactly what the live function gives on the same data:
  every stored function, on a generated community large enough for both of
  ``population._spread``'s paths (bootstrap, and order statistics beyond
  ``stats.BOOTSTRAP_MAX_VALUES`` runs).
- Every write function bumps the data version once (``refresh.announce``):
  ingest, hide/unhide, visibility, claim, delete, retag/edit; those that may
  take a run out of a population also mark a removal, after which no answer
  stored before is served.  A write outside them (raw SQL) is caught by the
  plain trigger of migration 0018: answers are then served as not current.
- A hidden or private run never appears in a served answer once its change
  is committed; a new run appears after the worker's refresh, and the answer
  says how fresh it is meanwhile.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from django.db import connection

from benchdb.results import aggregates, answer_cache, answers, refresh, stats
from benchdb.results.models import Hardware, Result, Run

TESTS = ("fio-rand-read-4k-q1t1", "fio-seq-read-1m-q8t1")
KEY = "benchdb-standard/1|{}|test"
MODES = ("none", "writeback", "writethrough", "directsync", "unsafe")
DISKS = ("sata-ssd", "nvme-ssd", "hdd")
STORAGE = ("zfs", "lvm", "file")
PLATFORMS = ("proxmox", "libvirt")


def generate(systems: int = 250, seed: int = 3) -> None:
    """``systems`` hosts, each with a guest per cache mode (some hidden,
    private, suspect or unpaired), every run with both tests: well over
    ``BOOTSTRAP_MAX_VALUES`` runs of each test."""
    rng = np.random.default_rng(seed)
    hardware = Hardware.objects.bulk_create(
        Hardware(fingerprint=f"gen-{i}", disk_type=DISKS[i % 3])
        for i in range(systems // 2)
    )
    hosts = Run.objects.bulk_create(
        Run(
            suite_id="benchdb-standard",
            suite_version="1",
            role="host",
            platform=PLATFORMS[i % 2],
            hardware=hardware[i % len(hardware)] if i % 17 else None,
            suspect=i % 23 == 0,
        )
        for i in range(systems)
    )
    guests = []
    for i, host in enumerate(hosts):
        for j, mode in enumerate(MODES):
            guests.append(
                Run(
                    suite_id="benchdb-standard",
                    suite_version="1",
                    role="guest",
                    cache_mode=mode,
                    platform=host.platform,
                    storage_backend=STORAGE[(i + j) % 3],
                    hardware=host.hardware,
                    baseline=host if (i + j) % 7 else None,
                    visibility="private" if (i + j) % 31 == 0 else "public",
                    hidden=(i + j) % 37 == 0,
                    hidden_reason="gen" if (i + j) % 37 == 0 else "",
                    suspect=(i + j) % 29 == 0,
                )
            )
    guests = Run.objects.bulk_create(guests)
    results = []
    for run in [*hosts, *guests]:
        speed = rng.lognormal(np.log(5000), 0.5)
        for t in TESTS:
            results.append(result(run, t, *(speed * rng.lognormal(0, 0.1, size=3))))
    Result.objects.bulk_create(results)
    with connection.cursor() as cursor:
        # As autovacuum would: without statistics the planner takes these
        # thousands of fresh rows for a handful and nests loops of scans.
        cursor.execute("ANALYZE results_run, results_result, results_hardware")


def result(run: Run, test: str, iops: float, bw: float, lat: float) -> Result:
    """A result of ``test``: ``iops``, and bandwidth and latency of the
    speeds ``bw`` and ``lat`` (in IOPS)."""
    return Result(
        run=run,
        test_id=test,
        tool="fio",
        title=test,
        comparability_key=KEY.format(test),
        iops_mean=iops,
        bw_bytes_mean=bw * 4096,
        lat_mean_ns_mean=1e9 / lat,
        repeat_count=3,
    )


def same(a, b) -> bool:
    """Exact equality (floats bit for bit, NaN equal to NaN); tuples and
    lists, NumPy and Python scalars alike."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "item"):
        a = a.item()
    if hasattr(b, "item"):
        b = b.item()
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def stored_calls() -> list[tuple]:
    """(stored function, args) over every kind of stored answer."""
    cache_w = answers.workloads.live("cache")[0]
    over_w = answers.workloads.live("overhead")[0]
    t0, t1 = TESTS
    calls = [
        (answers.workloads, ("cache",)),
        (answers.workloads, ("overhead",)),
        (answers.listed_facet_counts, ()),
        (answers.cache_mode_answers, ({}, cache_w)),
        (answers.cache_mode_answers, ({"disk_type": "nvme-ssd"}, cache_w)),
        (answers.cache_mode_ranking, ({}, cache_w)),
        (
            answers.rank_settings,
            (
                [["role", ["guest"]]],
                "cache_mode",
                ["none", "writeback"],
                t0,
                "iops",
                None,
            ),
        ),
        (answers.overhead_answer, ({}, over_w)),
        (answers.overhead_answer, ({"storage_backend": "zfs"}, over_w)),
        (answers.overhead_by, ("storage_backend", {}, over_w)),
        (answers.overhead_summary, ()),
        (answers.cache_mode_group_page, (1,)),
        (answers.cache_mode_group_page, (2,)),
        (answers.similar_population, (KEY.format(t0), "iops", "hdd", [])),
        (answers.similar_population, (KEY.format(t1), "bw_bytes", None, [])),
        (
            answers.similar_population,
            (KEY.format(t0), "lat_mean_ns", "sata-ssd", [["cache_mode", "none"]]),
        ),
        # Hundreds of runs: its points are order statistics, not every figure.
        (answers.similar_points, (KEY.format(t0), "iops", "hdd", [])),
        (answers.similar_points, (KEY.format(t1), "bw_bytes", None, [])),
        (answers.distribution, ([], t0, "iops", None)),
        (
            answers.distribution,
            ([["role", ["guest"]], ["disk_type", ["hdd"]]], t1, "bw_bytes", None),
        ),
        (
            answers.compare_sets,
            (
                [["cache_mode", ["none"]], ["role", ["guest"]]],
                [["cache_mode", ["writeback"]], ["role", ["guest"]]],
                t0,
                "iops",
                None,
                "figure",
            ),
        ),
        (
            answers.compare_sets,
            (
                [["storage_backend", ["zfs"]]],
                [["storage_backend", ["lvm"]]],
                t1,
                "iops",
                None,
                "overhead",
            ),
        ),
    ]
    for group_by in (None, *aggregates.GROUP_BY):
        calls.append((answers.aggregates, ([], t0, "iops", group_by, None)))
    calls.append(
        (
            answers.aggregates,
            (
                [["suspect", ["true"]], ["platform", ["proxmox"]]],
                t1,
                "bw_bytes",
                None,
                None,
            ),
        )
    )
    return calls


@pytest.mark.django_db
def test_every_stored_answer_is_exactly_the_live_one():
    generate()
    n = population_size()
    assert n > stats.BOOTSTRAP_MAX_VALUES  # both paths of _spread
    for fn, args in stored_calls():
        live = fn.live(*args)
        served, fresh = fn.with_freshness(*args)  # computed and stored
        again, fresh_again = fn.with_freshness(*args)  # read back
        assert same(served, live), fn.key
        assert same(again, live), fn.key
        assert fresh_again.current and fresh_again.version == fresh.version
        assert fresh.runs == Run.objects.listed().count()
    # And the refresh stores the same: recompute all, compare again.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE results_answersummary SET version = 0")
    distinct = {(fn.key, repr(args)) for fn, args in stored_calls()}
    assert refresh.refresh()["answers"] >= len(distinct)
    for fn, args in stored_calls():
        assert same(fn(*args), fn.live(*args)), fn.key


def population_size() -> int:
    return Result.objects.filter(
        test_id=TESTS[0], run__in=aggregates.comparable_runs()
    ).count()


def version() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version, removed FROM results_dataversion WHERE id = 1")
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_every_write_that_changes_an_answer_bumps_the_version(django_user_model):
    """Committed writes, as in production."""
    from benchdb.results.ingest import retag, store_bundle
    from benchdb.results.owning import delete_run, edit_run

    generate(systems=10)
    bundle = _bundle()
    v0, r0 = version()
    run = store_bundle(bundle, owner_key_hash="")  # ingest
    v1, r1 = version()
    assert v1 > v0
    assert r1 == r0, "a new run takes nothing out"

    def bumped(action, removal: bool):
        before, removed_before = version()
        action()
        after, removed = version()
        what = action.__name__ if hasattr(action, "__name__") else action
        assert after > before, what
        if removal:
            assert before < removed <= after, what
        else:
            assert removed == removed_before, what

    guest = Run.objects.filter(role="guest", visibility="public", hidden=False)
    target = guest.exclude(pk=run.pk).order_by("id").first()
    bumped(lambda: Run.objects.get(pk=target.pk).moderate("hide", "spam"), True)
    bumped(lambda: Run.objects.get(pk=target.pk).moderate("unhide"), False)
    bumped(lambda: Run.objects.get(pk=target.pk).moderate("flag", "odd"), True)
    # Unflagging takes the run out of the answers over suspect runs
    # (aggregates with ?suspect=true).
    bumped(lambda: Run.objects.get(pk=target.pk).moderate("unflag"), True)

    def private():
        edit_run(Run.objects.get(pk=target.pk), {"visibility": "private"})

    bumped(private, True)

    def public():
        edit_run(Run.objects.get(pk=target.pk), {"visibility": "public"})

    bumped(public, False)
    user = django_user_model.objects.create_user("claimer", password="x" * 12)
    bumped(lambda: Run.objects.get(pk=target.pk).claim(user), False)
    bumped(lambda: retag(Run.objects.get(pk=target.pk), {"cache_mode": "unsafe"}), True)

    def patch():
        # Free-text search (?q=) can match it now, or no longer.
        edit_run(Run.objects.get(pk=target.pk), {"title": "renamed"})

    bumped(patch, True)
    bumped(lambda: delete_run(Run.objects.get(pk=target.pk)), True)

    # A write outside the write functions (migration 0018's trigger): the
    # version only, once at its commit.
    before, removed_before = version()
    Run.objects.filter(pk=run.pk).update(title="raw")
    assert version() == (before + 1, removed_before)


def _bundle() -> dict:
    """A real standard bundle, if the bench seeds are there; else a tiny one
    made by the test factories with real fio."""
    import copy
    import json
    import uuid
    from pathlib import Path

    seed = Path(__file__).resolve().parents[2] / "var/bench/seeds/standard-guest.json"
    if seed.exists():
        bundle = json.loads(seed.read_text())
    else:
        import tempfile

        from tests.api.factories import FioRuns, make_bundle

        bundle = make_bundle(FioRuns(Path(tempfile.mkdtemp())), tests=[TESTS[0]])
    bundle = copy.deepcopy(bundle)
    bundle["bundle_id"] = str(uuid.uuid4())
    return bundle


def counted_guest(test_id: str) -> Run:
    """A guest that counts in the overhead answers of ``test_id``: listed,
    not suspect, paired with a listed host that is not suspect."""
    return (
        Run.objects.listed()
        .filter(role="guest", suspect=False, baseline__isnull=False)
        .filter(baseline__in=Run.objects.listed().filter(suspect=False))
        .filter(results__test_id=test_id)
        .order_by("id")
        .first()
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["hide", "private", "delete"])
def test_a_removed_run_never_appears_once_committed(how):
    generate(systems=12)
    # Live, not stored: a refresh queued by an earlier test may run in the
    # suite's worker while generate() writes, and store answers of a part of
    # the data, which are then served as stale (as they should be) here.
    w = answers.workloads.live("overhead")[0]
    before = answers.overhead_answer.live({}, w)
    guest = counted_guest(w["test_id"])
    from benchdb.results.owning import delete_run, edit_run

    run = Run.objects.get(pk=guest.pk)
    if how == "hide":
        run.moderate("hide", "test")
    elif how == "private":
        edit_run(run, {"visibility": "private"})
    else:
        delete_run(run)
    served, fresh = answers.overhead_answer.with_freshness({}, w)
    live = answers.overhead_answer.live({}, w)
    assert same(served, live)
    assert served["runs"] == before["runs"] - 1
    assert fresh.current


@pytest.mark.django_db(transaction=True)
def test_a_new_run_is_added_by_the_refresh_and_the_answer_says_so_meanwhile():
    generate(systems=12)
    args = ([["role", ["guest"]]], TESTS[0], "iops", None)
    first, fresh = answers.distribution.with_freshness(*args)
    host = Run.objects.listed().filter(role="host", suspect=False).first()
    new = Run.objects.create(
        suite_id="benchdb-standard", suite_version="1", role="guest", baseline=host
    )
    Result.objects.create(
        run=new,
        test_id=TESTS[0],
        tool="fio",
        comparability_key=KEY.format(TESTS[0]),
        iops_mean=1234.5,
        repeat_count=3,
    )
    stale, stale_fresh = answers.distribution.with_freshness(*args)
    assert same(stale, first)
    assert not stale_fresh.current and stale_fresh.as_of == fresh.as_of
    refresh.refresh()
    after, after_fresh = answers.distribution.with_freshness(*args)
    assert after_fresh.current and after_fresh.runs == fresh.runs + 1
    assert after["results"]["runs"] == first["results"]["runs"] + 1
    assert same(after, answers.distribution.live(*args))


@pytest.mark.django_db(transaction=True)
def test_uploads_queue_one_refresh_until_it_starts():
    with mock.patch.object(refresh.refresh_summaries, "apply_async") as send:
        assert refresh.schedule() is True
        assert refresh.schedule() is False
        assert refresh.schedule() is False
        assert send.call_count == 1
        refresh.refresh()  # starts: the next upload queues another
        assert refresh.schedule() is True
        assert send.call_count == 2


@pytest.mark.django_db(transaction=True)
def test_a_queued_refresh_already_covered_does_nothing():
    """A scheduled refresh whose mark another refresh cleared (or whose
    tables were emptied since, as between two tests) stores nothing."""
    generate(systems=12)
    with mock.patch.object(refresh.refresh_summaries, "apply_async") as send:
        assert refresh.schedule() is True
    assert send.call_args.kwargs["kwargs"] == {"scheduled": True}
    refresh.refresh()  # beat's, say: clears the mark
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM results_answersummary")
    assert refresh.refresh_summaries(scheduled=True) is None
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM results_answersummary")
        assert cursor.fetchone()[0] == 0
    # While its mark stands it refreshes; beat's always does.
    with mock.patch.object(refresh.refresh_summaries, "apply_async"):
        assert refresh.schedule() is True
    assert refresh.refresh_summaries(scheduled=True)["answers"] > 0
    assert refresh.refresh_summaries()["answers"] >= 0


@pytest.mark.django_db
def test_api_answers_say_how_fresh_they_are(client):
    generate(systems=12)
    test = TESTS[0]
    run = Run.objects.listed().filter(role="guest", suspect=False).first()
    urls = [
        f"/api/v1/aggregates/?test_id={test}&group_by=cache_mode",
        f"/api/v1/runs/{run.pk}/similar/?test_id={test}",
        f"/api/v1/population/?test_id={test}&role=guest",
        f"/api/v1/population/compare/?test_id={test}&a=cache_mode%3Dnone"
        "&b=cache_mode%3Dwriteback",
    ]
    listed = Run.objects.listed().count()
    for url in urls:
        body = client.get(url).json()
        assert body["freshness"]["runs"] == listed, url
        assert body["freshness"]["current"] is True, url
        assert body["freshness"]["as_of"], url
    # The aggregates' answer is the live one, filters and all.
    body = client.get(urls[0]).json()
    live = aggregates.filtered(
        answer_cache.query_dict([]), test, "iops", "cache_mode", None
    )
    assert body["overall"]["median"] == live["overall"]["median"]
    assert [g["value"] for g in body["groups"]] == [g["value"] for g in live["groups"]]


@pytest.mark.django_db
def test_a_comparison_shows_each_sides_distribution_exactly():
    """compare_sets computes only the side shown (figures or overheads):
    the same figures ``distribution`` gives for each side."""
    from benchdb.results import population

    generate(systems=40)
    runs_a = population.filter_runs({"cache_mode": "none", "role": "guest"})
    runs_b = population.filter_runs({"cache_mode": "writeback", "role": "guest"})
    for of, part in (("figure", "results"), ("overhead", "overhead")):
        out = population.compare_sets(runs_a, runs_b, TESTS[0], "iops", of=of)
        key = out["comparability_key"]
        for side, runs in (("a", runs_a), ("b", runs_b)):
            whole = population.distribution(runs, TESTS[0], "iops", key)
            assert same(out[side], whole[part]), (of, side)
            assert same(
                population.figure_spread(runs, TESTS[0], "iops", key),
                whole["results"],
            )


def _menu(page) -> dict:
    """Browse's facet menu: facet -> value -> count."""
    return {
        f["name"]: {o["value"]: o["n"] for o in f["options"]}
        for f in page.context["facets"]
    }


@pytest.mark.django_db(transaction=True)
def test_browse_before_any_filter_shows_stored_counts_and_every_run(client):
    """/runs/ with nothing chosen: its facet counts are the stored ones (a
    hidden run leaves them at once; an upload is counted by the refresh, and
    the page says so meanwhile), its list and total every listed run."""
    generate(systems=12)
    listed = Run.objects.listed()
    page = client.get("/runs/")
    counts = {
        f["name"]: {o["value"]: o["n"] for o in f["options"]}
        for f in page.context["facets"]
    }
    assert sum(counts["cache_mode"].values()) == listed.count()
    assert page.context["page"].paginator.count == listed.count()
    assert page.context["freshness"]["current"]
    # One facet chosen alone: its counts are the stored ones (over every
    # listed run), with their freshness; with another filter, all are live
    # and no freshness is said.
    assert client.get("/runs/?cache_mode=none").context["freshness"]["current"]
    filtered = client.get("/runs/?cache_mode=none&role=guest")
    assert filtered.context["freshness"] is None
    # Hidden: gone from the counts as soon as it is committed.
    run = listed.filter(cache_mode="none").order_by("id").first()
    Run.objects.get(pk=run.pk).moderate("hide", "test")
    page = client.get("/runs/")
    by_mode = _menu(page)["cache_mode"]
    assert by_mode["none"] == counts["cache_mode"]["none"] - 1
    assert page.context["page"].paginator.count == listed.count()
    # Uploaded: listed and counted at once.  The stored counts are older than
    # the upload, so until the refresh the menu is counted live (it always
    # equals the list) and says no freshness.
    new = Run.objects.create(
        suite_id="benchdb-standard", suite_version="1", role="guest", cache_mode="none"
    )
    page = client.get("/runs/")
    assert page.context["page"].paginator.count == listed.count()
    assert new.pk in [r.pk for r in page.context["page"]]
    assert page.context["freshness"] is None
    assert _menu(page)["cache_mode"]["none"] == counts["cache_mode"]["none"]
    refresh.refresh()
    page = client.get("/runs/")
    by_mode = _menu(page)["cache_mode"]
    assert by_mode["none"] == counts["cache_mode"]["none"]
    assert page.context["freshness"]["current"]


@pytest.mark.django_db(transaction=True)
def test_after_a_removal_one_reader_computes_and_the_others_wait_for_it():
    """No stampede: readers who find no servable answer (after a removal,
    or none stored yet) compute it one at a time; those who waited read what
    the first stored (``answer_cache.fetch_or_compute``)."""
    import threading
    import time

    from django.db import connections

    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.5)
        return {"runs": len(calls)}

    refresh.announce(removal=True)
    got, errors = [], []

    def reader():
        try:
            got.append(answer_cache.fetch_or_compute("stampede-test", slow, ())[0])
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(calls) == 1
    assert got == [{"runs": 1}] * 4


@pytest.mark.django_db(transaction=True)
def test_browse_before_any_filter_counts_no_runs_on_the_request(client):
    """/runs/ with nothing chosen reads its total from the facets' counts
    (stored, current), not a count of every listed run on each request."""
    from django.test.utils import CaptureQueriesContext

    generate(systems=12)
    refresh.refresh()
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/runs/")
    assert page.context["page"].paginator.count == Run.objects.listed().count()
    counts = [
        q["sql"]
        for q in queries.captured_queries
        if "COUNT(*)" in q["sql"].upper() and "results_answersummary" not in q["sql"]
    ]
    assert counts == []
