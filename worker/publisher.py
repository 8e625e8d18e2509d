"""The worker's outbox: every execution in this process hands its events here, and one
background thread (a greenlet under the gevent pool) publishes them.

Tokens produced while a publish is in flight wait for the next one, so a fast model's tokens
coalesce into a few messages, and the execution never blocks on Redis per token. Each flush is
one pipeline: one round trip for every execution that has something to send. The messages are
core.events: consecutive chunks become one numbered `lines` event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from core import events
from core.events import Event, Kind
from core.jsontext import dumps
from core.redis_clients import publish

log = logging.getLogger("mini_n8n.outbox")


@dataclass(frozen=True)
class _Chunk:
    """One streamed chunk, already a line of NDJSON."""

    line: str
    kind: str  # the chunk's "type": begin, item, end, error


def _chunk(chunk: dict[str, Any]) -> _Chunk:
    return _Chunk(dumps(chunk) + "\n", str(chunk.get("type")))


def _joined(chunks: list[_Chunk]) -> Event:
    return events.lines(
        "".join(c.line for c in chunks),
        items=sum(c.kind == "item" for c in chunks),
        errors=sum(c.kind == "error" for c in chunks),
    )


class Outbox:
    def __init__(self, client: redis.Redis):
        self.client = client
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: OrderedDict[str, list[Event | _Chunk]] = OrderedDict()  # in order
        self._seq: dict[str, int] = {}
        self._flushed: dict[str, threading.Event] = {}
        self._thread: threading.Thread | None = None
        self._busy = False

    def chunk(self, channel: str, chunk: dict[str, Any]) -> None:
        self._put(channel, _chunk(chunk))

    def idle(self) -> bool:
        """Nothing waits to be published and no publish is in flight."""
        with self._lock:
            return not self._pending and not self._flushed and not self._busy

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        """An editor push event: {"type": ..., "data": ...}."""
        self._put(channel, events.push(event_type, data))

    def response(self, channel: str, response: dict[str, Any]) -> None:
        self._put(channel, events.response(response))

    def done(self, channel: str, result: dict[str, Any]) -> threading.Event:
        """Queue the final event; the returned event is set once it has been published."""
        flushed = threading.Event()
        with self._lock:
            self._flushed[channel] = flushed
        self._put(channel, events.done(result))
        return flushed

    def _put(self, channel: str, event: Event | _Chunk) -> None:
        with self._lock:
            self._pending.setdefault(channel, []).append(event)
            if self._thread is None or not self._thread.is_alive():
                # Started on first use, and again should it ever have died: one bad message
                # must not silence every execution of this worker.
                self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, OrderedDict()
                self._busy = bool(batch)
            try:
                if batch:
                    self._publish(batch)
            except Exception:  # the loop serves every execution: log, never die
                log.exception("the outbox could not publish a batch of %d channel(s)", len(batch))
            finally:
                self._finish(batch)

    def _publish(self, batch: OrderedDict[str, list[Event | _Chunk]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for channel, pending in batch.items():
            try:
                messages = [m.encode("utf-8") for m in self._messages(channel, pending)]
            except Exception:
                # This channel's subscribers see a gap in the sequence and say the events were
                # lost; the other executions in the batch go out as usual.
                log.exception("events for %s could not be encoded; dropped", channel)
                continue
            for message in messages:
                publish(pipe, channel, message)
        for attempt in (1, 2):
            try:
                pipe.execute()
                break
            except redis.RedisError as err:
                # Subscribers notice a gap (sequence numbers) or the silence (keepalive checks),
                # and the execution record tells the truth about the execution.
                log.warning(
                    "publishing %d channel(s) failed (attempt %d): %s", len(batch), attempt, err
                )

    def _finish(self, batch: OrderedDict[str, list[Event | _Chunk]]) -> None:
        """Whatever happened to the batch, executions waiting for their last event go on."""
        with self._lock:
            self._busy = False
            for channel, pending in batch.items():
                if pending and _is_done(pending[-1]):
                    self._seq.pop(channel, None)
                    event = self._flushed.pop(channel, None)
                    if event:
                        event.set()

    def _messages(self, channel: str, pending: list[Event | _Chunk]) -> list[str]:
        """Consecutive chunks become one `lines` event; other events keep their place."""
        messages: list[str] = []
        chunks: list[_Chunk] = []
        for entry in pending:
            if isinstance(entry, _Chunk):
                chunks.append(entry)
                continue
            if chunks:
                messages.append(self._message(channel, _joined(chunks)))
                chunks = []
            messages.append(self._message(channel, entry))
        if chunks:
            messages.append(self._message(channel, _joined(chunks)))
        return messages

    def _message(self, channel: str, event: Event) -> str:
        if event.kind == Kind.PUSH:  # push channels mix executions and workers: no sequence
            return events.encode(event)
        seq = self._seq.get(channel, 0)
        self._seq[channel] = seq + 1
        return events.encode(events.numbered(event, seq))


def _is_done(entry: Event | _Chunk) -> bool:
    return isinstance(entry, Event) and entry.kind == Kind.DONE


class LocalOutbox:
    """The outbox of regular mode, where the api runs executions itself: execution events go
    straight to this process's streams; editor push events still go through Redis, since the
    editor's SSE connection may be held by another api process."""

    def __init__(self, client: redis.Redis, deliver: Callable[[str, str], None]):
        self.client = client
        self._deliver = deliver  # (channel, message) -> None
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    def idle(self) -> bool:
        return True  # delivery is synchronous

    def chunk(self, channel: str, chunk: dict[str, Any]) -> None:
        self._send(channel, _joined([_chunk(chunk)]))

    def response(self, channel: str, response: dict[str, Any]) -> None:
        self._send(channel, events.response(response))

    def done(self, channel: str, result: dict[str, Any]) -> threading.Event:
        self._send(channel, events.done(result))
        with self._lock:
            self._seq.pop(channel, None)
        flushed = threading.Event()
        flushed.set()
        return flushed

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        with contextlib.suppress(redis.RedisError):
            publish(self.client, channel, events.encode(events.push(event_type, data)))

    def _send(self, channel: str, event: Event) -> None:
        with self._lock:
            seq = self._seq.get(channel, 0)
            self._seq[channel] = seq + 1
        self._deliver(channel, events.encode(events.numbered(event, seq)))
