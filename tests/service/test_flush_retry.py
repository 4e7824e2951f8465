"""The test suite's flush runs again after PostgreSQL aborted it as a
deadlock's victim (tests/conftest.py), and only then."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError

from tests.conftest import retrying_a_deadlock


def _failing(errors):
    calls = []

    def flush(*args):
        calls.append(args)
        if errors:
            cause = errors.pop(0)
            try:
                raise cause
            except Exception as exc:
                raise OperationalError(str(exc)) from exc
        return "flushed"

    return flush, calls


def test_a_flush_aborted_by_a_deadlock_is_run_again():
    flush, calls = _failing([psycopg.errors.DeadlockDetected("deadlock detected")])
    assert retrying_a_deadlock(flush, pause=0)("ops", ["TRUNCATE x"]) == "flushed"
    assert len(calls) == 2


def test_any_other_error_is_raised_at_once():
    flush, calls = _failing([psycopg.errors.UndefinedTable("no such table")])
    with pytest.raises(OperationalError, match="no such table"):
        retrying_a_deadlock(flush, pause=0)("ops", [])
    assert len(calls) == 1


def test_a_deadlock_every_time_is_raised_in_the_end():
    errors = [psycopg.errors.DeadlockDetected("deadlock detected")] * 3
    flush, calls = _failing(errors)
    with pytest.raises(OperationalError, match="deadlock"):
        retrying_a_deadlock(flush, attempts=3, pause=0)("ops", [])
    assert len(calls) == 3
