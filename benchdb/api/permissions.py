"""Who may change a run: its owner (account or anonymous owner key), or staff
for moderation only.

Reading is decided by querysets (``Run.objects.readable_by``); these classes
decide writes.
"""

from __future__ import annotations

from rest_framework import permissions

OWNER_KEY_HEADER = "HTTP_X_OWNER_KEY"


def owner_key(request) -> str:
    return request.META.get(OWNER_KEY_HEADER, "").strip()


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
