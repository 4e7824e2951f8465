"""A comparison is computed once per web process and given again while
everything it was computed from is unchanged (``compare._MEMO``,
``results.memo``): the same answer as computing it, never a stale one, and
no reader changes the answer it shares."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from benchdb.results import compare, memo
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Comparison, Result, Run
from benchdb.web import present
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

TESTS = ("fio-rand-read-4k-q1t1", "fio-rand-write-4k-q1t1", "dd-write-1m-fdatasync")


@pytest.fixture
def kept(settings):
    settings.BENCHDB_COMPARISON_MEMO = 10000
    compare._MEMO.clear()
    yield compare._MEMO
    compare._MEMO.clear()


def _store(fio, **kw) -> Run:
    return store_bundle(make_bundle(fio, tests=TESTS, **kw))


@pytest.fixture
def trio(fio):
    """A host and two guests of it (one throttled), paired."""
    host = _store(fio, role="host", pair_id="memo")
    fast = _store(fio, pair_id="memo")
    slow = _store(fio, speed="slow", pair_id="memo")
    for run in (fast, slow):
        run.refresh_from_db()
        assert run.baseline_id == host.pk
    return host, fast, slow


def _runs(*runs: Run) -> list[Run]:
    """As the API reads them (``reads.comparison``)."""
    found = {
        r.pk: r
        for r in Run.objects.filter(pk__in=[r.pk for r in runs]).only(
            *compare.COMPARED_RUN_FIELDS
        )
    }
    return [found[r.pk] for r in runs]


def _fresh(runs, reference=None, figures=None) -> dict:
    """The answer computed, whatever is kept."""
    with override_settings(BENCHDB_COMPARISON_MEMO=0):
        return compare.build_comparison(runs, reference, figures)


def _same(a, b) -> bool:
    """Equal as JSON values (NaN equal to NaN, which no answer should hold)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


def test_a_kept_comparison_is_given_again_with_one_query(kept, trio):
    host, fast, slow = trio
    runs = _runs(fast, slow, host)
    first = compare.build_comparison(runs)
    assert kept.misses == 1 and len(kept) == 1
    read_again = _runs(fast, slow, host)
    with CaptureQueriesContext(connection) as queries:
        again = compare.build_comparison(read_again)
    assert again is first
    assert kept.hits == 1
    # Only the key's query: the ids of the results it is computed from.
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("SELECT r.id FROM results_result r")
    assert _same(first, _fresh(runs))
    # The guests' overheads against their host are in it.
    entry = first["tests"][0]["metrics"][0]["runs"][0]
    assert entry["overhead"] is not None


def test_each_input_of_a_comparison_gives_its_own_answer(kept, trio, settings):
    host, fast, slow = trio
    base = compare.build_comparison(_runs(fast, slow))

    # Another reference, another chooser of figures, another margin.
    by_slow = compare.build_comparison(_runs(fast, slow), _runs(slow)[0])
    assert by_slow["reference"] == slow.pk and by_slow is not base
    assert _same(by_slow, _fresh(_runs(fast, slow), _runs(slow)[0]))
    charted = compare.build_comparison(_runs(fast, slow), None, present.charted_figures)
    assert _same(
        charted, _fresh(_runs(fast, slow), None, present.charted_figures)
    ) and not _same(charted, base)
    settings.BENCHDB_EQUIVALENCE_PERCENT = 50
    wide = compare.build_comparison(_runs(fast, slow))
    assert wide["equivalence_percent"] == 50 and wide is not base
    settings.BENCHDB_EQUIVALENCE_PERCENT = 5
    assert compare.build_comparison(_runs(fast, slow)) is base

    # A run's title: its label changes.
    Run.objects.filter(pk=slow.pk).update(title="renamed <b>x</b>")
    renamed = compare.build_comparison(_runs(fast, slow))
    assert renamed["runs"][1]["title"] == "renamed <b>x</b>"
    assert _same(renamed, _fresh(_runs(fast, slow)))

    # A run's baseline: taken away, its overheads go with it.
    Run.objects.filter(pk=slow.pk).update(baseline=None)
    alone = compare.build_comparison(_runs(fast, slow))
    with_overhead = {
        e["run"]
        for t in alone["tests"]
        for m in t["metrics"]
        for e in m["runs"]
        if e["overhead"] is not None
    }
    assert with_overhead == {fast.pk}
    assert _same(alone, _fresh(_runs(fast, slow)))


