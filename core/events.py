"""The events on an execution's channel (`execution:<id>:events`) and on an editor's push channel
(`push:<pushRef>`): one encoder and one decoder for every producer and consumer.

On the wire each event is one JSON object:

| event    | JSON                                                    | sent by                        |
|----------|---------------------------------------------------------|--------------------------------|
| lines    | {"s": n, "lines": "<ndjson>", "items": k, "errors": k}  | the worker: streamed chunks    |
| response | {"s": n, "response": {"status", "headers", "body"}}     | a Respond to Webhook node      |
| done     | {"s": n, "done": {"status", "error", "output", ...}}    | the worker, last; or a stop    |
| push     | {"push": {"type": ..., "data": ...}}                    | editor events, on push:<ref>   |
| message  | {"message": {"n": i, "text", "wait", "node"}}           | a Chat node (core/waiting.py)  |
| next     | {"next": {"executionId": id}}                           | the worker, after a `done`     |
|          |                                                         | that says `"continues": true`  |

`s` numbers one execution's events from 0, so a subscriber notices a lost one. An event without
`s` is a control message (the stop of a queued execution, which the api itself publishes) or a
push event (a push channel mixes executions and workers). A `message` is not numbered by `s`: an
execution that waits may resume on another worker, so its Chat-node messages carry their own
index `n` in the execution's message list (`execution:<id>:messages`), kept in Redis. `lines` carries whole NDJSON lines as
the client will receive them; `items` and `errors` count its item and error chunks, so the api
knows what a stream has said without parsing it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.jsontext import dumps


class Kind(StrEnum):
    LINES = "lines"
    RESPONSE = "response"
    DONE = "done"
    PUSH = "push"
    MESSAGE = "message"
    # The conversation goes on in the session's next execution (started by messages this one
    # never waited for): a chat socket follows it there.
    NEXT = "next"
    # Never on the wire: what a subscriber reports when the channel itself failed (a gap, an
    # unreadable message, a lost connection, a reader too slow).
    BROKEN = "broken"
    # Never on the wire: events may have been missed (a gap in the numbering, whose first event
    # after it is the body; or None: the subscription was made again after its connection
    # dropped). The reader catches up from what was kept (core/replay.py).
    MISSED = "missed"


@dataclass(frozen=True)
class Event:
    kind: Kind
    # lines: str; response, done, push, message: dict; broken: the reason (str); missed: the
    # event after the gap, or None
    body: Any
    seq: int | None = None
    items: int = 0  # lines only: how many item chunks
    errors: int = 0  # lines only: how many error chunks

    @property
    def reason(self) -> str:
        return self.body if self.kind == Kind.BROKEN else ""


class EventError(ValueError):
    """A message on a channel that is not an event."""


_MESSAGE_HEAD = '{"message":{"n":'


def lines(text: str, items: int = 0, errors: int = 0, seq: int | None = None) -> Event:
    return Event(Kind.LINES, text, seq, items, errors)


def response(answer: dict[str, Any], seq: int | None = None) -> Event:
    return Event(Kind.RESPONSE, answer, seq)


def done(result: dict[str, Any], seq: int | None = None) -> Event:
    return Event(Kind.DONE, result, seq)


def message(body: dict[str, Any]) -> Event:
    return Event(Kind.MESSAGE, body)


def continuing(final: Event) -> Event:
    """The final event `final` (`done`) as sent when the session's conversation goes on in a
    next execution, which its `next` event names."""
    return Event(Kind.DONE, {**final.body, "continues": True}, final.seq)


def message_around_n(body: dict[str, Any]) -> tuple[str, str]:
    """The `message` event of `body` whose index `n` is not known yet (a script learns it as it
    appends the message to its list): the encoded event before and after the index's digits.
    The script puts the number between them and writes nothing else of the JSON."""
    fields = {name: value for name, value in body.items() if name != "n"}
    text = encode(message({"n": 0, **fields}))
    if not text.startswith(_MESSAGE_HEAD + "0"):
        raise EventError("a message event begins with its index")
    return _MESSAGE_HEAD, text[len(_MESSAGE_HEAD) + 1 :]


def next_execution(execution_id: str) -> Event:
    return Event(Kind.NEXT, {"executionId": execution_id})


def push(event_type: str, data: dict[str, Any]) -> Event:
    return Event(Kind.PUSH, {"type": event_type, "data": data})


def broken(reason: str) -> Event:
    return Event(Kind.BROKEN, reason)


def missed(early: Event | None = None) -> Event:
    return Event(Kind.MISSED, early)


def numbered(event: Event, seq: int) -> Event:
    return Event(event.kind, event.body, seq, event.items, event.errors)


def encode(event: Event) -> str:
    if event.kind in (Kind.BROKEN, Kind.MISSED):
        raise EventError(f"a {event.kind} event is never published")
    message: dict[str, Any] = {} if event.seq is None else {"s": event.seq}
    message[event.kind.value] = event.body
    if event.kind == Kind.LINES:
        message["items"], message["errors"] = event.items, event.errors
    return dumps(message)


def decode(data: str | bytes) -> Event:
    try:
        message = json.loads(data)
    except ValueError as err:  # UnicodeDecodeError included
        raise EventError("not JSON") from err
    if not isinstance(message, dict):
        raise EventError("not a JSON object")
    seq = message.get("s")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        raise EventError('"s" is not a sequence number')
    for kind in (Kind.LINES, Kind.DONE, Kind.RESPONSE, Kind.PUSH, Kind.MESSAGE, Kind.NEXT):
        if kind.value in message:
            return _checked(kind, message, seq)
    raise EventError("no event in the message")


def _checked(kind: Kind, message: dict[str, Any], seq: int | None) -> Event:
    body = message[kind.value]
    if kind == Kind.LINES:
        if not isinstance(body, str):
            raise EventError('"lines" is not text')
        return Event(kind, body, seq, _count(message, "items"), _count(message, "errors"))
    if not isinstance(body, dict):
        raise EventError(f'"{kind.value}" is not an object')
    return Event(kind, body, seq)


def _count(message: dict[str, Any], name: str) -> int:
    value = message.get(name, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
