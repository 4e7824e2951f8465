"""Throttles count by the client address the deployment defines, and apply to
submissions, anonymous reads, comparison saves and sign-ins."""

from __future__ import annotations

import copy
import uuid

import pytest
from django.test import Client, RequestFactory

from benchdb.api.throttling import (
    AnonReadThrottle,
    ComparisonSaveThrottle,
    SubmissionAddressThrottle,
    client_address,
)
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Comparison, Submission
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


def request_from(remote: str, forwarded: str | None = None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **extra)


def test_without_proxies_a_forwarded_header_is_ignored(settings):
    settings.NUM_PROXIES, settings.TRUSTED_PROXIES = 0, []
    assert client_address(request_from("203.0.113.7", "1.2.3.4")) == "203.0.113.7"


def test_num_proxies_takes_the_address_the_last_proxy_saw(settings):
    settings.NUM_PROXIES, settings.TRUSTED_PROXIES = 1, []
    # The client wrote "1.2.3.4" itself; the proxy appended the real address.
    request = request_from("10.0.0.2", "1.2.3.4, 198.51.100.9")
    assert client_address(request) == "198.51.100.9"
    settings.NUM_PROXIES = 2
    request = request_from("10.0.0.2", "1.2.3.4, 198.51.100.9, 10.0.0.3")
    assert client_address(request) == "198.51.100.9"


def test_trusted_proxies_are_walked_past_from_the_right(settings):
    settings.NUM_PROXIES, settings.TRUSTED_PROXIES = 0, ["10.0.0.0/8"]
    request = request_from("10.0.0.2", "1.2.3.4, 198.51.100.9, 10.0.0.3")
    assert client_address(request) == "198.51.100.9"
    # Not from a trusted proxy: the header is not believed at all.
    assert client_address(request_from("203.0.113.7", "1.2.3.4")) == "203.0.113.7"
    # A garbage hop is no address.
    assert client_address(request_from("10.0.0.2", "not-an-ip")) is None


def test_a_made_up_forwarded_header_does_not_reset_the_submission_throttle(
    api, fio, monkeypatch, settings
):
    settings.NUM_PROXIES, settings.TRUSTED_PROXIES = 0, []
    monkeypatch.setattr(SubmissionAddressThrottle, "rate", "2/hour", raising=False)
    good = make_bundle(fio)
    statuses = []
    for i in range(3):
        doc = copy.deepcopy(good)
        doc["bundle_id"] = str(uuid.uuid4())
        response = api.post(
            "/api/v1/submissions/",
            doc,
            format="json",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}",
        )
        statuses.append(response.status_code)
    assert statuses == [202, 202, 429]
    assert Submission.objects.count() == 2
    assert Submission.objects.filter(remote_addr="127.0.0.1").count() == 2


