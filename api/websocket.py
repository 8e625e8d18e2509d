"""A server WebSocket that costs little while it waits: the chat socket's transport.

simple-websocket (under flask-sock) reads every socket in a thread of its own, a greenlet under
gunicorn's gevent worker, and accepts permessage-deflate, whose zlib state is kept per socket: with
the chat's own reader and relay greenlets an idle /chat socket cost many times what it costs here
(docs/performance.md). Here the greenlet that serves the request is the only one. It never blocks on
the socket: it asks to be woken when the socket has bytes (`wake_when_readable`, a one-shot watcher
of gevent's loop, no greenlet), reads what is there without blocking (`receive_ready`), and
otherwise waits on whatever else it waits for. No extension is negotiated: chat frames are short.

A message is held to the deadlines of a request body (api/bodies.py `Pace`) from its first byte
to its last: the socket's owner waits no longer than `deadline()` and asks `late()`. Its bytes
are counted in the process's budget of bytes in flight while it arrives. A binary message stays
bytes, so it is read by the same rules as an HTTP body (valid UTF-8 included).

The protocol itself is wsproto's (the library simple-websocket uses). Only gunicorn's workers
are supported: the upgraded socket is in `environ["gunicorn.socket"]`, and the view's response
raises StopIteration when gunicorn calls it, so gunicorn writes nothing more and closes.
"""

from __future__ import annotations

import contextlib
import errno
import math
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from flask import Response
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from api.admission import Held
from api.bodies import SMALL_BODY_BYTES, Pace
from runtime.patching import gevent_patched

if TYPE_CHECKING:
    from api.bodies import Intake

RECEIVE_BYTES = 16 * 1024  # what one read takes: chat frames are short, files come in several
CLOSE_TRY_AGAIN = 1013  # "try again later"
BUSY = "This server holds as many incoming bytes as it may; try again shortly."


class ConnectionClosed(Exception):
    """The client closed the socket, or it broke."""


class Handshake(Exception):
    """Not a WebSocket handshake this server can accept."""


