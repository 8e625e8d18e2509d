"""httpcore's network backend for httpx's connections (where a proxy is configured and NO_PROXY
names the host): httpcore's own sockets (gevent's when monkey-patched), so connecting, TLS and
timeouts stay httpcore's, set up and written as models/sockets.py explains."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from models.sockets import NODELAY, Poll, ack_at_once, readable_now


def install(client: httpx.Client, poll: Poll | None) -> None:
    """Gives the client's direct connections our sockets (a proxy's, from the environment, keep
    httpcore's). httpx 0.28 takes no network backend (encode/httpx pull request 3749), so it is
    set on the pool of the transport httpx built with the client's own settings."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if isinstance(pool, httpcore.ConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = Backend(poll)
    # else: another httpx layout; its default sockets still work, only the stall comes back


class Backend(httpcore.SyncBackend):
    """`poll` looks at idle pooled connections (None: httpcore's own look)."""

    def __init__(self, poll: Poll | None = None):
        self._poll = poll

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        # httpcore 1.0 sets TCP_NODELAY as well; the one write per request relies on it, so it
        # is asked for here rather than left to the version installed.
        options = [*(socket_options or ()), NODELAY]
        stream = super().connect_tcp(host, port, timeout, local_address, options)
        return Stream(stream, self._poll)


class Stream(httpcore.NetworkStream):
    """Keeps a request's writes until its answer is first read, then sends them in one write
    and leaves delayed-ACK mode. The model client's requests are bytes in memory: holding them
    costs one copy."""

    def __init__(self, stream: httpcore.NetworkStream, poll: Poll | None = None):
        self._stream = stream
        self._poll = poll
        self._unsent: list[bytes] = []
        self._write_timeout: float | None = None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._unsent.append(buffer)
        self._write_timeout = timeout

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._unsent:
            self._send_request()
        return self._stream.read(max_bytes, timeout)

    def _send_request(self) -> None:
        request = b"".join(self._unsent)
        self._unsent.clear()
        with contextlib.suppress(httpcore.WriteError):
            # As httpcore does when its own writes fail: the server may have answered (an
            # error) and closed before reading the whole request, and the read will tell.
            self._stream.write(request, self._write_timeout)
        ack_at_once(self._stream.get_extra_info("socket"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._stream.start_tls(ssl_context, server_hostname, timeout)
        return Stream(stream, self._poll)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._poll is not None:
            return readable_now(self._stream.get_extra_info("socket"), self._poll)
        return self._stream.get_extra_info(info)
