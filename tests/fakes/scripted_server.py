"""A server that answers each request with what a test scripts, byte for byte: for the model
client's HTTP tests (tests/models)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

Answer = Callable[[socket.socket, bytes], bool]  # (connection, request) -> keep serving it


class ScriptedServer:
    """Reads each request whole (head and Content-Length body) and lets `answer` write the
    response; counts connections and requests."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"
        self.connections = 0
        self.requests: list[bytes] = []
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with contextlib.suppress(OSError), conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                buffer = buffer[length:]
                if not self.answer(conn, self.requests[-1]):
                    return

    def stop(self) -> None:
        for sock in (self.listener, *self.open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.listener.close()


@contextlib.contextmanager
def serving(answer: Answer) -> Iterator[ScriptedServer]:
    server = ScriptedServer(answer)
    try:
        yield server
    finally:
        server.stop()


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def ok(body: bytes, *headers: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body
