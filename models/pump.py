"""The reader of one streamed completion, beside the caller.

The HTTP client blocks in socket reads, so a pump (a greenlet under gevent, a thread elsewhere:
whatever `spawn` its factory was given) reads the stream into a queue and the model waits on the
queue in short slices: a stop is noticed at once, even before the first byte."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from core import jsontext
from models.http import Sent
from models.model_client import ModelClient
from models.openai_errors import StatusError, StreamedError, error_body
from models.openai_stream import sse_batches

MAX_DRAIN_BYTES = 4096  # after `[DONE]`, what a server may still send before its body ends

# Runs a function in the background; returns how to interrupt it (a blocking read included).
Spawn = Callable[[Callable[[], None]], Callable[[], None]]


def spawn_thread(fn: Callable[[], None]) -> Callable[[], None]:
    """A daemon thread. A thread cannot be interrupted: the returned stop does nothing, and the
    pump notices it is no longer wanted at its next read."""
    threading.Thread(target=fn, daemon=True).start()
    return lambda: None


class Pump:
    """Reads one streamed completion in the background into `events`:
    ("chunks", [dict, ...])..., then ("done", None) or (phase, exception) with phase request/stream."""

    def __init__(self, client: ModelClient, url: str, payload: bytes, spawn: Spawn):
        self.events: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._answered = False  # the whole answer was read: what is left is the body's end
        # The request goes out now, on a kept connection, rather than once the reader first
        # runs: whatever else the caller's wait lets run first (the outbox's begin line, a
        # worker's next broker read) then happens while the model works, not before it has
        # the request.
        self._sent = self._post_now(client, url, payload)
        self._taken = threading.Lock()
        self._interrupt = spawn(lambda: self._run(client, url, payload))

    @staticmethod
    def _post_now(client: ModelClient, url: str, payload: bytes) -> Sent | None:
        try:
            return client.post_now(url, payload)
        except Exception:  # a failure the reader's own request will meet and tell
            return None

    def _take_sent(self) -> Sent | None:
        with self._taken:
            sent, self._sent = self._sent, None
        return sent

    def _run(self, client: ModelClient, url: str, payload: bytes) -> None:
        phase, response = "request", None
        try:
            sent = self._take_sent()
            if self._stopped.is_set():
                if sent is not None:
                    sent.close()
                return
            response = sent.reply() if sent is not None else client.post_stream(url, payload)
            if not response.is_success:
                response.read()
                raise StatusError(response.status_code, error_body(response), response.headers)
            phase = "stream"
            pieces = response.iter_bytes()
            for events in sse_batches(pieces):
                if self._stopped.is_set():
                    return
                if self._hand_on(events):
                    break
            self._answered = True
            self.events.put(("done", None))
            _drain(pieces)
        except Exception as err:
            self.events.put((phase, err))
        finally:
            if response is not None:
                with contextlib.suppress(Exception):  # the connection is going away either way
                    response.close()

    def _hand_on(self, events: list[bytes]) -> bool:
        """The chunks of one read, put as one event (the caller wakes once for them, not once
        each); True at `[DONE]`. An error event raises after the chunks before it."""
        chunks = []
        try:
            for data in events:
                if data.startswith(b"[DONE]"):
                    return True
                chunk = jsontext.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise StreamedError(chunk["error"])
                chunks.append(chunk)
            return False
        finally:
            if chunks:
                self.events.put(("chunks", chunks))

    def stop(self) -> None:
        self._stopped.set()
        sent = self._take_sent()
        if sent is not None:  # stopped before the reader took it up
            sent.close()
        if self._answered:
            return  # let it read the body's end, so its connection can serve the next call
        # A greenlet is interrupted in its socket wait at once and closes the response. A real
        # thread cannot be: it drops the stream at its next chunk or read timeout, while the
        # caller has already moved on.
        self._interrupt()


def _drain(pieces: Any) -> None:
    """Read the few bytes after `[DONE]` (the body's end): a response read to its end gives
    its connection back to the client's pool, where closing it early dropped it, and every
    model call paid a new TCP (and TLS) handshake. More than a body's end: let it go."""
    left = MAX_DRAIN_BYTES
    for piece in pieces:
        left -= len(piece)
        if left < 0:
            return
