"""A bounded, per-process memo of answers that depend only on their key.

``compare.comparison`` keeps its answers here (``memoized``): a comparison
is a function of one record, its ``Inputs`` (the compared runs' labels, the
ids of the results read, whose values never change once stored, and the few
settings it takes), which is its key, so an answer found under its key is
the answer that computing it again would give.  Nothing is ever
invalidated, only evicted: a change to any input is a new key, and the old
one ages out.

Per process and in memory (no serialisation: the answer is the object
itself), so each web worker computes a comparison once; a key read on
every request makes the memo safe across processes and database writes
without a message between them.  Bounded by a cost (``put``'s ``cost``,
the answer's size in whatever unit the caller counts) and evicted least
recently used first.  Answers are shared between requests and must not be
changed by those who read them (tests/api/test_comparison_memo.py holds
every reader of a comparison to that).

What a reader makes of a kept answer, the same every time (the API's JSON
of a comparison), can be kept with it (``derived``): found by the answer
itself, kept while the answer is and evicted with it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class Memo:
    """A least-recently-used map bounded by the total cost of its values."""

    def __init__(self, budget: int):
        self.budget = budget
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        # The key of each kept value by the value's identity (``derived``),
        # and what was derived from it, by name.
        self._keys: dict[int, Hashable] = {}
        self._derived: dict[Hashable, dict[str, object]] = {}
        self._cost = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: Hashable):
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found[0]

    def put(self, key: Hashable, value: object, cost: int) -> None:
        """Keep ``value`` under ``key``, evicting the least recently used
        until the total cost is within the budget; a value that alone costs
        more than the budget (or any, with a budget of 0) is not kept."""
        if cost > self.budget:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._cost -= old[1]
                self._forget(key, old[0])
            self._items[key] = (value, cost)
            self._keys[id(value)] = key
            self._cost += cost
            while self._cost > self.budget:
                dropped_key, (dropped, dropped_cost) = self._items.popitem(last=False)
                self._cost -= dropped_cost
                self._forget(dropped_key, dropped)
                self.evictions += 1

    def _forget(self, key: Hashable, value: object) -> None:
        if self._keys.get(id(value)) == key:
            del self._keys[id(value)]
        self._derived.pop(key, None)

    def derived(self, value: object, name: str, make: Callable[[], object]):
        """``make()``, kept under ``name`` with ``value`` while ``value`` is
        kept here (the very object ``get`` gives, found by its identity) and
        given again; for any other value, made every time.  ``make`` must
        depend on ``value`` only, as the value does on its key.  Not counted
        in the budget: the caller's ``cost`` counts it with its value."""
        with self._lock:
            key = self._keys.get(id(value))
            if key is None:
                found = None
            else:
                found = self._derived.get(key, {}).get(name)
        if found is not None:
            return found
        made = make()
        if key is not None:
            with self._lock:
                # Still the same value under its key (not evicted meanwhile).
                entry = self._items.get(key)
                if entry is not None and entry[0] is value:
                    self._derived.setdefault(key, {})[name] = made
        return made

    def clear(self) -> None:
        """Forget every value and the counts of hits, misses and evictions."""
        with self._lock:
            self._items.clear()
            self._keys.clear()
            self._derived.clear()
            self._cost = 0
            self.hits = self.misses = self.evictions = 0

    @property
    def cost(self) -> int:
        return self._cost

    def __len__(self) -> int:
        return len(self._items)


def memoized(
    kept: Memo,
    cost: Callable[[object], int],
    budget: Callable[[], int] | None = None,
):
    """Keep the answers of a pure function of one hashable argument in
    ``kept``, under that argument: its key is its input by construction, so
    a change to anything it is computed from is a new key.  ``cost`` sizes
    an answer; ``budget``, when given, is read before each call (a setting
    that tests change), and a budget of 0 computes every time."""

    def wrap(function):
        @functools.wraps(function)
        def answer(argument):
            if budget is not None:
                kept.budget = budget()
            if not kept.budget:
                return function(argument)
            found = kept.get(argument)
            if found is None:
                found = function(argument)
                kept.put(argument, found, cost(found))
            return found

        answer.memo = kept
        return answer

    return wrap
