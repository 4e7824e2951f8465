"""Bounded waits that say what they waited for.

Every wait on a process or a guest in the tests ends: when it runs out it
fails with what it waited for and the last lines of the logs that show why
(the process's own, a guest's console).  Plain functions without pytest or
Django, so tests/guests/harness.py (also a command) uses them too.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def log_tail(path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or why there are none."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(the log is empty)"


def _diagnosis(what: str, timeout: float, logs) -> str:
    text = f"timed out after {timeout:.0f} s waiting for {what}"
    for log in logs or ():
        text += f"\n--- last lines of {log} ---\n{log_tail(log)}"
    return text


def wait_for(
    predicate,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "",
    logs=(),
    log=None,
):
    """Poll ``predicate`` until it returns a truthy value or time runs out;
    then fail with ``what`` and the last lines of each of ``logs`` (or of
    the one ``log``)."""
    if log is not None:
        logs = [*logs, log]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(_diagnosis(what or str(predicate), timeout, logs))


def finish(proc: subprocess.Popen, timeout: float, what: str, logs=()) -> int:
    """Wait for a process to exit; past ``timeout`` kill it and fail with
    ``what`` and the last lines of its ``logs``.  Returns its exit code."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        raise AssertionError(_diagnosis(what, timeout, logs)) from None
