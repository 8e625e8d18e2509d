"""The sockets under the model client's pooled connections (engine/openai_chat.py).

Linux takes a kept-alive connection for an interactive one: when we send a request soon after
reading the last answer, the kernel holds back our ACKs (for its delayed-ACK timeout, 40 ms at
least) so they can ride on our next write. A server that leaves Nagle's algorithm on (no
TCP_NODELAY) sends its status line and headers, then keeps its first SSE event in its send queue
until those headers are ACKed: on a kept-alive connection, calls one after another got each
first token about 40 ms late (issue 26). A new connection did not show it: the kernel ACKs at
once in a connection's first exchanges.

So each connection of ours
- sends a request in one write, headers and body together (httpcore writes them apart), on a
  TCP_NODELAY socket: no part of it waits for the server's ACK, however long the body;
- once the request is out, leaves delayed-ACK mode (TCP_QUICKACK, Linux), so the answer is
  ACKed as it is read and such a server sends its next piece at once.

The model client's own connections (engine/model_http.py) do all of this on their sockets with
the constants and the look below. For httpx's connections (where a proxy is configured and
NO_PROXY names the host) it is an httpcore network backend around httpcore's own sockets (gevent's
when monkey-patched), so connecting, TLS and timeouts stay httpcore's.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


# How to look at a socket without waiting. The process's runtime may hand over its own: under
# gevent, worker/greenlets.py gives the C library's poll, since gevent's (patched into select)
# took a timer and a turn of its loop for each look, and httpcore looks at every idle pooled
# connection on every request.
poll: Any = getattr(select, "poll", None)


def install(client: httpx.Client) -> None:
    """Gives the client's direct connections our sockets (a proxy's, from the environment, keep
    httpcore's). httpx 0.28 takes no network backend (encode/httpx pull request 3749), so it is
    set on the pool of the transport httpx built with the client's own settings."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if isinstance(pool, httpcore.ConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = Backend()
    # else: another httpx layout; its default sockets still work, only the stall comes back


class Backend(httpcore.SyncBackend):
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
        return Stream(super().connect_tcp(host, port, timeout, local_address, options))


class Stream(httpcore.NetworkStream):
    """Keeps a request's writes until its answer is first read, then sends them in one write
    and leaves delayed-ACK mode. The model client's requests are bytes in memory: holding them
    costs one copy."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream
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
        self._ack_at_once()

    def _ack_at_once(self) -> None:
        """Only after our write: the kernel takes a write for a reply and goes back to delaying
        its ACKs."""
        if QUICKACK is None:
            return
        with contextlib.suppress(OSError):  # a hint: the read reports a broken connection
            self._stream.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return Stream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and poll is not None:
            return readable_now(self._stream.get_extra_info("socket"))
        return self._stream.get_extra_info(info)


def readable_now(sock: Any) -> bool:
    """httpcore's is_socket_readable with our poll: data or an end waiting to be
    read (an idle connection the server closed); a socket that is gone counts as readable."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poller = poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
