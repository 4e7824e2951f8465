"""The embedded broker: kombu's filesystem transport, woken by its own acks.

kombu's virtual transports (the filesystem one among them) poll: whenever
``drain_events`` cannot take a message it sleeps ``polling_interval``.  That
includes the case where the queue is full but the worker may not take more:
with late acks and a prefetch of one message per process, a worker process
that finishes a task has to wait for the main process's next poll before it
gets another.  Measured with real bundles (``python -m bench --ingest``), the
worker's processes sat idle 8-18 % of the time at a 10 ms interval, about 8 ms
per task: that, not CPU, was the gap to Redis, whose event loop takes the next
message as soon as the ack frees a slot.

Here an ack (or a reject) wakes the waiting ``drain_events`` at once.  The
acks come from another thread of the same process (the prefork pool's result
handler, since this transport has no asynchronous event loop), so a
``threading.Event`` is enough.  New messages from other processes (the web
server) are still found by polling, which only matters when the queue was
empty: it adds at most ``polling_interval`` of latency, not a cap on
throughput.
"""

from __future__ import annotations

import threading
from time import monotonic

from kombu.transport import filesystem


class Channel(filesystem.Channel):
    def basic_ack(self, delivery_tag, multiple=False):
        super().basic_ack(delivery_tag, multiple=multiple)
        self.connection.wake()

    def basic_reject(self, delivery_tag, requeue=False):
        super().basic_reject(delivery_tag, requeue=requeue)
        self.connection.wake()


class Transport(filesystem.Transport):
    """``filesystem://`` whose consumer waits on its acks, not only a timer."""

    Channel = Channel

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        self._woken = threading.Event()

    def wake(self) -> None:
        self._woken.set()

    def drain_events(self, connection, timeout=None):
        """kombu's virtual ``drain_events``, with the sleep between two polls
        cut short by an ack."""
        time_start = monotonic()
        get = self.cycle.get
        polling_interval = self.polling_interval
        if timeout and polling_interval and polling_interval > timeout:
            polling_interval = timeout
        while True:
            # Cleared before looking, so an ack that lands after an empty
            # look still ends the wait below.
            self._woken.clear()
            try:
                get(self._deliver, timeout=timeout)
            except filesystem.Empty:
                if timeout is not None and monotonic() - time_start >= timeout:
                    raise TimeoutError() from None
                if polling_interval is not None:
                    self._woken.wait(polling_interval)
            else:
                return
