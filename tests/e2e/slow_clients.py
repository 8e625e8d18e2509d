"""Clients that send slowly, on raw sockets: a request whose body (or head) comes a few bytes at
a time or stops, and a WebSocket frame written by hand so it can stop halfway. Shared by
tests/e2e/test_slow_senders.py and bench/slow_senders.py."""

from __future__ import annotations

import json
import os
import select
import socket
import struct
from urllib.parse import urlsplit


def connect(url: str, timeout: float = 30.0) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def request_head(url: str, length: int, mime: str = "application/json") -> bytes:
    """A POST's head for `url`, asking for a `100 Continue`: the server sends it once it parsed
    the head and is about to run the app, so the client knows its request is being served."""
    parts = urlsplit(url)
    return (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {mime}\r\n"
        f"Content-Length: {length}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()


def start_slow_post(url: str, body: bytes, sent: int) -> socket.socket:
    """A POST announcing `body` whose first `sent` bytes are sent once the server took it."""
    sock = connect(url)
    sock.sendall(request_head(url, len(body)))
    assert _read_exactly(sock, len(CONTINUE)) == CONTINUE
    sock.sendall(body[:sent])
    return sock


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def chat_body(session: str, size: int) -> bytes:
    """A chat message's JSON, padded with spaces to exactly `size` bytes."""
    body = json.dumps({"sessionId": session, "chatInput": "hello"}).encode()
    assert len(body) <= size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def readable(sock: socket.socket, seconds: float) -> bool:
    return bool(select.select([sock], [], [], seconds)[0])


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 answer: the body by its Content-Length; of a streamed
    answer (chunked), only what came with its head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    length = {k.lower(): v for k, v in fields.items()}.get("content-length")
    while length is not None and len(body) < int(length):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, body


def closed_by_peer(sock: socket.socket) -> bool:
    """The other side closed (or reset) the connection, with nothing more to read."""
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def masked_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """A whole WebSocket frame from a client (FIN set, masked as a client's must be)."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked
