"""The shared cache (Redis), degrading to this process's memory when down.

benchdb's cache holds only counters: the API's throttles and the sign-in
failure limits (``api/throttling.py``).  With ``CACHE_URL`` on the compose
Redis, which is the broker's too, an unreachable Redis made every throttled
request raise: a Redis restart answered 500 to every API read and refused
uploads unstored.  This backend is Django's ``RedisCache`` whose operations,
when Redis cannot be reached, log a warning and fall back to a local memory
cache of this process for ``RETRY_AFTER_S`` before trying Redis again: the
limits keep counting (per process, as without ``CACHE_URL``) instead of
failing, and nothing waits on a dead server more than once per interval.
"""

from __future__ import annotations

import functools
import logging
import time

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

# Seconds between attempts to reach Redis again after it failed.
RETRY_AFTER_S = 5.0
# A request waits at most this long for Redis (connect, then each reply):
# a counter is not worth holding a web worker for.
SOCKET_TIMEOUT_S = 0.5
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
OPERATIONS = (
    "add get set touch delete get_many has_key incr decr set_many delete_many clear"
).split()


class FailSoftRedisCache(RedisCache):
    """``RedisCache`` that counts in local memory while Redis is unreachable."""

    def __init__(self, server, params):
        options = dict(params.get("OPTIONS") or {})
        options.setdefault("socket_connect_timeout", SOCKET_TIMEOUT_S)
        options.setdefault("socket_timeout", SOCKET_TIMEOUT_S)
        super().__init__(server, {**params, "OPTIONS": options})
        self.local = LocMemCache(f"benchdb-fallback-{id(self)}", {})
        self.down_until = 0.0

    def _unreachable(self, exc: Exception) -> None:
        if self.down_until == 0.0:
            log.warning(
                "cache unreachable (%s): limits count in this process's memory "
                "until it answers again",
                exc,
            )
        self.down_until = time.monotonic() + RETRY_AFTER_S

    def _back(self) -> None:
        if self.down_until:
            log.warning("cache reachable again")
            self.down_until = 0.0


def _fail_soft(name: str):
    shared = getattr(RedisCache, name)

    @functools.wraps(shared)
    def operation(self, *args, **kwargs):
        if self.down_until and time.monotonic() < self.down_until:
            return getattr(self.local, name)(*args, **kwargs)
        try:
            result = shared(self, *args, **kwargs)
        except UNREACHABLE as exc:
            self._unreachable(exc)
            return getattr(self.local, name)(*args, **kwargs)
        self._back()
        return result

    return operation


for _name in OPERATIONS:
    setattr(FailSoftRedisCache, _name, _fail_soft(_name))
