"""The real-guest matrix, run once per session and shared by the guest tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.guests import matrix


@pytest.fixture(scope="session")
def results(tmp_path_factory, served_pyz) -> tuple[dict, Path]:
    """Run the CI matrix once with the served agent; returns the summary and
    the output folder.

    ``BENCHDB_GUEST_RESULTS`` names a folder to keep the bundles in (to upload
    them to a running benchdb afterwards); by default a temporary one.
    """
    out = os.environ.get("BENCHDB_GUEST_RESULTS")
    out = Path(out) if out else tmp_path_factory.mktemp("guest-matrix")
    summary = matrix.run_matrix(out, matrix.CI_PLAN, pyz=served_pyz)
    return summary, out


@pytest.fixture(scope="session")
def boots(results) -> list[dict]:
    """One record per boot (see ``tests.guests.matrix._boot_one``)."""
    return results[0]["boots"]
