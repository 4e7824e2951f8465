"""The run API flags each figure whose 95% interval is too wide to estimate
anything (``ci95_too_wide``), by the rule the pages and the agent's table use
(``stats.too_wide``); the bounds stay as computed."""

from __future__ import annotations

import pytest

from benchdb.results import stats
from benchdb.results.models import Result, Run

pytestmark = pytest.mark.django_db


def test_each_figure_of_a_run_says_whether_its_interval_is_too_wide(api):
    run = Run.objects.create(suite_id="benchdb-standard", suite_version="1")
    noisy, steady = [1.0, 100.0, 10_000.0], [100.0, 101.0, 99.0]
    Result.objects.create(
        run=run,
        test_id="fio-rand-read-4k-q32t1",
        tool="fio",
        comparability_key="benchdb-standard/1|fio-rand-read-4k-q32t1|test",
        stats={
            "main_direction": "read",
            "directions": {
                "read": {
                    "iops": stats.summarize(noisy),
                    "bw_bytes": stats.summarize(steady),
                }
            },
        },
        repeat_count=3,
    )
    response = api.get(f"/api/v1/runs/{run.pk}/")
    assert response.status_code == 200
    figures = response.json()["tests"][0]["stats"]["read"]
    assert figures["iops"]["ci95_too_wide"] is True
    assert figures["iops"]["ci95_low"] == stats.summarize(noisy)["ci95_low"]
    assert figures["bw_bytes"]["ci95_too_wide"] is False
