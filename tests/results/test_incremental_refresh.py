"""The refresh costs what changed (results/changes.py, answer_cache.restamp).

After a change the refresh recomputes only the stored answers the changed
runs can reach (an answer over a setup or run filters that none of them, nor
a guest paired with them, matches is stamped current as it is); what it
serves then is exactly what a full recompute gives, after any sequence of
uploads, hides, unhides, flags, edits and deletes.  Committed writes, as in
production (``transaction=True``).
"""

from __future__ import annotations

import json
import random
from unittest import mock

import pytest
from django.db import connection, transaction

from benchdb.results import answer_cache, answers, refresh
from benchdb.results.models import Hardware, Result, Run
from tests.results.test_answer_store import KEY, TESTS, generate, result, same

SETUPS = ({}, {"disk_type": "hdd"}, {"disk_type": "nvme-ssd"}, {"platform": "libvirt"})


@pytest.fixture(autouse=True)
def no_worker_refresh():
    """The refreshes here are the test's own: none is queued for a worker
    (the suite's worker would run it a few seconds after a write)."""
    with mock.patch.object(refresh.refresh_summaries, "apply_async"):
        yield


def stored_calls() -> list[tuple]:
    """(answer, args): the answers that say what reaches them, over several
    setups and filters."""
    cache_w = answers.workloads.live("cache")[0]
    over_w = answers.workloads.live("overhead")[0]
    calls = []
    for setup in SETUPS:
        items = [[k, [v]] for k, v in setup.items()]
        calls += [
            (answers.cache_mode_answers, (setup, cache_w)),
            (answers.cache_mode_ranking, (setup, cache_w)),
            (answers.overhead_answer, (setup, over_w)),
            (answers.overhead_by, ("storage_backend", setup, over_w)),
            (answers.distribution, (items, TESTS[0], "iops", None)),
            (answers.aggregates, (items, TESTS[1], "bw_bytes", "cache_mode", None)),
            (
                answers.rank_settings,
                (items, "cache_mode", ["none", "writeback"], TESTS[0], "iops", None),
            ),
            (
                answers.compare_sets,
                (
                    [*items, ["cache_mode", ["none"]]],
                    [*items, ["cache_mode", ["writeback"]]],
                    TESTS[0],
                    "iops",
                    None,
                    "figure",
                ),
            ),
        ]
    # Over a run's state: reached by any change.
    for state in (["suspect", ["true"]], ["has_baseline", ["false"]]):
        calls.append((answers.aggregates, ([state], TESTS[0], "iops", None, None)))
    for disk_type in (None, "hdd", "nvme-ssd"):
        key = KEY.format(TESTS[0])
        calls.append((answers.similar_population, (key, "iops", disk_type, [])))
        calls.append((answers.similar_points, (key, "iops", disk_type, [])))
    return calls


def store_all() -> list[tuple]:
    calls = stored_calls()
    for fn, args in calls:
        fn.with_freshness(*args)
    refresh.refresh(full=True)
    return calls


def upload(disk_type: str, mode: str = "writeback") -> Run:
    """A guest on a host of that disk type with both tests, written and
    announced as ``ingest.store_bundle`` does."""
    hardware = Hardware.objects.filter(disk_type=disk_type).order_by("id").first()
    host = Run.objects.listed().filter(role="host", hardware=hardware).first()
    with transaction.atomic():
        run = Run.objects.create(
            suite_id="benchdb-standard",
            suite_version="1",
            role="guest",
            platform=host.platform,
            cache_mode=mode,
            storage_backend="zfs",
            hardware=hardware,
            baseline=host,
        )
        Result.objects.bulk_create(
            result(run, t, 4321.0 + i, 4321.0, 4321.0) for i, t in enumerate(TESTS)
        )
        refresh.announce(removal=False, run=run.pk)
    return run


def recomputed(out: dict) -> set[tuple[str, str]]:
    return set(out["recomputed"])


def key_of(fn, args) -> tuple[str, str]:
    return fn.key, answer_cache.encode(list(args))


def assert_all_current_and_exact(calls) -> None:
    for fn, args in calls:
        served, fresh = fn.with_freshness(*args)
        assert fresh is not None and fresh.current, (fn.key, args)
        assert same(served, json.loads(answer_cache.encode(fn.live(*args)))), (
            fn.key,
            args,
        )


