"""The streaming response's end game, with a scripted event source in front of a real Redis and
the api's real liveness checks: a quiet interval that coincides with the execution finishing
must not repeat or lose the answer, and the record's count of events tells whether a stream
that missed only the final event has the whole answer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from flask import Flask

from api.launcher import Launch
from api.liveness import LivenessChecks
from api.relay import Stream
from api.responses import Outcome, streaming_response
from core import events
from core.events import Event
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore

OUTPUT = {"AI Agent": [{"data": {"main": [[{"json": {"output": "Hello there."}}]]}}]}


class ScriptedStream:
    """Returns the scripted events in order (None: a quiet interval), numbering as the relay's
    stream does."""

    def __init__(self, script):
        self.script = list(script)
        self.next_seq = 0

    def get(self, timeout):
        event = self.script.pop(0) if self.script else None
        if event is not None and event.seq is not None:
            self.next_seq = event.seq + 1
        return event

    def ready(self):
        return None  # each scripted event comes with its own `get`


def lines(seq: int, *chunks) -> Event:
    text = "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in chunks)
    return events.lines(text, items=sum(c["type"] == "item" for c in chunks), seq=seq)


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys)


def finished(store: ExecutionStore, status: Status = Status.SUCCESS, **fields) -> None:
    record = ExecutionRecord("e1", "w1")
    store.create(record)
    running = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, running)
    final = running.next(status=status, last_node_executed="AI Agent", run_data=OUTPUT, **fields)
    assert store.finish(running, final, "").written


KEEPALIVE = 0.01


def body(store: ExecutionStore, script) -> list[dict]:
    """The NDJSON lines of a stream that reads `script` (a list, or a ScriptedStream)."""
    stream = script if isinstance(script, ScriptedStream) else ScriptedStream(script)
    launch = Launch("e1", stream)
    relay = SimpleNamespace(unsubscribe=lambda stream: None)
    settings = SimpleNamespace(keepalive_seconds=KEEPALIVE, redis_outage_seconds=30)
    outcome = Outcome(launch, store, relay, settings, LivenessChecks(store))
    with Flask(__name__).test_request_context():
        text = b"".join(streaming_response(outcome, {}).response).decode()
    return [json.loads(line) for line in text.splitlines()]


def test_last_events_arriving_after_the_record_finished_are_relayed_once(store):
    finished(store, events=3)
    script = [
        lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}),
        None,  # quiet: the check finds the record finished, its last events still on the way
        lines(1, {"type": "item", "content": "there."}, {"type": "end"}),
        events.done({"status": "success", "streamed": True}, seq=2),
    ]
    chunks = body(store, script)
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "end"]
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."


def test_a_finished_record_without_any_event_gives_the_output_once(store):
    finished(store, events=1)
    chunks = body(store, [None])
    assert [c["type"] for c in chunks] == ["begin", "item", "end"]
    assert chunks[1]["content"] == "Hello there."


def test_a_stream_that_missed_only_the_final_event_ends_without_repeating(store):
    finished(store, events=2)
    script = [
        lines(0, {"type": "begin"}, {"type": "item", "content": "Hello there."}, {"type": "end"}),
        None,
    ]
    chunks = body(store, script)
    assert [c["type"] for c in chunks] == ["begin", "item", "end"]


def test_a_lost_ending_after_streamed_text_is_an_error_not_a_repeat(store):
    finished(store, events=3)
    chunks = body(store, [lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}), None])
    assert [c["type"] for c in chunks] == ["begin", "item", "error"]
    assert "lost" in chunks[-1]["content"]


def kept(store: ExecutionStore, *kept_events: Event) -> None:
    """What the worker's outbox kept as it published (core/replay.py)."""
    key = store.keys.execution_sent("e1")
    store.client.rpush(key, *[events.encode(e) for e in kept_events])


