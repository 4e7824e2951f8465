"""The soak (bench/soak.py, ``make soak``) for three minutes: the embedded
defaults, real bundles uploaded, visibility changed, runs hidden and shown,
pages and comparisons opened, while a second process keeps every core
busy.  Bounded: three minutes of use, then at most ten to store what was
sent (serve's start-up is bounded by its own wait)."""

from __future__ import annotations

import pytest

from bench import soak

pytestmark = pytest.mark.soak


def test_three_minutes_of_use_on_busy_cores(tmp_path):
    lines = []
    result = soak.run(3, tmp_path, say=lines.append)
    report = "\n".join(lines) + f"\nserve's log: {result['log']}"
    assert result["sent"] > 0, report
    assert result["crashes"] == 0, report
    assert result["restarts"] == {}, report
    assert result["server_errors"] == [] and result["refused"] == [], report
    assert result["stored"] == result["sent"], report
    # No stale count past one refresh period: a minute at most.
    assert result["longest_disagreement_s"] <= 60, report
