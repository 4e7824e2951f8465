"""The cyclic garbage collector, paused where a bundle is handled."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block (as it was after).

    Decoding a bundle, parsing its raw outputs and building its rows make
    tens of thousands of dicts and lists, none in a cycle; every few hundred
    of them set off a collection, and the older generations' walk the whole
    heap of a web or worker process.  Measured with bench/profile_ingest.py
    (``--no-gc`` for the collector's whole share): about 15 ms of an
    upload's CPU in the API and 4 to 13 ms of the ingest task's, on the
    bench's standard bundles.  What the block leaves for the collector is
    collected after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