@pytest.mark.django_db(transaction=True)
def test_an_upload_recomputes_only_the_answers_it_reaches():
    generate(systems=12)
    calls = store_all()
    upload("nvme-ssd")
    out = refresh.refresh()
    done = recomputed(out)
    hdd = {key_of(fn, args) for fn, args in calls if "hdd" in json.dumps(args)}
    nvme = {key_of(fn, args) for fn, args in calls if "nvme-ssd" in json.dumps(args)}
    assert hdd and nvme
    # Nothing over hdd runs was computed again; everything over nvme was.
    assert not done & hdd
    assert nvme <= done
    assert out["restamped"] >= len(hdd)
    assert_all_current_and_exact(calls)


@pytest.mark.django_db(transaction=True)
def test_a_write_outside_the_write_functions_is_recomputed_in_full():
    """The backstop trigger logs a change that names no run: every stale
    answer is computed again, none stamped."""
    generate(systems=12)
    calls = store_all()
    hdd = Run.objects.listed().filter(role="guest", hardware__disk_type="hdd").first()
    Result.objects.filter(run=hdd).update(iops_mean=1.0, bw_bytes_mean=1.0)
    out = refresh.refresh()
    assert out["restamped"] == 0
    assert {key_of(fn, args) for fn, args in calls} <= recomputed(out)
    assert_all_current_and_exact(calls)


@pytest.mark.django_db(transaction=True)
def test_incremental_refreshes_equal_a_full_recompute_after_any_changes():
    from benchdb.results.owning import delete_run, edit_run

    generate(systems=12)
    calls = store_all()
    rng = random.Random(35)
    restamped = 0
    kinds = ("upload", "hide", "flag", "unhide", "private", "unflag", "retag")
    for step in range(len(kinds) + 2):
        listed = list(Run.objects.listed().order_by("id"))
        kind = (*kinds, "delete", "upload")[step]
        if kind == "upload":
            upload(
                rng.choice(("hdd", "nvme-ssd", "sata-ssd")),
                rng.choice(("none", "unsafe")),
            )
        elif kind == "hide":
            rng.choice(listed).moderate("hide", "test")
        elif kind == "unhide":
            Run.objects.filter(hidden=True).order_by("id").first().moderate("unhide")
        elif kind == "flag":
            rng.choice(listed).moderate("flag", "test")
        elif kind == "unflag":
            Run.objects.filter(suspect=True).order_by("id").first().moderate("unflag")
        elif kind == "retag":
            run = rng.choice(listed)
            edit_run(run, {"tags": {**(run.tags or {}), "disk_type": "hdd"}})
        elif kind == "private":
            edit_run(rng.choice(listed), {"visibility": "private"})
        else:
            delete_run(rng.choice(listed))
        out = refresh.refresh()
        restamped += out["restamped"]
        assert_all_current_and_exact(calls)
    # Some changes reached only some answers.
    assert restamped > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM results_answersummary")
        assert cursor.fetchone()[0] >= len(calls)


def stored_keys() -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, args FROM results_answersummary")
        return set(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_an_upload_stores_no_new_default_answer():
    """The reports' defaults take their workload without its number of runs
    (``reports.workload_arg``): an upload changes no key, so no answer for
    an older count lingers, stale, for every refresh to compute again."""
    generate(systems=12)
    refresh.refresh(full=True)
    before = stored_keys()
    upload("hdd")
    out = refresh.refresh()
    assert stored_keys() == before
    assert len(out["recomputed"]) + out["restamped"] <= len(before)


@pytest.mark.django_db(transaction=True)
def test_a_restamp_racing_a_readers_store_is_computed_instead():
    """A reader that waited past ``WAIT_FOR_COMPUTE_S`` stores the answer
    while the refresh is deciding to stamp it: the stamp gives way (False),
    the reader's answer stands."""
    import threading

    from django.db import connections

    generate(systems=6)
    fn, args = answers.distribution, ([], TESTS[0], "iops", None)
    fn.with_freshness(*args)
    upload("hdd")

    def reader_stores(_runs) -> bool:
        def store():
            try:
                with connections["default"].cursor() as cursor:
                    cursor.execute(
                        "UPDATE results_answersummary SET version = version + 1000 "
                        "WHERE name = %s",
                        [fn.key],
                    )
            finally:
                connections.close_all()

        thread = threading.Thread(target=store)
        thread.start()
        thread.join()
        return False

    assert answer_cache.restamp(fn.key, args, reader_stores) is False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT version FROM results_answersummary WHERE name = %s", [fn.key]
        )
        assert cursor.fetchone()[0] > 1000
