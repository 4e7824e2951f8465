"""A guest result's overhead against its baseline is computed once, when
ingest links the pair, and read back by comparisons and the run page while
the baseline is still that run (``overhead_mod.store_overheads``): the answers
are byte for byte those computed on each request, which is what a result
with none stored still gets."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from benchdb.results import overheads as overhead_mod
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Result, Run
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _computed_each_time(settings):
    """These tests change results' stored overheads in place, which a kept
    comparison assumes never happens (``compare._MEMO``): every comparison
    here is computed, to show which values it reads."""
    settings.BENCHDB_COMPARISON_MEMO = 0


TESTS = ("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync")
MARK = "stored, not computed"


def _pair(fio, pair_id: str, *, host_first: bool, guest_speed: str = "slow"):
    guest = make_bundle(fio, tests=TESTS, speed=guest_speed, pair_id=pair_id)
    host = make_bundle(fio, tests=TESTS, role="host", pair_id=pair_id)
    order = (host, guest) if host_first else (guest, host)
    for bundle in order:
        store_bundle(bundle)
    return (
        Run.objects.get(uuid=guest["bundle_id"]),
        Run.objects.get(uuid=host["bundle_id"]),
    )


def _stored(run: Run) -> dict[str, dict | None]:
    return dict(run.results.values_list("test_id", "overhead"))


def _forget(*runs: Run) -> None:
    Result.objects.filter(run__in=runs).update(overhead=None)


def _mark(run: Run) -> None:
    """Write MARK into the stored texts, to see where they are read."""
    text = overhead_mod.OVERHEAD_FIELDS.index("text")
    for res in run.results.exclude(overhead=None):
        for packed in res.overhead["metrics"].values():
            packed[text] = MARK
        Result.objects.filter(pk=res.pk).update(overhead=res.overhead)


def _check_stored(guest: Run, host: Run) -> None:
    """Each guest result's stored overhead is against its baseline, in its
    main direction, and is what pair_overheads computes from the two
    results' values, for each metric either side measured."""
    hosts = {r.comparability_key: r.pk for r in host.results.all()}
    assert set(_stored(guest)) == set(TESTS)
    for res in guest.results.all():
        found = res.overhead
        assert found["baseline"] == host.pk
        assert found["direction"] == res.stats["main_direction"]
        # Each metric either side measured (dd measures throughput only),
        # exactly what pair_overheads computes from the two results' values.
        metrics = [m for m in overhead_mod.OVERHEAD_METRICS if m in found["metrics"]]
        assert metrics
        assert res.test_id != TESTS[2] or metrics == ["bw_bytes"]
        computed = overhead_mod.pair_overheads(
            [
                (res.pk, hosts[res.comparability_key], found["direction"], m)
                for m in metrics
            ]
        )
        for metric, answer in zip(metrics, computed, strict=True):
            assert (
                dict(
                    zip(
                        overhead_mod.OVERHEAD_FIELDS,
                        found["metrics"][metric],
                        strict=True,
                    )
                )
                == answer
            )
        # The guest's fio jobs are throttled (300 IOPS), the host's are not.
        if res.tool == "fio":
            assert found["metrics"]["iops"][0] < 1.0
    assert set(_stored(host).values()) == {None}


@pytest.mark.parametrize("host_first", [False, True])
def test_ingest_stores_each_overhead_when_it_links_the_pair(fio, host_first):
    """A host after its guests: computed from both stored results; a guest
    after its host (the agent's order): before its results are inserted."""
    guest, host = _pair(fio, f"stored-{host_first}", host_first=host_first)
    assert guest.baseline_id == host.pk
    _check_stored(guest, host)


def test_a_guest_after_a_host_stored_without_values_gets_them_too(fio):
    """The host's values are then read from its measurements, after the
    guest's results are inserted (``store_overheads``)."""
    host = store_bundle(make_bundle(fio, tests=TESTS, role="host", pair_id="old"))
    for res in host.results.all():
        doc = dict(res.stats)
        doc.pop("values")
        Result.objects.filter(pk=res.pk).update(stats=doc)
    guest = store_bundle(
        make_bundle(fio, tests=TESTS, speed="slow", pair_id="old"), owner=None
    )
    assert guest.baseline_id == host.pk
    _check_stored(guest, host)


