"""The worker's outbox: every execution in this process hands its events here, and one
background thread (a greenlet under the gevent pool) publishes them.

Tokens produced while a publish is in flight wait for the next one, so a fast model's tokens
coalesce into a few messages, and the execution never blocks on Redis per token. Each flush is
one pipeline: one round trip for every execution that has something to send; while several
stream, the outbox lets the loop turn once first (TURN_SECONDS), so that more of them are in it.
The messages are core.events: consecutive chunks become one numbered `lines` event.

The final event is not published here: once everything before it is out (`flush`), the outbox
numbers it (`final`) and the execution's end publishes it in the same step that records the
outcome (core/execution_transitions.py `finish`). A channel's numbering is kept from its first event to its
final one, or until the execution leaves this worker otherwise (`forget`: it waits, and may
resume on another worker, which numbers its events on from where its wait left them:
`continue_at`), so nothing is kept for an execution that no longer runs here. While Redis is unreachable a batch is tried again, with
backoff, for up to PUBLISH_RETRY_SECONDS; what still fails is dropped, and its subscribers see
the gap in the numbering when the final event comes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from core import chunks, events
from core.events import Event, Kind
from core.execution_record import Status
from core.keys import sent_of
from core.redis_clients import Quick, publish, publish_command, script_sha
from core.replay import PUBLISH_KEPT, REPLAY_SECONDS
from core.results import FinalResult
from core.retry import TRANSIENT
from runtime.background import Background

log = logging.getLogger("mini_n8n.outbox")

PUBLISH_RETRY_SECONDS = 60.0
# While other executions stream too, the outbox lets the loop turn once before it takes a batch
# (under gevent a timer, which runs once every greenlet already woken has had its turn), so that
# the other executions whose model reads came in meanwhile hand their tokens over first and one
# write carries them all: fewer, fuller publishes and fewer wake-ups of the api's relay for
# each (docs/performance.md). An execution streaming alone publishes at once.
TURN_SECONDS = 1e-6
_KEPT_MS = REPLAY_SECONDS * 1000


def let_the_loop_turn() -> None:
    time.sleep(TURN_SECONDS)


@dataclass(frozen=True)
class _Publish:
    channel: str
    message: bytes
    kept: bool  # a numbered event, kept for a subscriber that misses it (core/replay.py)


def _no_script(reply: Any) -> bool:
    return isinstance(reply, redis.exceptions.NoScriptError)


@dataclass(frozen=True)
class _Chunk:
    """One streamed chunk, already a line of NDJSON."""

    line: str
    kind: str  # the chunk's "type": begin, item, end, error


def _chunk(chunk: dict[str, Any]) -> _Chunk:
    return _Chunk(chunks.line(chunk), str(chunk.get("type")))


class _Flush:
    """A marker in a channel's queue: set once everything before it was handled."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class _Forget:
    """A marker in a channel's queue: its numbering is dropped once everything before it was
    numbered (a numbering dropped earlier would come back with the events still pending)."""

    __slots__ = ()


_FORGET = _Forget()


class _Continue:
    """A marker in a channel's queue: its numbering goes on from `seq` (a resumed execution),
    after whatever was queued before it (its own earlier wait's _Forget, on this worker)."""

    __slots__ = ("seq",)

    def __init__(self, seq: int) -> None:
        self.seq = seq


_Marker = _Flush | _Forget | _Continue


def _joined(chunks: list[_Chunk]) -> Event:
    return events.lines(
        "".join(c.line for c in chunks),
        items=sum(c.kind == "item" for c in chunks),
        errors=sum(c.kind == "error" for c in chunks),
    )


