"""The relay against a real Redis: confirmed subscriptions, ordering checks, bounded streams."""

from __future__ import annotations

import json

import redis

from api.relay import Relay
from core import events
from core.events import Kind
from tests.waiting import wait_until


def publish(url: str, channel: str, body: dict) -> None:
    client = redis.Redis.from_url(url)
    client.publish(channel, json.dumps(body))
    client.close()


def test_a_subscription_is_live_when_subscribe_returns(redis_url, keys):
    relay = Relay(redis_url)
    channel = keys.execution_events("r1")
    stream = relay.subscribe(channel)
    publish(redis_url, channel, {"s": 0, "lines": "x\n"})  # published right after: not lost
    assert stream.get(timeout=5) == events.lines("x\n", seq=0)
    relay.unsubscribe(stream)
    assert relay.open_streams() == 0


def test_a_gap_in_sequence_numbers_is_told_as_missed_with_the_event_after_it(redis_url, keys):
    relay = Relay(redis_url)
    channel = keys.execution_events("r2")
    stream = relay.subscribe(channel)
    publish(redis_url, channel, {"s": 1, "lines": "x\n"})
    event = stream.get(timeout=5)
    assert event.kind == Kind.MISSED and event.body.seq == 1
    relay.unsubscribe(stream)


def test_a_dropped_connection_is_made_again_and_each_open_stream_subscribed_and_told(
    redis_url, redis_client, keys
):
    relay = Relay(redis_url)
    channels = [keys.execution_events(f"r{i}") for i in range(3)]
    streams = [relay.subscribe(channel) for channel in channels]
    host, port = relay._shards[""].conn._sock.getsockname()[:2]
    assert redis_client.client_kill(f"{host}:{port}")
    for stream in streams:
        event = stream.get(timeout=5)
        assert event is not None and event.kind == Kind.MISSED and event.body is None
    for channel, stream in zip(channels, streams, strict=True):
        publish(redis_url, channel, {"s": 0, "lines": "again\n"})
        assert stream.get(timeout=5).body == "again\n"
    for stream in streams:
        relay.unsubscribe(stream)


def test_a_stream_nobody_reads_is_cut_off_at_its_limit(redis_url, keys):
    relay = Relay(redis_url, max_stream_bytes=10_000)
    channel = keys.execution_events("r3")
    stream = relay.subscribe(channel)
    for seq in range(100):  # ~100 KB for a reader that never comes
        publish(redis_url, channel, {"s": seq, "lines": "y" * 1000})
    got = []
    while (event := stream.get(timeout=2)) is not None:
        got.append(event)
        if event.kind == Kind.BROKEN:
            break
    assert "not reading" in got[-1].reason
    assert sum(len(e.body) for e in got if e.kind == Kind.LINES) <= 10_000
    assert relay.open_streams() == 0  # unsubscribed: nothing more is buffered for it


def test_a_message_that_is_not_valid_ends_only_its_own_stream(redis_url, keys):
    relay = Relay(redis_url)
    bad, good = keys.execution_events("r4"), keys.execution_events("r5")
    bad_stream, good_stream = relay.subscribe(bad), relay.subscribe(good)
    client = redis.Redis.from_url(redis_url)
    client.publish(bad, b"\xff\xfe not utf-8")  # no worker writes this; the relay must survive it
    client.publish(bad, b"[1, 2]")
    client.publish(good, json.dumps({"s": 0, "lines": "ok\n"}))
    client.close()
    assert "could not be read" in bad_stream.get(timeout=5).reason
    assert good_stream.get(timeout=5) == events.lines("ok\n", seq=0)
    relay.unsubscribe(bad_stream)
    relay.unsubscribe(good_stream)


def numsub(client: redis.Redis, channels: list[str]) -> list[int]:
    counts = client.execute_command("PUBSUB", "NUMSUB", *channels)
    return counts[1::2]


def test_an_ended_streams_channel_is_unsubscribed_in_redis_even_with_no_later_subscription(
    redis_url, keys
):
    """Invariant 2: unsubscribing always happens. A channel left goes out with the next
    subscription's write or, when none comes, on its own within a bound."""
    client = redis.Redis.from_url(redis_url)
    relay = Relay(redis_url)
    channels = [keys.execution_events(f"u{i}") for i in range(5)]
    streams = [relay.subscribe(c) for c in channels]
    assert numsub(client, channels) == [1] * 5
    for stream in streams:
        relay.unsubscribe(stream)
    wait_until(lambda: numsub(client, channels) == [0] * 5, 5, "the channels unsubscribed")
    client.close()


def test_a_channel_left_then_taken_again_before_the_unsubscribe_went_out_stays_subscribed(
    redis_url, keys
):
    """An editor's push channel reopened at once: the UNSUBSCRIBE still waiting goes out before
    the new SUBSCRIBE, in the same write, and the new stream hears what is published."""
    client = redis.Redis.from_url(redis_url)
    relay = Relay(redis_url)
    channel = keys.push("p1")
    relay.unsubscribe(relay.subscribe(channel, ordered=False))
    again = relay.subscribe(channel, ordered=False)
    wait_until(lambda: not relay._shards[""].leaving, 5, "the waiting unsubscribe sent")
    assert numsub(client, [channel]) == [1]
    publish(redis_url, channel, {"type": "ping", "data": {}})
    assert again.get(timeout=5) is not None
    relay.unsubscribe(again)
    client.close()