def test_a_stream_that_missed_its_last_lines_and_final_event_gets_them_from_what_was_kept(store):
    finished(store, events=3)
    rest = lines(1, {"type": "item", "content": "there."}, {"type": "end"})
    kept(store, lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}), rest, rest)
    chunks = body(store, [lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}), None])
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "end"]
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."


def test_a_gap_is_filled_from_what_was_kept_before_the_event_after_it(store):
    finished(store, events=4)
    middle = lines(1, {"type": "item", "content": "there"})
    kept(store, middle)
    script = [
        lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}),
        events.missed(lines(2, {"type": "item", "content": "."}, {"type": "end"})),
        events.done({"status": "success", "streamed": True}, seq=3),
    ]
    chunks = body(store, script)
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "item", "end"]


def test_a_stream_subscribed_again_catches_up_on_what_was_published_meanwhile(store):
    finished(store, events=3)
    kept(store, lines(1, {"type": "item", "content": "there."}, {"type": "end"}))
    script = [
        lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}),
        events.missed(),  # the relay's connection dropped, and it subscribed again
        events.done({"status": "success", "streamed": True}, seq=2),
    ]
    chunks = body(store, script)
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "end"]


def test_a_stream_subscribed_again_after_its_execution_finished_ends_without_a_quiet_interval(
    store,
):
    """Its final event was published while it was not subscribed and will never come: once
    caught up, it takes the end from the record, never waiting a keepalive interval for an event
    (a hub relay taking over a finished reply, api/hub/follow.py, ends it at once)."""
    finished(store, events=3)
    kept(store, lines(1, {"type": "item", "content": "there."}, {"type": "end"}))
    stream = ScriptedStream([
        lines(0, {"type": "begin"}, {"type": "item", "content": "Hello "}),
        events.missed(),  # subscribed again; nothing more will come
    ])  # fmt: skip
    waits = []
    get = stream.get
    stream.get = lambda timeout: waits.append(timeout) or get(timeout)
    chunks = body(store, stream)
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "end"]
    # the two scripted events, then only the final event's delivery, never a quiet interval
    assert waits[:2] == [KEEPALIVE, KEEPALIVE] and KEEPALIVE not in waits[2:], waits
    assert len(waits) == 3, waits


def test_a_gap_nothing_kept_can_fill_ends_with_an_error_line(store):
    finished(store, events=4)
    script = [
        lines(0, {"type": "begin"}),
        events.missed(lines(2, {"type": "item", "content": "."})),
    ]
    chunks = body(store, script)
    assert [c["type"] for c in chunks] == ["begin", "error"]


def test_a_crashed_execution_ends_with_an_error_line(store):
    finished(store, Status.CRASHED, error="The worker running this execution was lost.")
    chunks = body(store, [lines(0, {"type": "begin"}), None])
    assert chunks[-1] == {
        "type": "error",
        "content": "The worker running this execution was lost.",
        "metadata": {"executionId": "e1"},
    }


def test_lines_that_came_together_go_out_in_one_write_and_a_lone_one_at_once(store):
    """The relay's own stream: a line alone is written as it comes; lines already waiting when
    the stream is read again (the answer's items and its end, under load) in one write."""
    finished(store, events=4)
    stream = Stream("e1-events", 1 << 20)
    launch = Launch("e1", stream)
    relay = SimpleNamespace(unsubscribe=lambda stream: None)
    settings = SimpleNamespace(keepalive_seconds=5, redis_outage_seconds=30)
    outcome = Outcome(launch, store, relay, settings, LivenessChecks(store))
    begin = lines(0, {"type": "begin"})
    items = lines(1, {"type": "item", "content": "Hello there."})
    end = lines(2, {"type": "end"})
    with Flask(__name__).test_request_context():
        writes = iter(streaming_response(outcome, {}).response)
        stream.put(events.encode(begin))
        first = next(writes)
        for event in (items, end, events.done({"status": "success", "streamed": True}, seq=3)):
            stream.put(events.encode(event))
        assert [first, *writes] == [begin.body.encode(), (items.body + end.body).encode()]