class Outbox:
    publishes_final = True  # the end's own step publishes the final event (see above)

    def __init__(self, client: redis.Redis, sleep: Callable[[float], None] = time.sleep):
        self.client = client
        self._quick = Quick.of(client)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: OrderedDict[str, list[Event | _Chunk | _Marker]] = OrderedDict()  # in order
        self._seq: dict[str, int] = {}
        # Started on first use, and again should it ever die: one bad message must not
        # silence every execution of this worker.
        self._thread = Background(self._serve, "outbox")
        self._busy = False
        self._kept_sha = script_sha(PUBLISH_KEPT)

    def chunk(self, channel: str, chunk: dict[str, Any]) -> None:
        self._put(channel, _chunk(chunk))

    @property
    def numbered(self) -> int:
        """Channels whose numbering it keeps: executions that stream here now."""
        with self._lock:
            return len(self._seq)

    def idle(self) -> bool:
        """Nothing waits to be published and no publish is in flight."""
        with self._lock:
            return not self._pending and not self._busy

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        """An editor push event: {"type": ..., "data": ...}."""
        self._put(channel, events.push(event_type, data))

    def response(self, channel: str, response: dict[str, Any]) -> None:
        self._put(channel, events.response(response))

    def flush(self, channel: str) -> threading.Event:
        """Set once everything handed over for `channel` so far has been published (or, after
        PUBLISH_RETRY_SECONDS of failures, dropped)."""
        marker = _Flush()
        self._put(channel, marker)
        return marker.done

    def final(self, channel: str, result: FinalResult) -> tuple[str, int]:
        """The channel's final event, numbered after everything flushed before it, and that
        number; the channel is then forgotten. The caller publishes it (core/executions.py)."""
        with self._lock:
            seq = self._seq.pop(channel, 0)
        return events.encode(events.done(result.to_json(), seq)), seq

    def delivered(self, channel: str, event: str) -> None:
        """The final event went out with the end's own step: nothing left to do here."""

    def forget(self, channel: str) -> None:
        """The execution left this worker without a final event (it waits for a reply): its
        numbering goes once what it handed over is out."""
        self._put(channel, _FORGET)

    def numbered_so_far(self, channel: str) -> int:
        """How many numbered events the channel carried (read once `flush` is done)."""
        with self._lock:
            return self._seq.get(channel, 0)

    def continue_at(self, channel: str, seq: int) -> None:
        """A resumed execution's events are numbered on from `seq`."""
        self._put(channel, _Continue(seq))

    def refused(self, channel: str, seq: int, error: str) -> None:
        """Redis refused to record the end (it is full): the stream still ends, crashed with `error`
        as its final event (a publish needs no memory; the record is ended by a reaper once
        Redis has room again)."""
        message = events.encode(events.done(FinalResult(Status.CRASHED, error).to_json(), seq))
        try:
            publish(self.client, channel, message)
        except redis.RedisError as err:  # the stream then ends once a reaper ends the execution
            log.error("the final event of %s could not be published: %s", channel, err)

    def _put(self, channel: str, event: Event | _Chunk | _Marker) -> None:
        with self._lock:
            self._pending.setdefault(channel, []).append(event)
        self._thread.ensure()
        self._wake.set()

    def _serve(self) -> None:
        while True:
            self._wake.wait()
            if self._others_streaming():
                let_the_loop_turn()
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

    def _others_streaming(self) -> bool:
        """More than one execution has events numbered and not yet ended."""
        with self._lock:
            return len(self._seq) > 1

    def _publish(self, batch: OrderedDict[str, list[Event | _Chunk | _Marker]]) -> None:
        publishes = []
        for channel, pending in batch.items():
            try:
                messages = [
                    (m.encode("utf-8"), kept) for m, kept in self._messages(channel, pending)
                ]
            except Exception:
                # This channel's subscribers see a gap in the sequence and say the events were
                # lost; the other executions in the batch go out as usual.
                log.exception("events for %s could not be encoded; dropped", channel)
                continue
            publishes += [_Publish(channel, message, kept) for message, kept in messages]
        if not publishes:
            return
        delay, deadline = 0.1, time.monotonic() + PUBLISH_RETRY_SECONDS
        while True:
            try:
                self._send(publishes)
                return
            except TRANSIENT as err:
                # A publish that timed out may have gone out: subscribers drop a repeated
                # number (api/relay.py). Past the bound the gap tells them it was lost.
                if time.monotonic() + delay > deadline:
                    log.error("publishing %d channel(s) failed, dropped: %s", len(batch), err)
                    return
                log.warning("publishing %d channel(s) failed, retrying: %s", len(batch), err)
                self._sleep(delay)
                delay = min(delay * 2, 2.0)

    def _send(self, publishes: list[_Publish]) -> None:
        """One round trip for the whole batch: the quick way on one Redis, else a pipeline.
        A numbered event is kept as it is published (core/replay.py)."""
        if self._quick is not None:
            replies = self._quick.exchange([self._command(p) for p in publishes])
            forgot = [p for p, r in zip(publishes, replies, strict=True) if _no_script(r)]
            if forgot:  # Redis restarted, or flushed its scripts: nothing of these ran
                self._kept_sha = self.client.script_load(PUBLISH_KEPT)
                replies = self._quick.exchange([self._command(p) for p in forgot])
            # As the pipeline's execute: a refused publish (an ACL, say) is an error to log.
            refused = next((r for r in replies if isinstance(r, redis.ResponseError)), None)
            if refused is not None:
                raise refused
            return
        pipe = self.client.pipeline(transaction=False)
        for p in publishes:
            if p.kept:
                # (as a command: a cluster's pipeline has no eval(), yet routes EVAL by its keys)
                pipe.execute_command("EVAL", PUBLISH_KEPT, 2, p.channel, sent_of(p.channel),
                                     p.message, _KEPT_MS, publish_command(pipe))  # fmt: skip
            else:
                publish(pipe, p.channel, p.message)
        pipe.execute()

    def _command(self, p: _Publish) -> tuple:
        if not p.kept:
            return ("PUBLISH", p.channel, p.message)
        return ("EVALSHA", self._kept_sha, 2, p.channel, sent_of(p.channel), p.message,
                _KEPT_MS, "PUBLISH")  # fmt: skip

    def _finish(self, batch: OrderedDict[str, list[Event | _Chunk | _Marker]]) -> None:
        """Whatever happened to the batch, executions waiting for a flush go on."""
        with self._lock:
            self._busy = False
        for pending in batch.values():
            for entry in pending:
                if isinstance(entry, _Flush):
                    entry.done.set()

    def _messages(
        self, channel: str, pending: list[Event | _Chunk | _Marker]
    ) -> list[tuple[str, bool]]:
        """Consecutive chunks become one `lines` event; other events keep their place. Each
        with whether it is kept (numbered: an execution's, not an editor's push)."""
        messages: list[tuple[str, bool]] = []
        lines: list[_Chunk] = []
        for entry in pending:
            if isinstance(entry, _Flush):
                continue
            if isinstance(entry, _Forget | _Continue):
                if lines:
                    messages.append(self._message(channel, _joined(lines)))
                    lines = []
                with self._lock:
                    if isinstance(entry, _Continue):
                        self._seq[channel] = entry.seq
                    else:
                        self._seq.pop(channel, None)
                continue
            if isinstance(entry, _Chunk):
                lines.append(entry)
                continue
            if lines:
                messages.append(self._message(channel, _joined(lines)))
                lines = []
            messages.append(self._message(channel, entry))
        if lines:
            messages.append(self._message(channel, _joined(lines)))
        return messages

    def _message(self, channel: str, event: Event) -> tuple[str, bool]:
        if event.kind == Kind.PUSH:  # push channels mix executions and workers: no sequence
            return events.encode(event), False
        with self._lock:
            seq = self._seq.get(channel, 0)
            self._seq[channel] = seq + 1
        return events.encode(events.numbered(event, seq)), True