def test_a_host_read_another_way_gives_the_same_overheads(fio):
    """A host result stored without values (from its measurements) or whose
    main direction is not its guest's (from its values in the guest's) goes
    through ``pair_overheads``: the same answer as from ``main_values``."""
    guest, host = _pair(fio, "other-way", host_first=True)
    before = _stored(guest)
    for res in host.results.all():
        doc = dict(res.stats)
        if res.test_id == TESTS[0]:
            doc.pop("values")
        else:
            doc["main_direction"] = "trim"
        Result.objects.filter(pk=res.pk).update(stats=doc)
    assert overhead_mod.store_overheads([guest.pk]) == len(TESTS)
    assert _stored(guest) == before


def test_a_comparison_reads_them_and_answers_as_if_computed(fio, api):
    g1, h1 = _pair(fio, "cmp-1", host_first=False)
    g2, h2 = _pair(fio, "cmp-2", host_first=True, guest_speed="fast")
    # The second pair's latency is lost on both sides of one test: only the
    # first guest measured it, so the second's overhead of it is "none".
    lost = []
    for run in (g2, h2):
        res = run.results.get(test_id=TESTS[0])
        for values in res.stats["values"].values():
            values.pop("lat_mean_ns", None)
        Result.objects.filter(pk=res.pk).update(stats=res.stats)
        lost.append(res.pk)
    overhead_mod.store_overheads([g2.pk])
    assert "lat_mean_ns" not in Result.objects.get(pk=lost[0]).overhead["metrics"]
    url = f"/api/v1/compare/?runs={g1.pk},{g2.pk},{h1.pk}"
    stored = api.get(url)
    assert stored.status_code == 200
    overheads = [
        entry["overhead"]
        for test in stored.json()["tests"]
        for metric in test["metrics"]
        for entry in metric["runs"]
        if entry["overhead"] is not None
    ]
    assert len(overheads) == 2 * (3 + 3 + 1)  # rand read, rand write, dd
    assert any(o["text"].startswith("no overhead") for o in overheads)
    _forget(g1, g2)
    computed = api.get(url)
    assert computed.content == stored.content
    # Stored texts are what the answer shows ...
    overhead_mod.store_overheads([g1.pk, g2.pk])
    _mark(g1)
    assert MARK in api.get(url).content.decode()
    # ... but not once the run's baseline is another run.
    Run.objects.filter(pk=g1.pk).update(baseline=h2)
    moved = api.get(url)
    assert MARK not in moved.content.decode()
    _forget(g1)
    assert api.get(url).content == moved.content


def test_a_private_baselines_stored_overhead_stays_private(fio, api):
    guest, host = _pair(fio, "private", host_first=False)
    other, _ = _pair(fio, "other", host_first=False)
    assert _stored(guest)[TESTS[0]] is not None
    Run.objects.filter(pk=host.pk).update(visibility="private")
    body = api.get(f"/api/v1/compare/?runs={guest.pk},{other.pk}").json()
    for test in body["tests"]:
        for metric in test["metrics"]:
            by_run = {e["run"]: e for e in metric["runs"]}
            assert by_run[guest.pk]["overhead"] is None
            assert metric["kind"] == "percentile" or by_run[other.pk]["overhead"]
    detail = api.get(f"/api/v1/runs/{guest.pk}/").json()
    assert all(r["overhead"] is None for r in detail["tests"])


