"""The model client's kept-alive connections against a server that leaves Nagle's algorithm on:
on such a connection every first token waited for our delayed ACK (models/sockets.py). Over
plain HTTP and over TLS, on the client's own connections (models/http.py) and httpx's
(models/httpcore_backend.py wraps httpcore's TLS streams too)."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import httpcore
import pytest

from engine.model_settings import OpenAiSettings
from memory.messages import human
from models import httpcore_backend
from models.clients import ModelClients
from models.openai_chat import OpenAiChatModel

pytestmark = pytest.mark.fast  # servers on threads of this process; no process of ours

KEY = "sk-test-SECRET-123"
PIECES = ("Hello", " there", "!")
CALLS = 5


class NaglingServer:
    """A naive HTTP/1.1 server: keep-alive, TCP_NODELAY off on its sockets, the status line and
    headers in one send, then each chunk of the SSE body in a send of its own. Every request
    gets the same instant answer. It counts accepted connections and the reads (recv calls)
    each request took."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls
        self.client_tls: ssl.SSLContext | None = None  # what a client of it trusts
        self._listener = socket.create_server(("127.0.0.1", 0))
        scheme = "https" if tls else "http"
        self.base_url = f"{scheme}://127.0.0.1:{self._listener.getsockname()[1]}/v1"
        self.accepted = 0  # connections
        self.reads: list[int] = []  # per request
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        # shutdown, not close: it wakes the threads blocked in accept and recv.
        for sock in (self._listener, *self._open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # stopped
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self._tls:
                conn = self._tls.wrap_socket(conn, server_side=True)
            self._open.append(conn)
            buffer = b""
            while True:
                buffer = self._read_request(conn, buffer)
                self._answer(conn)
        except OSError:
            return  # the client (or stop) closed the connection
        finally:
            conn.close()

    def _read_request(self, conn: socket.socket, buffer: bytes) -> bytes:
        """Reads one request and returns what came after it."""
        reads = 0
        while b"\r\n\r\n" not in buffer or len(buffer) < _request_length(buffer):
            data = conn.recv(65536)
            if not data:
                raise ConnectionError("closed")
            buffer += data
            reads += 1
        self.reads.append(reads)
        return buffer[_request_length(buffer) :]

    def _answer(self, conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for piece in PIECES:
            delta = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            conn.sendall(_chunk(b"data: %s\n\n" % json.dumps(delta).encode()))
        conn.sendall(_chunk(b"data: [DONE]\n\n"))
        conn.sendall(b"0\r\n\r\n")


def _request_length(buffer: bytes) -> int:
    head, _, _ = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return len(head) + 4 + length


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Pumps:
    """Runs each answer's pump on a thread the test can join: once joined, the answer was read
    to its end and its connection is back in the pool, ready for the next call at once."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def __call__(self, fn: Callable[[], None]) -> Callable[[], None]:
        thread = threading.Thread(target=fn, daemon=True)
        thread.start()
        self._threads.append(thread)
        return lambda: None

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=10)
            assert not thread.is_alive(), "a pump never finished"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> str:
    """A self-signed certificate for 127.0.0.1, key included (PEM)."""
    pem = tmp_path_factory.mktemp("tls") / "server.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(pem), "-out", str(pem)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return str(pem)


@pytest.fixture(params=["http", "https"])
def server(request) -> Iterator[NaglingServer]:
    tls, client_tls = None, None
    if request.param == "https":
        pem = request.getfixturevalue("certificate")
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(pem)
        client_tls = ssl.create_default_context(cafile=pem)
    server = NaglingServer(tls)
    server.client_tls = client_tls
    yield server
    server.stop()


def models_for(server: NaglingServer, **kwargs) -> ModelClients:
    models = ModelClients(**kwargs)
    if server.client_tls is not None:
        models._tls = server.client_tls  # the clients' one TLS context, trusting this server
    return models


def first_token_ms(server: NaglingServer, calls: int) -> list[float]:
    """Milliseconds from each call's start to its first token, the calls back to back (as an
    Agent's tool rounds are): Linux delays its ACKs only when a request follows the previous
    answer within its delayed-ACK timeout."""
    pumps = Pumps()
    model = models_for(server, spawn=pumps).openai(OpenAiSettings(base_url=server.base_url), KEY)
    figures = []
    for _ in range(calls):
        figures.append(one_call_ms(model))
        pumps.join()
    return figures


def one_call_ms(model: OpenAiChatModel) -> float:
    tokens: list[float] = []
    start = time.monotonic()
    reply = model.invoke([human("hi")], [], lambda _: tokens.append(time.monotonic()))
    assert reply.content == "".join(PIECES)
    return (tokens[0] - start) * 1000


def test_calls_back_to_back_keep_one_connection(server):
    """What a delayed-ACK stall would cost each call is timed in bench/kept_alive_calls.py."""
    first_token_ms(server, CALLS)
    assert server.accepted == 1  # every call after the first reused the connection


def test_each_request_reaches_the_server_in_one_read(server):
    first_token_ms(server, CALLS)
    assert server.reads == [1] * CALLS  # headers and body in one write


def test_the_connections_are_tcp_nodelay(server):
    client = models_for(server).client(OpenAiSettings(base_url=server.base_url), KEY)
    reply = client.post_stream(f"{server.base_url}/chat/completions", b"{}")
    try:
        assert reply._conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        reply.read()
    finally:
        reply.close()
    # and httpx's own, where a proxy is configured and NO_PROXY names the host
    with client.stream("POST", f"{server.base_url}/chat/completions", content=b"{}") as response:
        sock = response.extensions["network_stream"].get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        response.read()


def test_an_idle_connection_is_readable_only_once_the_server_sent_or_closed():
    """What httpcore asks of each idle pooled connection before it reuses one, answered with a
    look that never waits (under gevent too: the unpatched poll)."""
    ours, theirs = socket.socketpair()
    stream = httpcore_backend.Stream(httpcore._backends.sync.SyncStream(ours), select.poll)
    try:
        assert stream.get_extra_info("is_readable") is False
        theirs.close()  # the server let the idle connection go
        assert stream.get_extra_info("is_readable") is True
    finally:
        stream.close()


def test_under_gevent_the_look_is_the_c_librarys_poll_not_gevents():
    code = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import select, gevent.select\n"
        "from models.clients import ModelClients\n"
        "from runtime.patching import unpatched_poll\n"
        "assert select.poll is gevent.select.poll\n"
        "models = ModelClients(poll=unpatched_poll())  # as a worker's runtime builds them\n"
        "assert models.poll is not gevent.select.poll\n"
        "assert models.poll is monkey.get_original('select', 'poll')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
