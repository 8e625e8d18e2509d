"""The worker's outbox keeps publishing whatever one message or one batch does to it: the
thread that serves every execution of a worker must never die of one of them."""

from __future__ import annotations

import json
import threading

import redis

from worker.publisher import Outbox


def _subscriber(redis_url: str, channel: str):
    """Subscribed, and Redis has confirmed it."""
    pubsub = redis.Redis.from_url(redis_url, decode_responses=True).pubsub()
    pubsub.subscribe(channel)
    confirmation = pubsub.get_message(timeout=5)
    assert confirmation and confirmation["type"] == "subscribe"
    return pubsub


def _messages(pubsub, count: int) -> list[dict]:
    out = []
    while len(out) < count:
        message = pubsub.get_message(timeout=5)
        assert message is not None, f"only {len(out)} of {count} messages arrived"
        out.append(json.loads(message["data"]))
    return out


def test_a_lone_surrogate_in_a_chunk_is_published_as_a_json_escape(redis_url, redis_client):
    pubsub = _subscriber(redis_url, "c1")
    outbox = Outbox(redis_client)
    outbox.chunk("c1", {"type": "item", "content": "a\ud800b"})
    assert outbox.done("c1", {"status": "success"}).wait(5)
    first, last = _messages(pubsub, 2)
    assert first["lines"] == '{"type":"item","content":"a\\ud800b"}\n'
    assert json.loads(first["lines"])["content"] == "a\ud800b"
    assert last == {"s": 1, "done": {"status": "success"}}


class FailingOnce(redis.Redis):
    """A client whose first pipeline fails with something other than a RedisError."""

    failures = 1

    def pipeline(self, *args, **kwargs):
        pipe = super().pipeline(*args, **kwargs)
        if FailingOnce.failures:
            FailingOnce.failures -= 1

            def boom():
                raise RuntimeError("not a Redis error")

            pipe.execute = boom
        return pipe


def test_an_unexpected_error_in_one_batch_does_not_stop_the_next(redis_url):
    client = FailingOnce.from_url(redis_url, decode_responses=True)
    pubsub = _subscriber(redis_url, "c2")
    outbox = Outbox(client)
    lost = outbox.done("c0", {"status": "success"})
    assert lost.wait(5)  # its finisher is not left waiting on a batch that failed
    outbox.chunk("c2", {"type": "item", "content": "after"})
    assert outbox.done("c2", {"status": "success"}).wait(5)
    assert [m.get("lines") for m in _messages(pubsub, 2)][0] == (
        '{"type":"item","content":"after"}\n'
    )
    assert outbox.idle()


def test_a_dead_publisher_thread_is_started_again(redis_url, redis_client):
    pubsub = _subscriber(redis_url, "c3")
    outbox = Outbox(redis_client)
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    outbox._thread = dead  # as if it had died
    assert outbox.done("c3", {"status": "success"}).wait(5)
    assert _messages(pubsub, 1) == [{"s": 0, "done": {"status": "success"}}]
    assert outbox._thread is not dead and outbox._thread.is_alive()