def test_a_baseline_made_private_lends_no_overhead_to_a_kept_comparison(kept, trio):
    """The baseline's results leave the key's ids: computed again, without
    the overheads a private host would have lent."""
    host, fast, slow = trio
    before = compare.build_comparison(_runs(fast, slow))
    assert before["tests"][0]["metrics"][0]["runs"][0]["overhead"] is not None
    Run.objects.filter(pk=host.pk).update(visibility="private")
    after = compare.build_comparison(_runs(fast, slow))
    assert after is not before
    assert all(
        e["overhead"] is None
        for t in after["tests"]
        for m in t["metrics"]
        for e in m["runs"]
    )
    assert _same(after, _fresh(_runs(fast, slow)))
    # Listed again: the first answer is right again, and is given.
    Run.objects.filter(pk=host.pk).update(visibility="public")
    assert compare.build_comparison(_runs(fast, slow)) is before


def test_a_run_whose_results_change_is_computed_again(kept, trio):
    """A result that stops being comparable leaves the ids: the test drops
    out of the comparison as it does when computed."""
    host, fast, slow = trio
    before = compare.build_comparison(_runs(fast, slow))
    assert len(before["tests"]) == len(TESTS)
    Result.objects.filter(run=slow, test_id=TESTS[0]).update(comparable=False)
    after = compare.build_comparison(_runs(fast, slow))
    assert len(after["tests"]) == len(TESTS) - 1
    assert TESTS[0] in after["not_shared"]
    assert _same(after, _fresh(_runs(fast, slow)))


def test_a_run_recreated_under_the_same_id_is_not_taken_for_the_old(kept, trio):
    """Its creation time is in the key: a database flushed and filled
    again (sequences restarted) gives other runs the old ids."""
    host, fast, slow = trio
    runs = _runs(fast, slow)
    first = compare.build_comparison(runs)
    # The same ids, labels and results, another creation time.
    later = _runs(fast, slow)
    later[1].created = later[1].created.replace(year=later[1].created.year - 1)
    assert compare.build_comparison(later) is not first


def test_no_reader_changes_a_kept_comparison(kept, trio, client, api):
    """The API (JSON and CSV), the compare page and its table, Markdown and
    CSV, and a share link all read the kept answer: afterwards it is still
    what computing it gives."""
    host, fast, slow = trio
    ids = f"{fast.pk},{slow.pk},{host.pk}"
    answer = compare.build_comparison(_runs(fast, slow, host))
    snapshot = copy.deepcopy(answer)
    urls = [
        f"/api/v1/compare/?runs={ids}",
        f"/api/v1/compare/?runs={ids}&format=csv",
    ]
    for url in urls:
        response = api.get(url)
        assert response.status_code == 200, response.content[:300]
    page = client.get(f"/compare/?runs={ids}")
    assert page.status_code == 200
    groups = {present.group_slug(t) for t in answer["tests"]}
    for slug in groups:
        assert client.get(f"/compare/table/?runs={ids}&group={slug}").status_code == 200
    for url in (f"/compare/markdown/?runs={ids}", f"/compare/csv/?runs={ids}"):
        assert client.get(url).status_code == 200
    saved = Comparison.objects.create(
        slug="memo-share", run_ids=[fast.pk, slow.pk, host.pk], reference_run_id=None
    )
    assert client.get(saved.get_absolute_url()).status_code == 200
    # Every reader above was served the kept answer, unchanged.
    assert kept.hits >= 1
    assert compare.build_comparison(_runs(fast, slow, host)) is answer
    assert _same(answer, snapshot)
    assert _same(answer, _fresh(_runs(fast, slow, host)))
    # The API's JSON is the kept answer's.
    body = api.get(f"/api/v1/compare/?runs={ids}").content
    assert json.loads(body)["tests"] == json.loads(json.dumps(answer["tests"]))


