"""The overhead report's run-by-run rows read the results' figures, not their
statistics, and its pager counts the paired guests up to the cap."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchdb.results import reads, stats
from benchdb.results.models import Measurement, Result, Run

pytestmark = pytest.mark.django_db

TEST = "fio-rand-read-4k-q32t1"
GUEST = [610.0, 640.0, 625.0, 900.0]
HOST = [1000.0, 1010.0, 990.0, 1005.0]


def _run(role: str, tests: dict, **fields) -> Run:
    """A run with one result per test id: {test id: (metric, repeats)}."""
    run = Run.objects.create(suite_id="s", suite_version="1", role=role, **fields)
    for test_id, (metric, values) in tests.items():
        summary = stats.summarize(values)
        column = {"iops": "iops_mean", "bw_bytes": "bw_bytes_mean"}.get(metric)
        res = Result.objects.create(
            run=run,
            test_id=test_id,
            tool="fio",
            comparability_key=f"k|{test_id}",
            stats={
                "main_direction": "read",
                "directions": {"read": {metric: summary}},
                "values": {"read": {metric: list(values)}},
            },
            # The run's figure, as ingest stores it (migration 0023).
            **({column: stats.centre(summary)} if column else {}),
        )
        Measurement.objects.bulk_create(
            Measurement(result=res, repeat=i, direction="read", **{metric: v})
            for i, v in enumerate(values)
        )
    return run


def _guests():
    return list(
        reads.overhead_guests()
        .select_related("baseline", "hardware")
        .order_by("pair_id", "id")
    )


def test_rows_read_the_figures_not_the_statistics():
    for scale in (1.0, 2.0):
        host = _run("host", {TEST: ("iops", [v * scale for v in HOST])})
        _run("guest", {TEST: ("iops", [v * scale for v in GUEST])}, baseline=host)
    guests = _guests()
    with CaptureQueriesContext(connection) as queries:
        rows = reads.overhead_rows(guests)
    # One query, for both pairs' results, without their statistics JSON.
    [query] = queries
    assert '"stats"' not in query["sql"]
    assert len(rows) == 2
    for row, scale in zip(rows, (1.0, 2.0), strict=True):
        full = {r.run_id: r for r in Result.objects.filter(test_id=TEST)}
        guest, host = full[row["guest"].pk], full[row["host"].pk]
        # What the page showed when it read the statistics.
        assert row["guest_mean"] == pytest.approx(reads.mean_of(guest, "iops"))
        assert row["host_mean"] == pytest.approx(reads.mean_of(host, "iops"))
        answer = stats.overhead(
            [v * scale for v in GUEST], [v * scale for v in HOST], True
        )
        assert row["interval"] == answer
        assert row["overhead"] == pytest.approx(answer["percent"])


def test_a_figure_without_a_column_is_read_from_the_statistics():
    # No test id the suite knows, so no main metric: the first figure both
    # sides have, here the runtime, which has no column.
    host = _run("host", {"custom-run": ("runtime_s", [2.0, 2.1, 1.9, 2.2])})
    _run("guest", {"custom-run": ("runtime_s", [1.0, 1.1, 0.9, 1.0])}, baseline=host)
    guests = _guests()
    with CaptureQueriesContext(connection) as queries:
        [row] = reads.overhead_rows(guests)
    # The results, the statistics of that pair, its repeats.
    assert len(queries) == 3
    assert row["metric"] == "runtime_s"
    assert row["guest_mean"] == pytest.approx(
        stats.centre(stats.summarize([1.0, 1.1, 0.9, 1.0]))
    )
    assert row["interval"] == stats.overhead(
        [1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.2], False
    )


def test_the_pager_counts_the_pairs_up_to_the_cap(client, settings):
    settings.BENCHDB_COUNT_CAP = 2
    settings.BENCHDB_PAGE_MEMO = 0  # the queries of the page written
    for _ in range(3):
        host = _run("host", {TEST: ("iops", HOST)})
        _run("guest", {TEST: ("iops", GUEST)}, baseline=host)
    client.get("/reports/overhead/")  # the stored answers computed
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/reports/overhead/").content.decode()
    counts = [q["sql"] for q in queries if re.search(r"count\(\*\)", q["sql"], re.I)]
    assert counts and all(re.search(r"LIMIT 3\)", sql) for sql in counts), counts
    assert "across all more than 2 (about" in re.sub(r"\s+", " ", page)
    settings.BENCHDB_COUNT_CAP = 100
    page = client.get("/reports/overhead/").content.decode()
    assert "across all 3 guest runs" in re.sub(r"\s+", " ", page)
