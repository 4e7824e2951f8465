"""Who may change a run: its owner (account or anonymous owner key), or staff
for moderation only.

Reading is decided by querysets (``Run.objects.readable_by``); these classes
decide writes.
"""

from __future__ import annotations

import base64
import secrets

import orjson
from django.utils.crypto import salted_hmac
from rest_framework import permissions

from benchdb.results.models import hash_secret

OWNER_KEY_HEADER = "HTTP_X_OWNER_KEY"


def owner_key(request) -> str:
    return request.META.get(OWNER_KEY_HEADER, "").strip()


def bundle_owner_key(doc: dict) -> str:
    """The owner key of an anonymous upload of this bundle: an HMAC (with
    ``SECRET_KEY``) of its canonical JSON, so that a resend of the very same
    bundle, whose first answer was lost, gets the same key again, and nobody
    without the bundle or the key can compute it."""
    canonical = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    digest = salted_hmac("benchdb.owner-key", canonical, algorithm="sha256").digest()
    return "bdo_" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def holds_owner_key(row, key: str) -> bool:
    """Whether ``key`` is the owner key of ``row`` (a run or submission)."""
    return bool(row.owner_key_hash) and secrets.compare_digest(
        row.owner_key_hash, hash_secret(key)
    )


def is_owner(request, run) -> bool:
    """The signed-in owner, or whoever presents the run's owner key."""
    user = request.user
    if user and user.is_authenticated and run.owner_id == user.pk:
        return True
    key = owner_key(request)
    return bool(key) and run.check_owner_key(key)


class IsRunOwnerOrReadOnly(permissions.BasePermission):
    message = "Only the run's owner (signed in, or with its owner key) may change it."

    def has_object_permission(self, request, view, obj) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return is_owner(request, obj)


class IsStaff(permissions.BasePermission):
    message = "Only staff may moderate runs."

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_staff)


class TokensBySessionOnly(permissions.BasePermission):
    """Tokens are created and revoked signed in, never with a token: a leaked
    token must not mint tokens that outlive its revocation, nor revoke its
    owner's other tokens."""

    message = (
        "Tokens are created and revoked signed in (the /submit/ page or a "
        "session), not with an API token."
    )

    def has_permission(self, request, view) -> bool:
        return request.method in permissions.SAFE_METHODS or request.auth is None