def test_the_run_page_and_its_api_read_them_too(fio, api, client):
    guest, host = _pair(fio, "page", host_first=True)
    # A figure only the guest measured: stored (the comparison shows "no
    # overhead" for it), not shown by the run page, as when computed.
    res = host.results.get(test_id=TESTS[0])
    for values in res.stats["values"].values():
        values.pop("lat_mean_ns", None)
    Result.objects.filter(pk=res.pk).update(stats=res.stats)
    overhead_mod.store_overheads([guest.pk])
    one_sided = guest.results.get(test_id=TESTS[0]).overhead["metrics"]["lat_mean_ns"]
    assert one_sided[overhead_mod.OVERHEAD_FIELDS.index("n_host")] == 0
    api_stored = api.get(f"/api/v1/runs/{guest.pk}/")
    by_test = {r["test_id"]: r for r in api_stored.json()["tests"]}
    assert "lat_mean_ns" not in by_test[TESTS[0]]["overhead"]["intervals"]
    assert "lat_mean_ns" in by_test[TESTS[1]]["overhead"]["intervals"]
    page_stored = client.get(f"/runs/{guest.pk}/")
    intervals = [r["overhead"]["intervals"] for r in api_stored.json()["tests"]]
    assert all(intervals) and len(intervals) == len(TESTS)
    _forget(guest)
    assert api.get(f"/api/v1/runs/{guest.pk}/").content == api_stored.content
    page = client.get(f"/runs/{guest.pk}/")
    assert page.content.replace(b"\n", b"") == page_stored.content.replace(b"\n", b"")
    overhead_mod.store_overheads([guest.pk])
    _mark(guest)
    assert MARK in api.get(f"/api/v1/runs/{guest.pk}/").content.decode()
    assert MARK in client.get(f"/runs/{guest.pk}/").content.decode()


def test_what_is_not_theirs_is_not_used():
    read = overhead_mod.stored_overhead
    now = overhead_mod.OVERHEAD_VERSION
    assert read(None, now, 1, "read") is None
    good = {"baseline": 1, "direction": "read", "metrics": {"iops": [None] * 9}}
    assert read(json.dumps(good), now, 1, "read") == good["metrics"]
    assert read(good, now, 2, "read") is None
    assert read(good, now, 1, "write") is None
    assert read(good, now, 1, None) is None
    # Stored by a version with other fields: computed instead.
    short = {**good, "metrics": {"iops": [None] * 8}}
    assert read(short, now, 1, "read") is None
    # Computed by another formula, or before versions were kept: stale.
    assert read(good, now - 1, 1, "read") is None
    assert read(good, now + 1, 1, "read") is None
    assert read(good, None, 1, "read") is None


def test_a_stale_overhead_is_never_served(api, client, fio, capsys):
    """An overhead stored by another version of the formula is read as
    absent: the comparison and the run page compute it with today's (so
    nothing mixes the two), and ``store_overheads`` replaces it."""
    guest, host = _pair(fio, "stale", host_first=True)
    url = f"/api/v1/compare/?runs={guest.pk},{host.pk}"
    fresh = api.get(url).content
    page = api.get(f"/api/v1/runs/{guest.pk}/").content
    assert Result.objects.filter(
        run=guest, overhead_version=overhead_mod.OVERHEAD_VERSION
    ).exists()
    _mark(guest)
    Result.objects.filter(run=guest).update(
        overhead_version=overhead_mod.OVERHEAD_VERSION - 1
    )
    assert api.get(url).content == fresh
    assert api.get(f"/api/v1/runs/{guest.pk}/").content == page
    assert MARK not in client.get(f"/runs/{guest.pk}/").content.decode()
    call_command("store_overheads")
    assert "1 guest run(s)" in capsys.readouterr().out
    assert (
        not Result.objects.filter(run=guest, overhead__isnull=False)
        .exclude(overhead_version=overhead_mod.OVERHEAD_VERSION)
        .exists()
    )


def test_the_command_stores_what_ingest_would_have(fio, capsys):
    g1, _h1 = _pair(fio, "cmd-1", host_first=False)
    g2, _h2 = _pair(fio, "cmd-2", host_first=True)
    before = {**_stored(g1), **{f"2{k}": v for k, v in _stored(g2).items()}}
    _forget(g1, g2)
    with connection.cursor() as cursor:  # one stored against another baseline
        cursor.execute(
            "UPDATE results_result SET overhead = "
            "jsonb_build_object('baseline', -1) WHERE id = %s",
            [g2.results.first().pk],
        )
    call_command("store_overheads", batch=1)
    assert "6 result(s) of 2 guest run(s)" in capsys.readouterr().out
    after = {**_stored(g1), **{f"2{k}": v for k, v in _stored(g2).items()}}
    assert after == before
    call_command("store_overheads")
    assert "of 0 guest run(s)" in capsys.readouterr().out
    with pytest.raises(CommandError, match="--batch"):
        call_command("store_overheads", batch=0)
