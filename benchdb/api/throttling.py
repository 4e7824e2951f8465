"""Throttles, and the client address they count by.

The address is the deployment's to define (docs/deploy.md, "Client address
and throttles"): ``REMOTE_ADDR`` unless proxies are declared.  With
``TRUSTED_PROXIES`` (addresses or networks), ``X-Forwarded-For`` is walked
from the right past every trusted hop; with ``NUM_PROXIES = n``, the n-th
address from its right is the client.  A client's own ``X-Forwarded-For``
entries are never believed beyond that, so a made-up header cannot reset a
counter.

- submissions: per token (or account) and per client address, the
  ``submissions`` rate, so one token cannot flood the queue from many
  machines and one machine cannot with many tokens or anonymously;
- reads: anonymous requests per address, the ``anon`` rate (every API view);
- comparison saves: per account or address, the ``comparisons`` rate;
- sign-ups and password-reset mails: per address, the ``accounts`` rate;
- logins: failed sign-ins per address and per user name (``login_allowed``)
  on every sign-in path (``LoginLimitBackend``: the sign-in page, the admin's),
  with OWASP's device cookies so that the per-name limit cannot lock a user
  out: a browser that has signed in as a name before carries a signed cookie
  naming it, and its failures count against that cookie, not against the
  name.  A stranger's failures still lock the name, for strangers only.
"""

from __future__ import annotations

import ipaddress
import secrets

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle


def _networks() -> list:
    return [
        ipaddress.ip_network(item, strict=False)
        for item in getattr(settings, "TRUSTED_PROXIES", [])
    ]


def _trusted(address: str, networks: list) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_address(request) -> str | None:
    """The client's IP address as the deployment's proxy settings define it."""
    meta = getattr(request, "META", {})
    remote = (meta.get("REMOTE_ADDR") or "").strip() or None
    forwarded = [
        a.strip() for a in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()
    ]
    networks = _networks()
    if networks:
        address = remote
        while address and _trusted(address, networks) and forwarded:
            address = forwarded.pop()
        return _valid(address)
    hops = getattr(settings, "NUM_PROXIES", 0)
    if hops and forwarded:
        return _valid(forwarded[-min(hops, len(forwarded))])
    return _valid(remote)


def _valid(address: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address(address)) if address else None
    except ValueError:
        return None


class ClientAddressMixin:
    def get_ident(self, request):
        return client_address(request) or "unknown"


