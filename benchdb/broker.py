"""The embedded broker: kombu's filesystem transport, made safe for many
processes and woken by its own acks.

**Nothing half-written is read, nothing taken is lost.**  kombu's transport
creates a message file in the queue folder and writes it afterwards, and a
consumer moves and reads it without a lock, so under load a worker read an
empty file and died (``JSONDecodeError`` in ``_get``: kombu issue 1551); the
table of each exchange's queues (read on every publish) is truncated and
rewritten in place the same way.  A consumer also moved each message out of
the folder to the system's temporary directory (a copy, then a delete, when
that is another filesystem: two consumers could both take it) and forgot it
there: a worker killed before its ack lost the message.  Here:

- a message is written under a hidden temporary name in the queue folder and
  renamed into the queue once complete (a rename within one folder is atomic:
  a reader sees the whole file or nothing);
- a consumer takes a message by renaming it into the ``held`` folder under
  its own process id (one rename: exactly one consumer wins, the others find
  it gone and look at the next); the file stays there until the message is
  acknowledged, rejected or put back, and a consumer that starts puts back
  the messages held by processes that no longer exist (a worker killed with
  ``kill -9``), so a message is delivered again instead of lost;
- a file that is not a whole message (a machine that lost power during a
  write) is set aside as ``held/unreadable.*`` with an error in the log, and
  the worker goes on with the next;
- each exchange's table is rewritten the same way (temporary name, rename),
  under a lock so two processes binding queues at once keep both bindings.

**Woken by its acks.**  kombu's virtual transports poll: whenever
``drain_events`` cannot take a message it sleeps ``polling_interval``.  That
includes the case where the queue is full but the worker may not take more:
with late acks and a prefetch of one message per process, a worker process
that finishes a task has to wait for the main process's next poll before it
gets another: idle time per task, not CPU, was the gap to Redis, whose event
loop takes the next message as soon as the ack frees a slot (bench/README.md,
"The embedded broker woken by its acks").  Here an ack (or a reject) wakes the
waiting ``drain_events`` at once.  The acks come from another thread of the
same process (the prefork pool's result handler, since this transport has no
asynchronous event loop), so a ``threading.Event`` is enough.  New messages
from other processes (the web server) are still found by polling, which only
matters when the queue was empty: it adds at most ``polling_interval`` of
latency, not a cap on throughput.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

UNREADABLE = "unreadable"
# A temporary file this old is a writer's that died: no write takes an hour.
ABANDONED_AFTER_S = 3600


def write_atomically(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a hidden temporary file in the same
    folder, renamed over ``path`` once complete."""
    folder, name = os.path.split(os.fspath(path))
    temporary = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class Channel(filesystem.Channel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # delivery tag -> the held file of a message not yet settled
        self._held: dict[str, str] = {}
        self._no_ack_queues: set[str] = set()
        Path(self.held_folder).mkdir(parents=True, exist_ok=True)
        self.recover_orphans()

    @property
    def held_folder(self) -> str:
        return self.transport_options.get("held_folder", "held")

    # Messages ---------------------------------------------------------------

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: whole, or not at all."""
        # kombu's name (its _size and _purge match the ending), with the
        # milliseconds padded so that names sort in the order they were sent.
        name = f"{int(monotonic() * 1000):015d}_{uuid.uuid4()}.{queue}.msg"
        try:
            write_atomically(
                os.path.join(self.data_folder_out, name), str_to_bytes(dumps(payload))
            )
        except OSError as exc:
            raise ChannelError(f"Cannot add {name!r} to the queue: {exc}") from exc

    def _get(self, queue):
        """Take the oldest message of ``queue``, held until it is settled."""
        ending = f"{queue}.msg"
        names = sorted(
            name
            for name in os.listdir(self.data_folder_in)
            if name.partition(".")[2] == ending
        )
        for name in names:
            held = os.path.join(self.held_folder, f"{os.getpid()}.{name}")
            try:
                os.rename(os.path.join(self.data_folder_in, name), held)
            except FileNotFoundError:
                continue  # another consumer took it first
            try:
                with open(held, "rb") as handle:
                    payload = loads(bytes_to_str(handle.read()))
                tag = payload["properties"]["delivery_tag"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                aside = os.path.join(self.held_folder, f"{UNREADABLE}.{name}")
                os.replace(held, aside)
                log.error(
                    "broker: %s is not a whole message (%s); set aside", aside, exc
                )
                continue
            if queue in self._no_ack_queues:
                os.unlink(held)
            else:
                self._held[tag] = held
            return payload
        raise filesystem.Empty()

    def _release(self, delivery_tag) -> None:
        held = self._held.pop(delivery_tag, None)
        if held is not None:
            try:
                os.unlink(held)
            except FileNotFoundError:
                pass

    def basic_consume(self, queue, no_ack, *args, **kwargs):
        if no_ack:
            self._no_ack_queues.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue, no_ack=False, **kwargs):
        message = super().basic_get(queue, no_ack=no_ack, **kwargs)
        if message is not None and no_ack:
            self._release(message.delivery_tag)
        return message

    def basic_ack(self, delivery_tag, multiple=False):
        super().basic_ack(delivery_tag, multiple=multiple)
        self._release(delivery_tag)
        self.connection.wake()

    def basic_reject(self, delivery_tag, requeue=False):
        super().basic_reject(delivery_tag, requeue=requeue)
        self._release(delivery_tag)
        self.connection.wake()

    def _restore(self, message):
        """Put an unsettled message back (a requeue, a channel closed with
        messages unacknowledged), then drop its held copy."""
        super()._restore(message)
        self._release(message.delivery_tag)

    def recover_orphans(self) -> int:
        """Put back in the queue every message held by a process that no
        longer exists; returns how many.  Also removes the temporary files of
        writers that died mid-write (their message was never sent: the
        sender got no answer)."""
        now = time.time()
        for name in os.listdir(self.data_folder_out):
            if name.startswith(".") and name.endswith(".tmp"):
                path = os.path.join(self.data_folder_out, name)
                try:
                    if now - os.stat(path).st_mtime > ABANDONED_AFTER_S:
                        os.unlink(path)
                except FileNotFoundError:
                    pass
        count = 0
        for name in os.listdir(self.held_folder):
            pid, _, original = name.partition(".")
            if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
                continue
            try:
                os.rename(
                    os.path.join(self.held_folder, name),
                    os.path.join(self.data_folder_in, original),
                )
            except FileNotFoundError:
                continue  # another consumer put it back first
            count += 1
        if count:
            log.warning(
                "broker: %d message(s) held by a process that died put back "
                "in the queue",
                count,
            )
        return count

    # Exchange tables (which queues each exchange delivers to) ----------------

    @contextmanager
    def _tables_lock(self):
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(self.control_folder / ".lock", "a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def get_table(self, exchange):
        file = self._exchange_file(exchange)
        try:
            text = file.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        return [filesystem.exchange_queue_t(*q) for q in loads(bytes_to_str(text))]

    def _write_table(self, exchange, queues) -> None:
        write_atomically(self._exchange_file(exchange), str_to_bytes(dumps(queues)))

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        binding = filesystem.exchange_queue_t(
            routing_key or "", pattern or "", queue or ""
        )
        with self._tables_lock():
            queues = self.get_table(exchange)
            if binding not in queues:
                queues.insert(0, binding)
                self._write_table(exchange, queues)

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args)
        binding = filesystem.exchange_queue_t(
            routing_key or "", pattern or "", queue or ""
        )
        with self._tables_lock():
            queues = self.get_table(exchange)
            if binding in queues:
                queues.remove(binding)
                self._write_table(exchange, queues)


class Transport(filesystem.Transport):
    """``filesystem://`` that never reads a half-written message, never loses
    one taken by a process that died, and whose consumer waits on its acks,
    not only a timer."""

    Channel = Channel

    @property
    def default_connection_params(self):
        # A folder has no host: kombu's virtual default ("localhost") only
        # made every connection log "No hostname was supplied".
        return {"port": self.default_port}

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