class WebSocket:
    __slots__ = ("sock", "ws", "max_message_size", "intake", "_partial", "_partial_bytes",
                 "_pace", "_held", "_watcher", "_wake", "connected")  # fmt: skip

    def __init__(self, sock: socket.socket, ws: Connection, max_message_size: int, intake: Intake):
        self.sock = sock
        self.ws = ws
        self.max_message_size = max_message_size
        self.intake = intake
        self._partial: list[str | bytes] = []  # a message arriving in several frames
        self._partial_bytes = 0  # its size as sent: a text message's characters as UTF-8
        # While a message arrives: its deadlines, and the bytes it holds of the budget.
        self._pace: Pace | None = None
        self._held: Held | None = None
        self._watcher: Any = None
        self._wake: Callable[[], None] | None = None
        self.connected = True

    @classmethod
    def accept(cls, environ: dict[str, Any], max_message_size: int, intake: Intake) -> WebSocket:
        """Answer the upgrade request on the request's own socket."""
        sock = environ.get("gunicorn.socket")
        if sock is None or not gevent_patched():
            raise Handshake("WebSockets are served under gunicorn's gevent worker only")
        handshake = WSConnection(ConnectionType.SERVER)
        head = [b"GET / HTTP/1.1\r\n"]
        for key, value in environ.items():
            if key.startswith("HTTP_"):
                name = "-".join(p.capitalize() for p in key[5:].split("_"))
                head.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        try:
            handshake.receive_data(b"".join(head) + b"\r\n")
            upgrade = any(isinstance(event, Request) for event in handshake.events())
        except RemoteProtocolError:
            upgrade = False
        if not upgrade:
            raise Handshake("not a WebSocket upgrade")
        sock.sendall(handshake.send(AcceptConnection()))  # no extension: no zlib state per socket
        sock.setblocking(False)
        # From here on only the frames' protocol: the handshake's HTTP state is let go.
        assert handshake.connection is not None
        return cls(sock, handshake.connection, max_message_size, intake)

    # --- writing --------------------------------------------------------------------------
    def send(self, text: str) -> None:
        if not self.connected:
            raise ConnectionClosed()
        data = self.ws.send(TextMessage(data=text))
        sent = False
        try:
            self.sock.settimeout(None)  # a write waits for the client (this greenlet only)
            self.sock.sendall(data)
            sent = True
        except OSError:
            self.connected = False
        finally:
            with contextlib.suppress(OSError):
                self.sock.setblocking(False)
        if not sent:  # raised here, not in the handler: no frame-exception cycle to collect
            raise ConnectionClosed()

    def close(self, code: int = CloseReason.NORMAL_CLOSURE, reason: str = "") -> None:
        """Send a close frame (once) and stop reading; the socket itself is gunicorn's."""
        if not self.connected:
            return
        self.connected = False
        with contextlib.suppress(OSError, LocalProtocolError):
            self.sock.settimeout(1.0)  # a close frame is not worth waiting long for
            self.sock.sendall(self.ws.send(CloseConnection(code=code, reason=reason)))
        self.stop_watching()
        self._message_done()

    # --- reading --------------------------------------------------------------------------
    def receive_ready(self) -> list[str | bytes]:
        """The messages that arrived, read without blocking ([] if none): text as str, binary
        as bytes. ConnectionClosed when the client closed or the socket broke; a message past
        the size limit closes with 1009, one the budget has no room for with 1013."""
        if not self.connected:
            raise ConnectionClosed()
        messages: list[str | bytes] = []
        while True:
            try:
                data = self.sock.recv(RECEIVE_BYTES)
            except (BlockingIOError, InterruptedError):
                return messages
            except OSError as err:
                if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return messages
                data = b""  # broken: as closed (raising here would tie the error to this frame)
            if not data:
                self.connected = False
                self.stop_watching()
                self._message_done()
                raise ConnectionClosed()
            self._arrived(len(data))
            self.ws.receive_data(data)
            if self._events(messages) and not self._partial:
                self._message_done()

    def _arrived(self, size: int) -> None:
        """Bytes of a message: its deadlines start with its first, and they take room in the
        budget (a small message at once, room or not; a large one only if there is room)."""
        now = time.monotonic()
        if self._pace is None or self._held is None:
            self._pace = Pace(self.intake.arrival, now)
            self._held = Held(self.intake.budget)
        self._pace.arrived(size, now)
        wait = None if self._pace.received <= SMALL_BODY_BYTES else 0.0
        if not self._held.take(size, wait):
            self.close(CLOSE_TRY_AGAIN, BUSY)
            raise ConnectionClosed()

    def _message_done(self) -> None:
        if self._held is not None:
            self._held.release()
        self._pace = self._held = None

    def deadline(self) -> float:
        """When a message that has begun to arrive is late unless more of it came (monotonic);
        never, between messages."""
        return self._pace.deadline() if self._pace is not None else math.inf

    def late(self) -> str | None:
        """Why the message arriving missed its deadline (the words of HTTP's 408), if it did."""
        pace, now = self._pace, time.monotonic()
        if pace is None or now < pace.deadline():
            return None
        return pace.too_slow("The message", stalled=now >= pace.last + pace.arrival.idle_seconds)

    def _events(self, messages: list[str | bytes]) -> bool:
        """True if a message or a control frame was completed."""
        completed = False
        for event in self.ws.events():  # a frame that breaks the protocol comes as a close
            if isinstance(event, TextMessage | BytesMessage):
                data = event.data
                part = bytes(data) if isinstance(data, bytearray) else data
                self._partial.append(part)
                self._partial_bytes += len(part.encode() if isinstance(part, str) else part)
                if self._partial_bytes > self.max_message_size:
                    self._partial.clear()
                    self._partial_bytes = 0
                    self.close(CloseReason.MESSAGE_TOO_BIG, "Message is too big")
                    raise ConnectionClosed()
                if event.message_finished:
                    messages.append(_joined(self._partial))
                    self._partial.clear()
                    self._partial_bytes = 0
                    completed = True
            elif isinstance(event, Ping):
                self._write(self.ws.send(event.response()))
                completed = True
            elif isinstance(event, CloseConnection):
                with contextlib.suppress(LocalProtocolError):
                    self._write(self.ws.send(event.response()))
                self.connected = False
                self.stop_watching()
                self._message_done()
                raise ConnectionClosed()
            else:  # a pong
                completed = True
        return completed

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self.sock.settimeout(1.0)
            self.sock.sendall(data)
        with contextlib.suppress(OSError):
            self.sock.setblocking(False)

    # --- owning the socket ----------------------------------------------------------------
    def detach(self) -> None:
        """Take a descriptor of the connection's own, so it stays open when gunicorn closes the
        request's socket after the view returned (the socket then outlives the request)."""
        own = self.sock.dup()
        own.setblocking(False)
        self.stop_watching()
        self.sock = own

    def release(self) -> None:
        """Close the descriptor `detach` took (the connection ends once no descriptor is left),
        and let go of the protocol's state at once: wsproto's frame parser is a generator that
        holds its parser, a cycle only the garbage collector's rare full pass would free (the
        allocator's pages around it kept meanwhile)."""
        self.stop_watching()
        self._message_done()
        with contextlib.suppress(OSError):
            self.sock.close()
        parser = getattr(getattr(self.ws, "_proto", None), "_parse_more", None)
        if parser is not None and hasattr(parser, "close"):
            parser.close()

    # --- waiting --------------------------------------------------------------------------
    def wake_when_readable(self, wake: Callable[[], None]) -> None:
        """Call `wake` once, from gevent's loop, when the socket has bytes to read (or closes).
        One-shot, so a socket nobody reads yet does not spin the loop; ask again after reading."""
        if self._watcher is None:
            from gevent import get_hub

            self._watcher = get_hub().loop.io(self.sock.fileno(), 1)
        self._wake = wake
        if not self._watcher.active:
            self._watcher.start(self._readable)

    def _readable(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._wake is not None:
            self._wake()

    def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            with contextlib.suppress(Exception):
                self._watcher.close()
            self._watcher = None
        self._wake = None


def _joined(parts: list[str | bytes]) -> str | bytes:
    """A message's frames are all text or all binary (continuations carry the first's type)."""
    if parts and isinstance(parts[0], bytes):
        return b"".join(cast(list[bytes], parts))
    return "".join(cast(list[str], parts))


class Handled(Response):
    """What the view returns once it has served the socket: gunicorn, calling it, stops there
    (StopIteration) and closes the connection instead of writing an HTTP response into it."""

    def __call__(self, environ, start_response):
        raise StopIteration()
