"""The execution channel's event format: what one side encodes, the other decodes exactly."""

from __future__ import annotations

import pytest

from core import events
from core.events import EventError, Kind


@pytest.mark.parametrize(
    "event",
    [
        events.lines('{"type":"item","content":"a\\ud800"}\n', items=1, seq=0),
        events.lines("", seq=7),
        events.response({"status": 201, "headers": {"X": "1"}, "body": "ok"}, seq=3),
        events.done({"status": "success", "output": {"output": float("nan")}}, seq=9),
        events.done({"status": "canceled", "error": "stopped"}),  # a control message: no seq
        events.push("nodeExecuteAfter", {"executionId": "e1", "nodeName": "A"}),
    ],
)
def test_every_event_decodes_to_what_was_encoded(event):
    decoded = events.decode(events.encode(event))
    if event.kind == Kind.DONE and event.seq == 9:
        assert decoded.body == {"status": "success", "output": {"output": None}}  # JSON's NaN
    else:
        assert decoded == event


def test_the_wire_format_is_the_documented_one():
    assert events.encode(events.lines("x\n", items=1, errors=0, seq=2)) == (
        '{"s":2,"lines":"x\\n","items":1,"errors":0}'
    )
    assert events.encode(events.push("t", {})) == '{"push":{"type":"t","data":{}}}'
    assert events.encode(events.numbered(events.done({}), 4)) == '{"s":4,"done":{}}'


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe", b"[1,2]", b'"text"', b'{"s":"1","lines":"x"}', b'{"s":true,"done":{}}',
     b'{"lines":5}', b'{"done":"yes"}', b'{"other":1}', b"{"],
)  # fmt: skip
def test_anything_else_is_refused_with_an_event_error(data):
    with pytest.raises(EventError):
        events.decode(data)


def test_a_broken_channel_is_never_published():
    with pytest.raises(EventError):
        events.encode(events.broken("lost"))
    assert events.broken("lost").reason == "lost"