def test_the_apis_json_of_a_kept_comparison_is_written_once(kept, trio, api):
    """Its bytes are kept with the answer (``Memo.derived``) and served again,
    the same bytes as writing them afresh; nothing is kept with a budget of 0."""
    host, fast, slow = trio
    url = f"/api/v1/compare/?runs={fast.pk},{slow.pk},{host.pk}"
    first = api.get(url).content
    answer = compare.build_comparison(_runs(fast, slow, host))
    kept_json = kept.derived(answer, "json", lambda: None)
    assert kept_json == first
    assert api.get(url).content == first
    assert json.loads(first)["tests"] == json.loads(json.dumps(answer["tests"]))
    # Evicted with its answer.
    kept.clear()
    assert kept.derived(answer, "json", lambda: b"made") == b"made"


def test_what_is_derived_goes_with_its_value():
    kept = memo.Memo(10)
    value, other = {"a": 1}, {"a": 1}
    kept.put("k", value, 4)
    assert kept.derived(value, "x", lambda: "made") == "made"
    assert kept.derived(value, "x", lambda: "again") == "made"
    # An equal value that is not the kept object: made every time.
    assert kept.derived(other, "x", lambda: "other") == "other"
    assert kept.derived(other, "x", lambda: "still") == "still"
    kept.put("k", other, 4)  # replaced: what was derived from the old goes
    assert kept.derived(other, "x", lambda: "new") == "new"
    assert kept.derived(value, "x", lambda: "gone") == "gone"
    kept.put("big", {"b": 2}, 10)  # evicts k, and what was derived from it
    assert kept.derived(other, "x", lambda: "evicted") == "evicted"


def test_a_budget_of_zero_keeps_nothing(settings, trio):
    settings.BENCHDB_COMPARISON_MEMO = 0
    compare._MEMO.clear()
    host, fast, slow = trio
    first = compare.build_comparison(_runs(fast, slow))
    assert compare.build_comparison(_runs(fast, slow)) is not first
    assert len(compare._MEMO) == 0


def test_the_memo_evicts_the_least_recently_used_within_its_budget():
    kept = memo.Memo(10)
    kept.put("a", 1, 4)
    kept.put("b", 2, 4)
    assert kept.get("a") == 1  # a is now the most recently used
    kept.put("c", 3, 4)  # 12 > 10: b goes
    assert kept.get("b") is None and kept.get("a") == 1 and kept.get("c") == 3
    assert kept.cost == 8 and kept.evictions == 1
    kept.put("a", 5, 2)  # replaced: its cost is counted once
    assert kept.cost == 6 and kept.get("a") == 5
    kept.put("huge", 0, 11)  # more than the whole budget: not kept
    assert kept.get("huge") is None and len(kept) == 2
    kept.clear()
    assert len(kept) == 0 and kept.cost == 0
    assert memo.Memo(0).put("x", 1, 1) is None and len(memo.Memo(0)) == 0


@pytest.mark.parametrize(
    ("value", "error"),
    [("-1", "0 (keep none) or more"), ("lots", "expected a whole number")],
)
def test_a_bad_budget_is_refused_at_start_up(value, error):
    """Settings refuse it with the variable's name, before anything runs."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", "import benchdb.settings"],
        cwd=root,
        env={**os.environ, "BENCHDB_COMPARISON_MEMO": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "BENCHDB_COMPARISON_MEMO=" in done.stderr and value in done.stderr
    assert error in done.stderr
