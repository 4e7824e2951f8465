"""Submission throttles: per token (or account) and per client address.

Both apply to ``POST /api/v1/submissions/`` with the ``submissions`` rate, so
one token cannot flood the queue from many machines and one machine cannot
flood it with many tokens or anonymously.
"""

from __future__ import annotations

from rest_framework.throttling import SimpleRateThrottle


class SubmissionTokenThrottle(SimpleRateThrottle):
    scope = "submissions"

    def get_cache_key(self, request, view):
        if request.auth is not None and hasattr(request.auth, "pk"):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None  # anonymous: the address throttle applies
        return self.cache_format % {"scope": self.scope, "ident": ident}


class SubmissionAddressThrottle(SimpleRateThrottle):
    scope = "submissions"
    cache_format = "throttle_%(scope)s_addr_%(ident)s"

    def get_cache_key(self, request, view):
        return self.cache_format % {
            "scope": self.scope,
            "ident": self.get_ident(request),
        }
