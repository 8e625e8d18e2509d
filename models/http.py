"""The model call's HTTP/1.1 on sockets of our own: a POST and its streamed answer, on kept-alive
connections (models/model_client.py uses it where no proxy is configured).

httpx over httpcore and h11 spent most of a model call's CPU in h11's event machinery and
httpcore's pool bookkeeping (docs/performance.md); what a model call needs of HTTP is small: one
request written whole, a status line and headers, a body framed by chunks, by a length or by the
connection's end, gzip or deflate if a server compresses what the client said it accepts
(models/http_body.py). What it gets wrong is told with httpx's own exceptions (connect, read and
write timeouts and errors, a protocol error), so the caller's messages and retries are the same
on both ways; tests/models/test_http_differential.py holds the two to that.

The sockets are as models/sockets.py explains: TCP_NODELAY, each request in one write, and out
of delayed-ACK mode once it is sent. An idle connection the server closed is noticed before it
is reused (a look that never waits, with the poll the client was given); a reused connection
that fails before the answer's first byte is replaced by a new one once.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote, urlsplit

import httpx

from models.http_body import UntilClose, decoder, framing
from models.sockets import NODELAY, Poll, ack_at_once, readable_now

MAX_HEAD_BYTES = 64 * 1024  # a status line and headers beyond this are not an answer we read
READ_BYTES = 65536
# An idle connection older than this is closed rather than reused (httpx's default): a server or
# a NAT may have dropped it without a word, and a request on it would wait for the read timeout.
KEEPALIVE_EXPIRY = 5.0
Origin = tuple[str, str, int]  # scheme, host, port
_SAFE = "/?=&%:@!$'()*+,;~-._"  # what a URL's path and query keep as they are (the rest: %XX)


class _Stale(Exception):
    """A reused connection failed before its answer began: the server had let it go."""


class Connections:
    """One client's kept-alive connections, by origin, and its requests. `headers` are sent
    with every request, in their order, after the Host header."""

    def __init__(
        self,
        headers: list[tuple[bytes, bytes]],
        timeout: float | None,
        tls: ssl.SSLContext,
        max_idle: int = 100,
        poll: Poll | None = None,
    ):
        self._headers = b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)
        self._timeout = timeout
        self._tls = tls
        self._max_idle = max_idle
        self._poll: Poll = poll or select.poll
        self._idle: dict[Origin, list[_Connection]] = {}
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[Origin, bytes]] = {}

    def request(
        self, method: str, url: str, body: bytes | None = None, timeout: float | None = None
    ) -> Reply:
        """Send the request and read the answer's status and headers; the body is the
        Reply's to read (close it)."""
        origin, message, timeout = self._message(method, url, body, timeout)
        return self._exchange(origin, method, message, timeout)

    def send(
        self, method: str, url: str, body: bytes | None = None, timeout: float | None = None
    ) -> Sent | None:
        """Send the request now on a kept connection, if one is idle (a write that does not
        wait), and leave its answer to `Sent.reply`; None when there is none to take (a new
        connection would wait for its handshake: `request` opens it)."""
        origin, message, timeout = self._message(method, url, body, timeout)
        conn = self._take(origin)
        if conn is None:
            return None
        return Sent(self, origin, conn, method, message, timeout)

    def _message(
        self, method: str, url: str, body: bytes | None, timeout: float | None
    ) -> tuple[Origin, bytes, float | None]:
        origin, head = self._route(method, url)
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        message = b"%s%s\r\n%s" % (head, length, body or b"")
        return origin, message, self._timeout if timeout is None else timeout

    def _exchange(
        self, origin: Origin, method: str, message: bytes, timeout: float | None
    ) -> Reply:
        while True:
            conn = self._take(origin) or _Connection.open(origin, timeout, self._tls)
            try:
                return conn.exchange(self, origin, method, message, timeout)
            except _Stale:  # a kept one only, closed now: the next idle one, or a new one
                continue

    def idle(self, origin: Origin) -> int:
        with self._lock:
            return len(self._idle.get(origin, ()))

    def _route(self, method: str, url: str) -> tuple[Origin, bytes]:
        key = f"{method} {url}"
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._parse(method, url)
        return route

    def _parse(self, method: str, url: str) -> tuple[Origin, bytes]:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise httpx.InvalidURL("invalid URL") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol("the URL must start with http:// or https://")
        host = parts.hostname
        if not host:
            raise httpx.InvalidURL("the URL has no host")
        default = 443 if scheme == "https" else 80
        port = port or default
        shown = f"[{host}]" if ":" in host else host
        authority = shown if port == default else f"{shown}:{port}"
        target = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), _SAFE)
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (
            method.encode("ascii"),
            target.encode("ascii"),
            authority.encode("ascii") if authority.isascii() else authority.encode("idna"),
        )
        return (scheme, host, port), head + self._headers

    def _take(self, origin: Origin) -> _Connection | None:
        """The connection idle the shortest time (the others may expire), if it is still open."""
        while True:
            with self._lock:
                idle = self._idle.get(origin)
                if not idle:
                    return None
                conn = idle.pop()
            fresh = time.monotonic() - conn.idle_since < KEEPALIVE_EXPIRY
            if fresh and not readable_now(conn.sock, self._poll):
                return conn
            conn.close()  # the server closed it (or sent what nobody asked for) while idle

    def put_back(self, origin: Origin, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if len(idle) < self._max_idle:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for conn in conns:
            conn.close()


class _Connection:
    __slots__ = ("sock", "timeout", "reused", "idle_since")

    def __init__(self, sock: socket.socket, timeout: float | None):
        self.sock = sock
        self.timeout = timeout
        self.reused = False
        self.idle_since = 0.0

    @classmethod
    def open(cls, origin: Origin, timeout: float | None, tls: ssl.SSLContext) -> _Connection:
        scheme, host, port = origin
        try:
            sock = socket.create_connection((host, port), timeout)
        except TimeoutError as err:
            raise httpx.ConnectTimeout(str(err)) from None
        except OSError as err:
            raise httpx.ConnectError(str(err)) from None
        try:
            sock.setsockopt(*NODELAY)
            if scheme == "https":
                sock = tls.wrap_socket(sock, server_hostname=host)
        except TimeoutError as err:
            sock.close()
            raise httpx.ConnectTimeout(str(err)) from None
        except OSError as err:  # ssl.SSLError among them: a certificate refused
            sock.close()
            raise httpx.ConnectError(str(err)) from None
        return cls(sock, timeout)

    def exchange(
        self, pool: Connections, origin: Origin, method: str, message: bytes, timeout: float | None
    ) -> Reply:
        """Send `message` and read the answer's head. _Stale if this reused connection fails
        before any byte of it (closed either way)."""
        reused = self.send(message, timeout)
        return self.answer(pool, origin, method, reused)

    def send(self, message: bytes, timeout: float | None) -> bool:
        """Write `message`; whether the connection served a request before (closed if the write
        raises)."""
        reused, self.reused = self.reused, True
        try:
            if timeout != self.timeout:
                self.sock.settimeout(timeout)
                self.timeout = timeout
            self._send(message)
        except BaseException:
            self.close()
            raise
        return reused

    def answer(self, pool: Connections, origin: Origin, method: str, reused: bool) -> Reply:
        """The head of the answer to what `send` wrote (_Stale as `exchange` says)."""
        try:
            return _read_head(self, pool, origin, method, reused)
        except BaseException:
            self.close()
            raise

    def _send(self, message: bytes) -> None:
        try:
            self.sock.sendall(message)
        except TimeoutError as err:
            raise httpx.WriteTimeout(str(err)) from None
        except OSError:
            # The server may have answered (an error) and closed before reading the whole
            # request, as httpcore allows: the read tells.
            pass
        ack_at_once(self.sock)

    def recv(self) -> bytes:
        try:
            return self.sock.recv(READ_BYTES)
        except TimeoutError as err:
            raise httpx.ReadTimeout(str(err)) from None
        except OSError as err:
            raise httpx.ReadError(str(err)) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Sent:
    """A request written on a kept connection whose answer is still to come (`reply`)."""

    __slots__ = ("_pool", "_origin", "_conn", "_method", "_message", "_timeout", "_reused",
                 "_error")  # fmt: skip

    def __init__(self, pool: Connections, origin: Origin, conn: _Connection, method: str,
                 message: bytes, timeout: float | None):  # fmt: skip
        self._pool, self._origin, self._conn, self._method = pool, origin, conn, method
        self._message, self._timeout = message, timeout
        self._reused, self._error = True, None
        try:
            self._reused = conn.send(message, timeout)
        except Exception as err:  # told by `reply`, where `request` would have raised it
            self._error = err

    def reply(self) -> Reply:
        """The answer's status and headers, as `Connections.request` gives them: a kept
        connection the server had let go is replaced once, the request written again."""
        if self._error is not None:
            raise self._error
        try:
            return self._conn.answer(self._pool, self._origin, self._method, self._reused)
        except _Stale:
            return self._pool._exchange(self._origin, self._method, self._message, self._timeout)

    def close(self) -> None:
        """Given up before its answer was read: the connection goes with it."""
        self._conn.close()


def _read_head(
    conn: _Connection, pool: Connections, origin: Origin, method: str, reused: bool
) -> Reply:
    buffer = b""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            status, http10, headers = _parse_head(buffer[:end])
            rest = buffer[end + 4 :]
            if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                buffer = rest
                continue
            return Reply(pool, origin, conn, method, status, http10, headers, rest)
        if len(buffer) > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("the answer's headers are too long")
        try:
            data = conn.recv()
        except httpx.ReadError:
            if reused and not buffer:
                raise _Stale() from None
            raise
        if not data:
            if reused and not buffer:
                raise _Stale()
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        buffer += data


def _parse_head(head: bytes) -> tuple[int, bool, list[tuple[bytes, bytes]]]:
    """The status, whether the answer is HTTP/1.0, and the headers (names in lower case)."""
    status_line, *lines = head.split(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError("not an HTTP/1.1 answer")
    headers = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError("a malformed header line in the answer")
        headers.append((name.lower(), value.strip()))
    return int(code), version == b"HTTP/1.0", headers


class Reply:
    """An answer whose body is still to be read: the parts of httpx.Response the model call
    uses (status_code, is_success, headers, iter_bytes, read, text, close)."""

    def __init__(
        self,
        pool: Connections,
        origin: Origin,
        conn: _Connection,
        method: str,
        status: int,
        http10: bool,
        raw_headers: list[tuple[bytes, bytes]],
        rest: bytes,
    ):
        self.status_code = status
        self._raw_headers = raw_headers
        self._pool, self._origin = pool, origin
        self._conn: _Connection | None = conn
        self._rest = rest
        self._content: bytes | None = None
        self._complete = False
        fields = {name: value for name, value in raw_headers}
        self._body = framing(method, status, fields)
        # Kept for the next request: a body with an end of its own, and a server that keeps
        # the connection (HTTP/1.1 unless it says close; HTTP/1.0 only if it says keep-alive).
        tokens = fields.get(b"connection", b"").lower()
        self._keep_alive = (
            not isinstance(self._body, UntilClose)
            and b"close" not in tokens
            and (not http10 or b"keep-alive" in tokens)
        )
        self._decode = decoder(fields.get(b"content-encoding", b""))

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def headers(self) -> httpx.Headers:
        return httpx.Headers(self._raw_headers)

    def iter_bytes(self) -> Iterator[bytes]:
        """The body, decoded, a piece per network read (that brought any)."""
        data, self._rest = self._rest, b""
        while True:
            if data:
                piece = self._decode(self._body.feed(data))
                if piece:
                    yield piece
            if self._body.done:
                self._complete = True
                return
            if self._conn is None:
                raise httpx.StreamClosed()
            data = self._conn.recv()
            if not data:
                if not isinstance(self._body, UntilClose):
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                self._body.done = True

    def read(self) -> bytes:
        if self._content is None:
            self._content = b"".join(self.iter_bytes())
        return self._content

    @property
    def text(self) -> str:
        return self.read().decode("utf-8", "replace")

    def close(self) -> None:
        """Back to the pool if the body was read to its end, else the connection is closed."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._complete and self._keep_alive:
            self._pool.put_back(self._origin, conn)
        else:
            conn.close()