class WindowCounterThrottle(SimpleRateThrottle):
    """DRF's ``SimpleRateThrottle`` (same rates, keys and scopes), counted in
    two numbers per client instead of a list of every request's time.

    DRF keeps each client's request times of the last period in one cache
    entry, read, trimmed, extended and written back whole by every request:
    at the anonymous rate (2,000/hour) up to 2,000 floats pickled both ways
    per request, sent to Redis and back, and two processes writing back
    their own copies lose each other's requests.
    Here a client has a counter per fixed window of the period, incremented
    atomically (``cache.incr``, atomic in Redis), and a request is allowed
    while the sliding-window estimate, the previous window's count weighted
    by how much of it the sliding period still covers plus the current
    window's count, is below the limit (the "sliding window counter" of
    Cloudflare's rate limiting).  A refused request is not counted, as in
    DRF.  ``wait`` is when the estimate falls below the limit.
    """

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = now = self.timer()
        window = int(now // self.duration)
        current, previous = f"{self.key}:{window}", f"{self.key}:{window - 1}"
        counts = self.cache.get_many([current, previous])
        self.counts = counts.get(previous, 0), counts.get(current, 0)
        self.elapsed = now - window * self.duration
        if self._estimate(self.elapsed) >= self.num_requests:
            return self.throttle_failure()
        # Kept two periods: the next window still weighs this one.
        if not self.cache.add(current, 1, 2 * self.duration):
            try:
                self.cache.incr(current)
            except ValueError:  # expired between add and incr
                self.cache.set(current, 1, 2 * self.duration)
        return True

    def _estimate(self, elapsed: float) -> float:
        previous, current = self.counts
        return previous * (1.0 - elapsed / self.duration) + current

    def wait(self):
        """Seconds until a request would be allowed again."""
        previous, current = self.counts
        limit, duration = self.num_requests, self.duration
        if current >= limit:
            # Not before the next window, and then until this window's
            # count, now the previous one, has faded enough.
            fade = duration * (1.0 - limit / current) if current else 0.0
            return duration - self.elapsed + fade
        if previous <= 0:
            return 0.0
        # previous * (1 - t / duration) + current < limit
        return max(0.0, duration * (1.0 - (limit - current) / previous) - self.elapsed)


class SubmissionTokenThrottle(WindowCounterThrottle):
    scope = "submissions"

    def get_cache_key(self, request, view):
        if request.auth is not None and hasattr(request.auth, "pk"):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None  # anonymous: the address throttle applies
        return self.cache_format % {"scope": self.scope, "ident": ident}


class SubmissionAddressThrottle(ClientAddressMixin, WindowCounterThrottle):
    scope = "submissions"
    cache_format = "throttle_%(scope)s_addr_%(ident)s"

    def get_cache_key(self, request, view):
        return self.cache_format % {
            "scope": self.scope,
            "ident": self.get_ident(request),
        }


class AnonReadThrottle(ClientAddressMixin, WindowCounterThrottle, AnonRateThrottle):
    """Anonymous API requests per client address (the ``anon`` rate; DRF's
    ``AnonRateThrottle`` key: signed-in requests are not counted)."""


class ComparisonSaveThrottle(ClientAddressMixin, WindowCounterThrottle):
    """Saved comparisons per account, or per address when anonymous."""

    scope = "comparisons"

    def get_cache_key(self, request, view):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            ident = f"user-{user.pk}"
        else:
            ident = f"addr-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


def comparison_save_allowed(request) -> bool:
    """The page's save form counts against the same throttle as the API."""
    return ComparisonSaveThrottle().allow_request(request, None)


class AccountThrottle(ClientAddressMixin, WindowCounterThrottle):
    """Sign-ups and password-reset mails asked for, per address: each makes
    an account or sends a mail to whatever address was typed."""

    scope = "accounts"

    def get_cache_key(self, request, view):
        return self.cache_format % {
            "scope": self.scope,
            "ident": self.get_ident(request),
        }


def account_form_allowed(request) -> bool:
    return AccountThrottle().allow_request(request, None)


# Logins ----------------------------------------------------------------------


DEVICE_COOKIE = "benchdb_device"
_DEVICE_SALT = "benchdb.login-device"
DEVICE_COOKIE_MAX_AGE_S = 365 * 24 * 3600


def _name(username: str) -> str:
    return username.strip().lower()[:150]


def _device(request, username: str) -> str | None:
    """The nonce of this browser's device cookie if it was issued for this
    user name (signed by the server, so it cannot be made up), else None."""
    value = request.COOKIES.get(DEVICE_COOKIE)
    if not value:
        return None
    try:
        data = signing.loads(value, salt=_DEVICE_SALT, max_age=DEVICE_COOKIE_MAX_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("u") != _name(username):
        return None
    nonce = data.get("n")
    return nonce if isinstance(nonce, str) else None


def _login_keys(request, username: str) -> list[str]:
    keys = [f"login-fail-addr-{client_address(request) or 'unknown'}"]
    device = _device(request, username)
    if device:
        keys.append(f"login-fail-device-{device}")
    else:
        keys.append(f"login-fail-user-{_name(username)}")
    return keys


def login_allowed(request, username: str) -> bool:
    """False once this address, or this user name from browsers it has not
    signed in from (or this browser, if it has), failed too often lately."""
    limit = settings.LOGIN_FAILURE_LIMIT
    return all(cache.get(k, 0) < limit for k in _login_keys(request, username))


class LoginLimitBackend(ModelBackend):
    """Django's user-and-password check behind the sign-in limits, so that
    every sign-in path has them: the sign-in page, the admin's, and any added
    later.  Over the limit even the right password is refused; the failure
    is counted by ``count_failure`` (Django's ``user_login_failed``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is not None and username is not None:
            if not login_allowed(request, username):
                raise PermissionDenied("too many failed sign-ins")
        return super().authenticate(request, username, password, **kwargs)


@receiver(user_login_failed, dispatch_uid="benchdb.login_failed")
def count_failure(sender, credentials, request=None, **kwargs) -> None:
    if request is not None:
        login_failed(request, credentials.get("username") or "")


def login_failed(request, username: str) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_S
    for key in _login_keys(request, username):
        cache.add(key, 0, window)
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, 1, window)


def remember_device(request, response, username: str) -> None:
    """After a good sign-in: mark this browser as one the user signs in from."""
    value = signing.dumps(
        {"u": _name(username), "n": secrets.token_urlsafe(16)}, salt=_DEVICE_SALT
    )
    response.set_cookie(
        DEVICE_COOKIE,
        value,
        max_age=DEVICE_COOKIE_MAX_AGE_S,
        # Secure as the session cookie is (on when DEBUG is off), also when
        # TLS ended at a proxy that does not say so.
        secure=request.is_secure() or settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
