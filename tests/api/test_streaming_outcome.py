"""The streaming response's end game, with a scripted event source: a quiet interval that
coincides with the execution finishing must not repeat or lose the answer."""

from __future__ import annotations

import json
from types import SimpleNamespace

from flask import Flask

from api.launcher import Launch
from api.responses import Outcome, streaming_response
from core import events
from core.events import Event


class ScriptedStream:
    """Returns the scripted events in order; None stands for a quiet interval."""

    def __init__(self, events):
        self.events = list(events)

    def get(self, timeout):
        return self.events.pop(0) if self.events else None


class Store:
    def __init__(self, record):
        self.record = record

    def mark_crashed_if_lost(self, execution_id, queue_timeout):
        return self.record


def lines(*chunks) -> Event:
    # compact, as the worker writes them
    text = "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in chunks)
    return events.lines(text, items=sum(c["type"] == "item" for c in chunks))


def body(events, record) -> list[dict]:
    launch = Launch("e1", ScriptedStream(events))
    relay = SimpleNamespace(unsubscribe=lambda stream: None)
    settings = SimpleNamespace(keepalive_seconds=0.01, queue_timeout_seconds=300)
    with Flask(__name__).test_request_context():
        response = streaming_response(Outcome(launch, Store(record), relay, settings), {})
        text = b"".join(response.response).decode()
    return [json.loads(line) for line in text.splitlines()]


FINISHED = {"status": "success", "lastNodeExecuted": "AI Agent", "runData": {
    "AI Agent": [{"data": {"main": [[{"json": {"output": "Hello there."}}]]}}]}}  # fmt: skip


def test_last_events_arriving_after_the_record_finished_are_relayed_once():
    script = [
        lines({"type": "begin"}, {"type": "item", "content": "Hello "}),
        None,  # quiet: the relay checks the record, which already says success
        lines({"type": "item", "content": "there."}, {"type": "end"}),
        events.done({"status": "success", "streamed": True}),
    ]
    chunks = body(script, FINISHED)
    assert [c["type"] for c in chunks] == ["begin", "item", "item", "end"]
    assert "".join(c.get("content", "") for c in chunks) == "Hello there."


def test_a_finished_record_without_final_events_gives_the_output_once():
    chunks = body([None], FINISHED)
    assert [c["type"] for c in chunks] == ["begin", "item", "end"]
    assert chunks[1]["content"] == "Hello there."


def test_a_lost_ending_after_streamed_text_is_an_error_not_a_repeat():
    chunks = body([lines({"type": "begin"}, {"type": "item", "content": "Hello "}), None], FINISHED)
    assert [c["type"] for c in chunks] == ["begin", "item", "error"]
    assert "lost" in chunks[-1]["content"]


def test_a_crashed_execution_ends_with_an_error_line():
    record = {"status": "crashed", "error": "The worker running this execution was lost."}
    chunks = body([lines({"type": "begin"}), None], record)
    assert chunks[-1] == {
        "type": "error",
        "content": "The worker running this execution was lost.",
        "metadata": {"executionId": "e1"},
    }
