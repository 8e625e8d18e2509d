"""The sockets under the model client's connections: how they are set up and looked at.

Linux takes a kept-alive connection for an interactive one: when we send a request soon after
reading the last answer, the kernel holds back our ACKs (for its delayed-ACK timeout) so they
can ride on our next write. A server that leaves Nagle's algorithm on (no TCP_NODELAY) sends its
status line and headers, then keeps its first SSE event in its send queue until those headers
are ACKed: on a kept-alive connection, calls one after another got each first token late by that
timeout (docs/performance.md). A new connection did not show it: the kernel ACKs at once in a
connection's first exchanges.

So each connection of ours
- sends a request in one write, headers and body together (httpcore writes them apart), on a
  TCP_NODELAY socket: no part of it waits for the server's ACK, however long the body;
- once the request is out, leaves delayed-ACK mode (TCP_QUICKACK, Linux), so the answer is
  ACKed as it is read and such a server sends its next piece at once.

The client's own connections (models/http.py) do it on their sockets, httpx's through the
network backend of models/httpcore_backend.py.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Callable
from typing import Any

NODELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only

# How to look at a socket without waiting: select.poll, or what the process's runtime lends in
# its place (the C library's under gevent: runtime/patching.py).
Poll = Callable[[], Any]


def ack_at_once(sock: Any) -> None:
    """Leave delayed-ACK mode; only after our write: the kernel takes a write for a reply and
    goes back to delaying its ACKs."""
    if QUICKACK is None or sock is None:
        return
    with contextlib.suppress(OSError):  # a hint: the read reports a broken connection
        sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)


def readable_now(sock: Any, poll: Poll) -> bool:
    """httpcore's is_socket_readable with the poll given: data or an end waiting to be read (an
    idle connection the server closed); a socket that is gone counts as readable."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poller = poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
