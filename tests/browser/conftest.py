"""Debian's Chromium driven by Playwright (it cannot download its own browser)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"


@contextlib.contextmanager
def chromium():
    """A Chromium for the duration of the block.

    Playwright's sync API keeps an event loop running in this thread while it
    is open, and Django refuses database calls from a thread with a running
    loop; the test's own calls are synchronous and safe, so the refusal is
    lifted for exactly as long as the browser is open (never process-wide:
    subprocesses such as ``check --deploy`` must not inherit it).
    """
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                yield browser
            finally:
                browser.close()
                _close_connections_of_this_block()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def _close_connections_of_this_block() -> None:
    """Close the database connections the block opened, while it can still
    see them.  With Playwright's loop running, Django keeps this thread's
    connections apart from the ones it sees once the loop is gone
    (``connections`` is an asgiref ``Local``): left open, the test's own
    connection outlived the session, and the test database could not be
    dropped ("being accessed by other users").  Not one inside a test's
    transaction, which its test case rolls back and closes itself."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


@pytest.fixture
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    take.folder = SCREENSHOTS

    return take
