"""gunicorn's HTTP/1 response, its headers written with the first body bytes.

gunicorn writes a response's headers on their own, then each body chunk, then a chunked body's
end: a streamed chat answer of one coalesced chunk took three writes, each a system call that
wakes the client. Here the headers wait for the first body bytes that follow them in the same
`write` (gunicorn sends headers only once the body's first bytes are there anyway, so nothing is
later), and a chunked body's end goes out with headers still held; the chunks are framed as
gunicorn frames them. An empty write (an app's way to send its headers early) and what sends
headers outside `write` (a file sent with sendfile) send them at once, as before. A body piece
the app marks as its last (`Last`) goes out with a chunked body's end, in one write: a streamed
answer's final line and the end the client waits for reach it together.
"""

from __future__ import annotations

from typing import Any

from gunicorn.http import wsgi


class Last(bytes):
    """A body's last bytes: nothing follows them, so a chunked body's end goes in their write."""

    __slots__ = ()


_END = b"0\r\n\r\n"  # a chunked body's end


class _Kept:
    """Stands in for the socket while gunicorn writes the headers: keeps them."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class Response(wsgi.Response):
    sock: Any  # gunicorn's, set in its __init__
    _holding = False  # inside `write`: headers may wait for the body bytes that follow
    _held = b""
    _ended = False  # a chunked body's end went out with its Last bytes

    def write(self, arg: bytes) -> None:
        self._holding = not self.headers_sent
        try:
            super().write(arg)
        finally:
            self._holding = False
        if self._held and not arg:  # an empty write sends the headers at once, as gunicorn's
            held, self._held = self._held, b""
            self.sock.sendall(held)

    def send_headers(self) -> None:
        if self.headers_sent or not self._holding:
            return super().send_headers()
        sock = self.sock
        kept = _Kept()
        self.sock = kept
        try:
            super().send_headers()
        finally:
            self._held, self.sock = kept.data, sock

    def _emit_body(self, data: bytes) -> None:
        if self._ended:
            return  # nothing may follow a chunked body's end on the wire
        last = isinstance(data, Last) and self.chunked
        if not self._held and not last:
            return super()._emit_body(data)
        held, self._held = self._held, b""
        if self.chunked:
            data = b"%X\r\n%s\r\n" % (len(data), data)
        if last:
            data += _END
            self._ended = True
        self.sock.sendall(held + data)

    def close(self) -> None:
        if self._ended:
            return
        if not self.headers_sent:  # no body bytes at all: headers and end in one write
            self._holding = True
            try:
                self.send_headers()
            finally:
                self._holding = False
        held, self._held = self._held, b""
        if not held:
            return super().close()
        # Headers still held: a body that was empty, or one no bytes of may be sent (HEAD).
        self.sock.sendall(held + (_END if self.chunked else b""))


def install() -> bool:
    """gunicorn builds its HTTP/1 responses with this class from now on (in this process).
    False, and nothing changed, on a gunicorn without the hook this relies on."""
    base: Any = wsgi.Response
    if not hasattr(base, "_emit_body") or not issubclass(Response, base):
        return False
    wsgi.Response = Response
    return True
