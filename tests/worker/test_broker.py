"""kombu's Redis channels keep one client each (worker/library_internals.py), and still carry messages."""

from __future__ import annotations

from kombu import Connection

from worker import library_internals


def test_a_channel_reuses_its_client_until_its_pool_changes(redis_url, keys):
    library_internals.install_broker_client()
    library_internals.install_broker_client()  # idempotent
    with Connection(redis_url) as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second and first.connection_pool is channel.pool
        channel._pool = None  # as kombu does when it lets the pool go
        with channel.conn_or_acquire() as third:
            assert third is not first and third.connection_pool is channel.pool


def test_messages_go_through_with_the_shared_client(redis_url, keys):
    library_internals.install_broker_client()
    with Connection(redis_url) as connection:
        queue = connection.SimpleQueue(keys.prefix + "broker-test")
        for i in range(3):
            queue.put({"n": i})
        got = []
        for _ in range(3):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            message.ack()
        queue.close()
    assert got == [0, 1, 2]
