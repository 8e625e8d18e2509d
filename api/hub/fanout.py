"""A user's Chat Hub push channel (`hub:push:<uid>`) shared by every open tab of that user in
one api process: one subscription on the relay's shared connection (api/relay.py allows one
stream per channel and process), read by one pump, handed to each tab's `Listener`.

Events reach the channel from whichever process produced them (core/hub_stream.py), so a tab
gets its user's events whatever api process it is connected to. An event this process produced
is also handed to its own tabs at once (`deliver`), without waiting for its trip through Redis:
a tab takes each event once, whichever way it came first (by conversation and number). A
channel that failed (its connection dropped and events may have been missed) ends every
listener: the browser connects again and catches up with
`POST /rest/chat/conversations/:id/reconnect`.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from api.relay import Relay, Stream
from core.events import Kind
from core.jsontext import dumps
from runtime.spawn import spawn

# How often an idle pump looks whether its listeners are gone.
PUMP_IDLE_SECONDS = 5.0
# Events one tab may have waiting before it is cut off (it reconnects and catches up).
MAX_WAITING = 10_000
# Events a tab remembers having taken, to take each once whichever way it came.
SEEN = 4096


class Listener:
    """One tab's events, each the JSON text of an n8n push message `{"type", "data"}`;
    `ended` once its channel failed."""

    __slots__ = ("_items", "_ready", "ended", "_seen", "_order")

    def __init__(self) -> None:
        self._items: list[str] = []
        self._ready = threading.Event()
        self.ended: str | None = None
        self._seen: set[tuple[Any, Any]] = set()
        self._order: deque[tuple[Any, Any]] = deque()

    def put(self, session_id: Any, number: Any, text: str) -> None:
        """An event of conversation `session_id`, numbered `number` there, as JSON text."""
        which = (session_id, number)
        if number is not None:
            if which in self._seen:
                return  # taken already, the other way
            self._seen.add(which)
            self._order.append(which)
            if len(self._order) > SEEN:
                self._seen.discard(self._order.popleft())
        if len(self._items) >= MAX_WAITING:
            self.end("the tab is not reading its events fast enough")
            return
        self._items.append(text)
        self._ready.set()

    def end(self, reason: str) -> None:
        self.ended = self.ended or reason
        self._ready.set()

    def get(self, timeout: float) -> str | None:
        """The next message; None after `timeout` of silence or once ended (see `ended`)."""
        deadline = time.monotonic() + timeout
        while not self._items and self.ended is None:
            self._ready.clear()
            if self._items or self.ended is not None:
                break
            if not self._ready.wait(max(deadline - time.monotonic(), 0)):
                return None
        return self._items.pop(0) if self._items else None


class _Channel:
    __slots__ = ("stream", "listeners")

    def __init__(self, stream: Stream):
        self.stream = stream
        self.listeners: set[Listener] = set()


class Fanout:
    def __init__(self, relay: Callable[[], Relay]):
        self._relay = relay
        self._channels: dict[str, _Channel] = {}
        self._lock = threading.Lock()
        _ALL.add(self)

    def listen(self, channel: str) -> Listener:
        """A listener of `channel`, once Redis confirmed the channel's subscription (RelayError
        if it did not)."""
        listener = Listener()
        with self._lock:
            found = self._channels.get(channel)
            if found is None:
                stream = self._relay().subscribe(channel, ordered=False)
                found = self._channels[channel] = _Channel(stream)
                spawn(lambda: self._pump(channel, found))
            found.listeners.add(listener)
        return listener

    def leave(self, channel: str, listener: Listener) -> None:
        with self._lock:
            found = self._channels.get(channel)
            if found is None:
                return
            found.listeners.discard(listener)
            if not found.listeners:
                self._close(channel, found)

    def deliver(self, channel: str, session_id: str, number: int, text: str) -> None:
        """An event this process just published on `channel`, to this process's tabs now."""
        found = self._channels.get(channel)
        if found is None:
            return
        with self._lock:
            listeners = list(found.listeners)
        for listener in listeners:
            listener.put(session_id, number, text)

    def listening(self) -> int:
        """Open listeners in this process (a test's and the metrics' view)."""
        with self._lock:
            return sum(len(c.listeners) for c in self._channels.values())

    def end(self, reason: str) -> None:
        """End every listener (the process is shutting down: they reconnect elsewhere)."""
        with self._lock:
            channels = list(self._channels.items())
            for channel, found in channels:
                self._close(channel, found)
        for _, found in channels:
            for listener in list(found.listeners):
                listener.end(reason)

    def _close(self, channel: str, found: _Channel) -> None:
        del self._channels[channel]
        self._relay().unsubscribe(found.stream)
        found.stream.wake()

    def _pump(self, channel: str, found: _Channel) -> None:
        while self._channels.get(channel) is found:
            event = found.stream.get(timeout=PUMP_IDLE_SECONDS)
            if event is None:
                continue
            if event.kind == Kind.PUSH:
                data = event.body.get("data") or {}
                text = dumps(event.body)
                with self._lock:
                    listeners = list(found.listeners)
                for listener in listeners:
                    listener.put(data.get("sessionId"), data.get("sequenceNumber"), text)
            elif event.kind in (Kind.BROKEN, Kind.MISSED):
                reason = event.reason or "events may have been missed"
                with self._lock:
                    listeners = list(found.listeners)
                    if self._channels.get(channel) is found:
                        self._close(channel, found)
                for listener in listeners:
                    listener.end(reason)
                return


_ALL: weakref.WeakSet[Fanout] = weakref.WeakSet()


def end_all(reason: str) -> None:
    """End every open hub push stream of this process (as api/push.py `end_all` does the
    editor's): endless streams would otherwise hold a shutdown for its whole timeout."""
    for fanout in list(_ALL):
        fanout.end(reason)