def test_anonymous_reads_are_throttled_per_address(api, monkeypatch):
    monkeypatch.setattr(AnonReadThrottle, "rate", "3/hour", raising=False)
    statuses = [api.get("/api/v1/runs/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    body = api.get("/api/v1/vocabularies/")
    assert body.status_code == 429
    assert int(body["Retry-After"]) > 0
    assert body.json()["errors"][0]["code"] == "throttled"


def test_signed_in_reads_are_not_counted_as_anonymous(alice, monkeypatch):
    from tests.api.conftest import token_client

    monkeypatch.setattr(AnonReadThrottle, "rate", "1/hour", raising=False)
    client = token_client(alice)
    assert [client.get("/api/v1/runs/").status_code for _ in range(3)] == [200] * 3


def test_saving_comparisons_is_throttled_in_the_api_and_on_the_page(
    fio, alice, monkeypatch
):
    from tests.api.conftest import token_client

    monkeypatch.setattr(ComparisonSaveThrottle, "rate", "2/hour", raising=False)
    run = store_bundle(make_bundle(fio), owner=alice)
    api = token_client(alice)
    first = api.post("/api/v1/comparisons/", {"runs": [run.pk]}, format="json")
    assert first.status_code == 201
    page = Client()
    page.force_login(alice)
    assert page.post("/compare/save/", {"runs": str(run.pk)}).status_code == 302
    # The third save, by either door, is refused: one count for both.
    assert page.post("/compare/save/", {"runs": str(run.pk)}).status_code == 429
    again = api.post("/api/v1/comparisons/", {"runs": [run.pk]}, format="json")
    assert again.status_code == 429
    assert Comparison.objects.count() == 2


def test_sign_in_is_refused_after_too_many_failures(django_user_model, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    django_user_model.objects.create_user("carol", password="right-horse-battery")
    client = Client()
    for _ in range(3):
        response = client.post(
            "/accounts/login/", {"username": "carol", "password": "wrong"}
        )
        assert response.status_code == 200  # the form again, with its error
    # Now even the right password is not tried: 429, and no session.
    response = client.post(
        "/accounts/login/", {"username": "carol", "password": "right-horse-battery"}
    )
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # Another user name from the same address is refused too (per address).
    other = client.post("/accounts/login/", {"username": "dave", "password": "x"})
    assert other.status_code == 429


def test_a_good_sign_in_still_works_below_the_limit(django_user_model, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    django_user_model.objects.create_user("erin", password="right-horse-battery")
    client = Client()
    client.post("/accounts/login/", {"username": "erin", "password": "wrong"})
    response = client.post(
        "/accounts/login/", {"username": "erin", "password": "right-horse-battery"}
    )
    assert response.status_code == 302
    assert client.session["_auth_user_id"]


def test_a_stranger_cannot_lock_a_user_out_of_their_own_browser(
    django_user_model, settings
):
    """OWASP's device cookies: failures for a name from browsers that never
    signed in as it lock the name for those browsers only."""
    settings.LOGIN_FAILURE_LIMIT = 3
    django_user_model.objects.create_user("frank", password="right-horse-battery")
    own = Client(REMOTE_ADDR="192.0.2.10")
    good = {"username": "frank", "password": "right-horse-battery"}
    assert own.post("/accounts/login/", good).status_code == 302
    assert own.cookies["benchdb_device"].value
    own.post("/accounts/logout/")

    # A stranger, from several addresses, fails for frank until the name is
    # locked for strangers, even with the right password.
    for i in range(3):
        Client(REMOTE_ADDR=f"198.51.100.{i}").post(
            "/accounts/login/", {"username": "frank", "password": "guess"}
        )
    stranger = Client(REMOTE_ADDR="198.51.100.50")
    assert stranger.post("/accounts/login/", good).status_code == 429

    # A forged or foreign device cookie does not get past the lock.
    stranger.cookies["benchdb_device"] = "forged"
    assert stranger.post("/accounts/login/", good).status_code == 429
    other = django_user_model.objects.create_user("gina", password="pw-gina-123x")
    gina = Client(REMOTE_ADDR="203.0.113.7")
    gina.post(
        "/accounts/login/", {"username": other.username, "password": "pw-gina-123x"}
    )
    stranger.cookies["benchdb_device"] = gina.cookies["benchdb_device"].value
    assert stranger.post("/accounts/login/", good).status_code == 429

    # frank's own browser still signs in, from a new address too.
    own.defaults["REMOTE_ADDR"] = "192.0.2.99"
    response = own.post("/accounts/login/", good)
    assert response.status_code == 302
    assert own.session["_auth_user_id"]


def test_a_known_browser_has_a_failure_limit_of_its_own(django_user_model, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    django_user_model.objects.create_user("hana", password="right-horse-battery")
    good = {"username": "hana", "password": "right-horse-battery"}
    browser = Client(REMOTE_ADDR="192.0.2.20")
    assert browser.post("/accounts/login/", good).status_code == 302
    browser.post("/accounts/logout/")
    for i in range(3):  # a new address each time: only the device counts
        browser.defaults["REMOTE_ADDR"] = f"192.0.2.{30 + i}"
        browser.post("/accounts/login/", {"username": "hana", "password": "wrong"})
    browser.defaults["REMOTE_ADDR"] = "192.0.2.40"
    assert browser.post("/accounts/login/", good).status_code == 429
    # Strangers were not counted against hana's name by those failures...
    fresh = Client(REMOTE_ADDR="192.0.2.41")
    assert fresh.post("/accounts/login/", good).status_code == 302


class _Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _throttle(rate: str, clock: _Clock) -> AnonReadThrottle:
    throttle = AnonReadThrottle()
    throttle.rate = rate
    throttle.num_requests, throttle.duration = throttle.parse_rate(rate)
    throttle.timer = clock
    return throttle


def test_a_throttle_counts_a_sliding_hour_in_two_numbers(settings):
    """The limit holds over any hour, not per clock hour: at the start of a
    new window the previous one's requests still count, fading as the hour
    slides past them; a refused client is told how long to wait, and is let
    in once that time has passed, not before."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.cache import cache

    cache.clear()
    request = request_from("192.0.2.7")
    request.user = AnonymousUser()
    clock = _Clock(7200.0 * 1000 + 1800.0)  # half-way through a window

    def ask() -> tuple[bool, AnonReadThrottle]:
        throttle = _throttle("10/hour", clock)
        return throttle.allow_request(request, None), throttle

    assert all(ask()[0] for _ in range(10))
    allowed, refused = ask()
    assert not allowed
    wait = refused.wait()
    # All ten in this window: not before the next one, and then until they
    # have faded to below ten (10 * (1 - t/3600) < 10: at once).
    assert wait == pytest.approx(1800.0, abs=1e-6)
    clock.now += wait - 1.0
    assert not ask()[0]
    clock.now += 1.0 + 1e-6
    # The next window: the previous ten weigh 10 * (1 - elapsed/3600).
    assert ask()[0]
    allowed, refused = ask()
    assert not allowed  # 10 * 0.99... + 1 >= 10
    clock.now += refused.wait() + 1e-6
    assert ask()[0]
    # Each client its own count.
    other = request_from("192.0.2.8")
    other.user = AnonymousUser()
    assert _throttle("10/hour", clock).allow_request(other, None)


def test_requests_counted_at_once_are_all_counted():
    """Counted with an atomic increment: requests of several threads at the
    same moment are each counted once, so the limit is exactly the limit.
    (With the threads switching this often, DRF's list, read and written
    back whole, kept about 130 of the 400.)"""
    import sys
    import threading

    from django.contrib.auth.models import AnonymousUser
    from django.core.cache import cache

    cache.clear()
    clock = _Clock(3600.0 * 500)  # the start of a window: nothing before
    request = request_from("198.51.100.3")
    request.user = AnonymousUser()
    allowed = []
    barrier = threading.Barrier(8)

    def client():
        barrier.wait()
        for _ in range(50):
            allowed.append(_throttle("1000/hour", clock).allow_request(request, None))

    threads = [threading.Thread(target=client) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert allowed == [True] * 400
    throttle = _throttle("1000/hour", clock)
    throttle.allow_request(request, None)
    assert throttle.counts == (0, 400)
