"""The embedded broker (benchdb/broker.py): an ack ends the wait for the next
message, so a worker holding its prefetch does not sleep a polling interval
before it may take another."""

import threading
import uuid

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from benchdb import broker


def connection(tmp_path, polling_interval: float) -> Connection:
    folders = {name: tmp_path / name for name in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir(exist_ok=True)
    return Connection(
        "filesystem://",
        transport=broker.Transport,
        transport_options={
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "processed_folder": str(folders["processed"]),
            "control_folder": str(folders["control"]),
            "polling_interval": polling_interval,
        },
    )


def test_the_settings_use_it_for_the_embedded_broker(settings):
    if settings.CELERY_BROKER_URL != "filesystem://":
        pytest.skip("this session's broker is not the embedded one")
    from benchdb.celery import app

    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, broker.Transport)


@pytest.mark.parametrize("settle", ["ack", "reject"])
def test_an_ack_ends_the_wait_of_a_full_prefetch(tmp_path, settle):
    # kombu keeps its bindings per process, whatever the folder: a name of
    # its own for each test.
    name = f"q{uuid.uuid4().hex}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    # An hour between polls: kombu's own transport, once it found nothing it
    # may take, would sleep that long.
    with connection(tmp_path, polling_interval=3600) as conn:
        channel = conn.channel()
        producer = Producer(channel)
        for n in (1, 2):
            producer.publish(
                {"n": n}, exchange=queue.exchange, routing_key=name, declare=[queue]
            )
        received = []
        consumer = Consumer(
            channel, [queue], callbacks=[lambda body, msg: received.append((body, msg))]
        )
        consumer.qos(prefetch_count=1)
        with consumer:
            conn.drain_events(timeout=5)
            # (Two messages sent within a millisecond come in either order.)
            assert len(received) == 1
            # Prefetch full: nothing more until the first is settled...
            with pytest.raises(TimeoutError):
                conn.drain_events(timeout=0.2)
            # ...which happens in another thread (in a worker, the pool's
            # result handler) while the consumer waits without a timeout.
            drain = threading.Thread(target=conn.drain_events, daemon=True)
            drain.start()
            drain.join(0.3)
            getattr(received[0][1], settle)()
            drain.join(60)
            assert not drain.is_alive(), "the ack did not end the wait"
        assert sorted(body["n"] for body, _ in received) == [1, 2]