class LocalOutbox:
    """The outbox of regular mode, where the api runs executions itself: execution events go
    straight to this process's streams; editor push events still go through Redis, since the
    editor's SSE connection may be held by another api process."""

    publishes_final = False  # delivered here, once the end is recorded

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

    def flush(self, channel: str) -> threading.Event:
        flushed = threading.Event()
        flushed.set()
        return flushed

    def final(self, channel: str, result: FinalResult) -> tuple[str, int]:
        with self._lock:
            seq = self._seq.pop(channel, 0)
        return events.encode(events.done(result.to_json(), seq)), seq

    def delivered(self, channel: str, event: str) -> None:
        """The end is recorded: now its stream gets the final event."""
        self._deliver(channel, event)

    def forget(self, channel: str) -> None:
        """The execution waits for a reply: its numbering goes (delivery is synchronous)."""
        with self._lock:
            self._seq.pop(channel, None)

    def numbered_so_far(self, channel: str) -> int:
        with self._lock:
            return self._seq.get(channel, 0)

    def continue_at(self, channel: str, seq: int) -> None:
        with self._lock:
            self._seq[channel] = seq

    def refused(self, channel: str, seq: int, error: str) -> None:
        """Redis refused to record the end: the stream ends with `error`."""
        self._deliver(
            channel, events.encode(events.done(FinalResult(Status.CRASHED, error).to_json(), seq))
        )

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        with contextlib.suppress(redis.RedisError):
            publish(self.client, channel, events.encode(events.push(event_type, data)))

    def _send(self, channel: str, event: Event) -> None:
        with self._lock:
            seq = self._seq.get(channel, 0)
            self._seq[channel] = seq + 1
        self._deliver(channel, events.encode(events.numbered(event, seq)))
