"""An owner's tasks click by click in Chromium at 1366 and 390 px: sign in,
open My runs from the header, claim an anonymous run by its owner key, make a
run private and see the badge on My runs and on its page, retag it, delete
another after the confirmation, create a token and find it in the agent's
command with a copy button that copies it.  Every page: no console error,
nothing wider than the viewport."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from benchdb.results.models import ApiToken, Run
from tests.browser.test_every_page import OVERFLOW
from tests.web.test_owner_pages import new_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-Passw0rd!"


class Watched:
    """A page whose console errors, failed requests and dialogs are kept."""

    def __init__(self, context, width: int):
        self.page = context.new_page()
        self.width = width
        self.problems: list[str] = []
        page = self.page
        page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda e: self.problems.append(f"pageerror {e}"))
        page.on(
            "response",
            lambda r: (
                self.problems.append(f"{r.status} {r.url}") if r.status >= 400 else None
            ),
        )
        page.on("dialog", lambda d: (self.problems.append("dialog"), d.dismiss()))

    def check(self, what: str) -> None:
        """No problem so far, nothing sticking out on the page now."""
        self.page.wait_for_load_state("networkidle")
        assert not self.problems, (what, self.width, self.problems)
        layout = self.page.evaluate(OVERFLOW)
        assert layout["scroll"] <= layout["width"], (what, self.width, layout)
        assert not layout["out"], (what, self.width, layout)

    def in_view_width(self, locator) -> None:
        """Visible and within the screen's width (no sideways scroll)."""
        assert locator.is_visible()
        box = locator.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= self.width + 1


def sign_in(page, server: str, username: str) -> None:
    """Open the home page and sign in from the header's link."""
    page.goto(server + "/")
    page.click("header.site >> text=Sign in")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.auth button[type=submit]")


@pytest.mark.parametrize("width", [1366, 390])
def test_an_owner_manages_runs_and_tokens(live_server, browser, screenshot, width):
    ana = User.objects.create_user("ana", password=PASSWORD)
    kept = new_run(ana, title="ana's guest on pve-2")
    gone = new_run(ana, title="ana's old run")
    key = "bdo_" + "z" * 43
    anonymous = new_run(
        None, key=key, visibility="private", title="uploaded without a token"
    )
    context = browser.new_context(
        viewport={"width": width, "height": 844 if width < 500 else 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    w = Watched(context, width)
    page = w.page

    # Sign in from the home page, then My runs from the header.
    sign_in(page, live_server.url, "ana")
    page.click("#my-runs-link")
    assert page.url.endswith("/runs/mine/")
    w.check("my runs")
    card = page.locator(f"#run-{kept.pk}")
    w.in_view_width(card.locator(".owner-public"))

    # Claim the anonymous run with the number and key the agent printed.
    page.fill("#claim-form input[name=run]", str(anonymous.pk))
    page.fill("#claim-form input[name=key]", key)
    page.click("#claim-form button[type=submit]")
    claimed = page.locator(f"#run-{anonymous.pk}")
    w.in_view_width(claimed.locator(".owner-private"))
    assert f"Run {anonymous.pk} is now in your account." in page.inner_text(".messages")
    w.check("claimed")

    # Make a run private: the badge on My runs, then on its page.
    card.locator("select[name=visibility]").select_option("private")
    card.locator("button", has_text="Set").click()
    card = page.locator(f"#run-{kept.pk}")
    w.in_view_width(card.locator(".owner-private"))
    w.check("made private")
    screenshot(page, f"owner-my-runs-{width}")
    card.locator(".my-run-title a").click()
    bar = page.locator("#owner-bar")
    w.in_view_width(bar.locator(".owner-private"))
    assert "Private" in bar.inner_text()
    w.check("run page")
    screenshot(page, f"owner-run-{width}")

    # Retag: the edit page, one key=value a line; the run moves to writeback.
    bar.locator("text=Edit title, notes and tags").click()
    tags = page.locator("#id_tags")
    assert "cache_mode=none" in tags.input_value()
    w.check("edit page")
    tags.fill("cache_mode=writeback\nstorage_backend=zfs\ndisk_model=<b>Samsung</b>")
    page.click("#save-run")
    assert "cache writeback" in page.inner_text("p.lead")
    assert "disk_model=<b>Samsung</b>" in page.inner_text("main")  # text, not markup
    assert page.locator("main b", has_text="Samsung").count() == 0
    w.check("retagged")
    # A tag the API refuses is refused here with its message.
    page.locator("#owner-bar >> text=Edit title, notes and tags").click()
    page.fill("#id_tags", "cache_mode=fastest")
    page.click("#save-run")
    problems = page.locator("#edit-problems")
    w.in_view_width(problems)
    assert "'fastest' is not one of" in problems.inner_text()
    w.problems.clear()  # the refusal's 400, asserted just above
    page.click("text=Cancel")
    w.check("refused")

    # Delete another run, after its confirmation page.
    page.click("#my-runs-link")
    page.locator(f"#run-{gone.pk}").locator("text=Delete…").click()
    confirm = page.locator("#confirm-delete")
    w.in_view_width(confirm)
    assert "cannot be undone" in page.inner_text("#delete-confirm")
    w.check("confirm delete")
    assert Run.objects.filter(pk=gone.pk).exists()
    confirm.click()
    assert page.url.endswith("/runs/mine/")
    assert page.locator(f"#run-{gone.pk}").count() == 0
    assert "Deleted ana's old run." in page.inner_text(".messages")
    assert not Run.objects.filter(pk=gone.pk).exists()
    w.check("deleted")

    # A token: created on the tokens page, filled into the command, copied.
    page.click("text=API tokens")
    assert page.url.endswith("/tokens/")
    w.check("tokens page")
    page.fill("input[name=name]", "pve-node-2")
    page.click("#create-token")
    secret = page.inner_text("#new-token code")
    token = ApiToken.objects.get(user=ana, name="pve-node-2")
    assert secret.startswith(token.prefix)
    command = page.locator("#agent-command")
    assert f"--token {secret}" in command.inner_text()
    # In sight, wrapped at 390 px rather than off in a sideways scroll.
    for filled in page.locator(".filled-token").all():
        assert filled.inner_text() == secret
        w.in_view_width(filled)
    copy_button = page.locator("button.copy[data-copy='#agent-command']")
    w.in_view_width(copy_button)
    w.in_view_width(page.locator("button.copy[data-copy='#new-token code']"))
    copy_button.click()
    # A function, not an expression: the page's CSP forbids eval, which
    # Playwright needs to poll an expression.
    page.wait_for_function(
        "() => document.querySelector(\"button.copy[data-copy='#agent-command']\")"
        ".textContent === 'Copied'"
    )
    copied = page.evaluate("navigator.clipboard.readText()")
    assert f"--token {secret}" in copied and copied == command.inner_text().strip()
    w.check("token created")
    screenshot(page, f"owner-tokens-{width}")
    context.close()
