"""The model call's own HTTP/1.1 (models/http.py) against servers that answer as scripted,
byte for byte: the body's framings, compression, kept connections that the server let go, and
what a broken answer raises (httpx's exceptions, which the model call's messages are built
from)."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import zlib

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import http as model_http
from models import http_body
from tests.fakes.scripted_server import Answer, chunked, ok, serving
from tests.waiting import wait_until

pytestmark = pytest.mark.fast  # servers on threads of this process; no process of ours


def client(timeout: float = 5.0) -> model_http.Connections:
    headers = [(b"Authorization", b"Bearer sk-test"), (b"Content-Type", b"application/json")]
    return model_http.Connections(headers, timeout, ssl.create_default_context())


def reply_with(*responses: bytes) -> Answer:
    """Each request gets the next response, in one write; the connection stays open."""
    left = list(responses)

    def answer(conn: socket.socket, _request: bytes) -> bool:
        conn.sendall(left.pop(0))
        return True

    return answer


def body_of(connections: model_http.Connections, url: str, request: bytes = b"{}") -> bytes:
    reply = connections.request("POST", url, request)
    try:
        assert reply.is_success, reply.status_code
        return reply.read()
    finally:
        reply.close()


# --- the framings of a body ---------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=6),
    st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=40),
)
def test_a_chunked_body_is_the_same_however_the_network_splits_it(pieces, cuts):
    framed = b"%x;ext=1\r\n%s\r\n" % (len(pieces[0]), pieces[0]) + chunked(*pieces[1:])
    framed = framed[:-2] + b"Trailer-Field: x\r\n\r\n"  # a trailer before the end, as allowed
    decoder, out, at = http_body.Chunked(), [], 0
    for cut in cuts:
        out.append(decoder.feed(framed[at : at + cut]))
        at += cut
    out.append(decoder.feed(framed[at:]))
    assert b"".join(out) == b"".join(pieces)
    assert decoder.done


@pytest.mark.parametrize("size", [b"zz", b"", b"-1", b"1" * 17])
def test_a_malformed_chunk_size_is_a_protocol_error(size):
    with pytest.raises(httpx.RemoteProtocolError):
        http_body.Chunked().feed(size + b"\r\nabc\r\n")


def test_a_chunk_not_ended_by_crlf_is_a_protocol_error():
    with pytest.raises(httpx.RemoteProtocolError):
        http_body.Chunked().feed(b"3\r\nabcXX")


def test_bodies_framed_by_chunks_by_length_and_by_the_connections_end():
    with serving(
        reply_with(
            ok(chunked(b"data: one\n\n", b"data: two\n\n"), b"Transfer-Encoding: chunked"),
            ok(b"0123456789", b"Content-Length: 10"),
            ok(b"until the end", b"Connection: close"),
        )
    ) as server:
        connections = client()
        assert body_of(connections, server.url) == b"data: one\n\ndata: two\n\n"
        assert body_of(connections, server.url) == b"0123456789"
        # Without a length or chunks the body ends with the connection: the server's close.
        reply = connections.request("POST", server.url, b"{}")
        server.open[-1].shutdown(socket.SHUT_WR)
        assert reply.read() == b"until the end"
        reply.close()
        assert server.connections == 1  # the first two answers shared the connection
        assert connections.idle(("http", "127.0.0.1", server.port)) == 0


def test_a_body_is_handed_on_a_piece_per_network_read():
    sent = threading.Event()

    def answer(conn: socket.socket, _request: bytes) -> bool:
        conn.sendall(ok(b"", b"Transfer-Encoding: chunked") + b"5\r\nfirst\r\n")
        sent.wait(5)
        conn.sendall(chunked(b"second"))
        return True

    with serving(answer) as server:
        reply = client().request("POST", server.url, b"{}")
        pieces = reply.iter_bytes()
        assert next(pieces) == b"first"  # before the rest was even sent
        sent.set()
        assert b"".join(pieces) == b"second"
        reply.close()


@pytest.mark.parametrize(
    "encoding, compress",
    [
        (b"gzip", gzip.compress),
        (b"deflate", zlib.compress),
        (b"deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers
    ],
)
def test_a_compressed_body_is_decompressed(encoding, compress):
    body = b'{"error": {"message": "quota"}}' * 20
    answer = ok(
        compress(body),
        b"Content-Encoding: " + encoding,
        b"Content-Length: %d" % len(compress(body)),
    )
    with serving(reply_with(answer)) as server:
        assert body_of(client(), server.url) == body


def test_an_interim_answer_is_skipped():
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    with serving(reply_with(interim + ok(b"done", b"Content-Length: 4"))) as server:
        assert body_of(client(), server.url) == b"done"


# --- the request ----------------------------------------------------------------------------------


def test_a_request_is_one_write_with_the_host_the_headers_and_the_body():
    with serving(reply_with(ok(b"", b"Content-Length: 0"))) as server:
        body_of(client(), server.url, b'{"model": "m"}')
    port = str(server.port)
    assert server.requests == [
        b"POST /v1/chat/completions HTTP/1.1\r\n"
        b"Host: 127.0.0.1:" + port.encode() + b"\r\n"
        b"Authorization: Bearer sk-test\r\nContent-Type: application/json\r\n"
        b'Content-Length: 14\r\n\r\n{"model": "m"}'
    ]


# --- kept connections -------------------------------------------------------------------------------


def test_an_idle_connection_the_server_closed_is_not_reused():
    def answer(conn: socket.socket, _request: bytes) -> bool:
        conn.sendall(ok(b"hi", b"Content-Length: 2"))
        return False  # then it closes the connection, as an idle timeout would

    with serving(answer) as server:
        connections = client()
        assert body_of(connections, server.url) == b"hi"
        assert body_of(connections, server.url) == b"hi"
        assert server.connections == 2 and len(server.requests) == 2


def test_a_connection_idle_past_the_keepalive_expiry_is_not_reused(monkeypatch):
    with serving(reply_with(*[ok(b"hi", b"Content-Length: 2")] * 3)) as server:
        connections = client()
        body_of(connections, server.url)
        body_of(connections, server.url)
        assert server.connections == 1
        monkeypatch.setattr(model_http, "KEEPALIVE_EXPIRY", 0.0)
        body_of(connections, server.url)
        assert server.connections == 2


def test_many_answers_at_once_keep_their_connections():
    """32 calls at once, then 32 again: the second round reuses the first's connections (a
    worker answering many chats must not close and open connections all the time)."""
    with serving(
        lambda conn, request: conn.sendall(ok(b"hi", b"Content-Length: 2")) or True
    ) as server:
        connections = client()
        for _ in range(2):
            replies = [connections.request("POST", server.url, b"{}") for _ in range(32)]
            for reply in replies:
                assert reply.read() == b"hi"
                reply.close()
        assert server.connections == 32 and len(server.requests) == 64


def test_a_kept_connection_dropped_as_the_request_came_is_replaced_once():
    first = threading.Event()

    def answer(conn: socket.socket, _request: bytes) -> bool:
        if not first.is_set():
            first.set()
            conn.sendall(ok(b"hi", b"Content-Length: 2"))
            return True
        if len(server.requests) == 2:
            return False  # the kept connection: read the request, then closed without a word
        conn.sendall(ok(b"again", b"Content-Length: 5"))
        return True

    with serving(answer) as server:
        connections = client()
        assert body_of(connections, server.url) == b"hi"
        assert body_of(connections, server.url) == b"again"
        assert server.connections == 2 and len(server.requests) == 3


def test_a_request_sent_now_is_on_the_wire_before_its_answer_is_asked_for():
    with serving(reply_with(*[ok(b"hi", b"Content-Length: 2")] * 2)) as server:
        connections = client()
        assert connections.send("POST", server.url, b"{}") is None  # no kept one: not yet
        assert body_of(connections, server.url) == b"hi"
        sent = connections.send("POST", server.url, b'{"n": 2}')
        assert sent is not None
        wait_until(lambda: len(server.requests) == 2, 5, "the request, before reply() is called")
        assert server.requests[1].endswith(b'{"n": 2}')
        reply = sent.reply()
        assert reply.read() == b"hi"
        reply.close()
        assert server.connections == 1 and connections.idle(("http", "127.0.0.1", server.port))


def test_a_request_sent_now_on_a_connection_the_server_dropped_goes_again_on_a_new_one():
    def answer(conn: socket.socket, request: bytes) -> bool:
        if len(server.requests) == 2:
            return False  # read the request on the kept connection, then closed it
        conn.sendall(ok(b"hi", b"Content-Length: 2"))
        return True

    with serving(answer) as server:
        connections = client()
        assert body_of(connections, server.url) == b"hi"
        sent = connections.send("POST", server.url, b"{}")
        assert sent is not None
        reply = sent.reply()
        assert reply.read() == b"hi"
        reply.close()
        assert server.connections == 2 and len(server.requests) == 3


def test_a_new_connection_closed_without_an_answer_is_an_error_not_retried():
    with serving(lambda conn, request: False) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            client().request("POST", server.url, b"{}")
        assert len(server.requests) == 1


def test_a_body_not_read_to_its_end_closes_its_connection():
    with serving(reply_with(ok(b"0123456789", b"Content-Length: 10"))) as server:
        connections = client()
        reply = connections.request("POST", server.url, b"{}")
        reply.close()
        assert connections.idle(("http", "127.0.0.1", server.port)) == 0


# --- failures, as httpx tells them -------------------------------------------------------------------


def test_a_body_cut_short_is_a_protocol_error():
    with serving(
        lambda conn, request: conn.sendall(ok(b"abc", b"Content-Length: 10")) or False
    ) as server:
        reply = client().request("POST", server.url, b"{}")
        with pytest.raises(httpx.RemoteProtocolError):
            reply.read()
        reply.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2xx Fine\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
    ],
)
def test_what_is_not_an_http_answer_is_a_protocol_error(answer):
    with serving(reply_with(answer)) as server, pytest.raises(httpx.RemoteProtocolError):
        client().request("POST", server.url, b"{}")


def test_a_silent_server_is_a_read_timeout():
    with serving(lambda conn, request: True) as server, pytest.raises(httpx.ReadTimeout):
        client(timeout=0.2).request("POST", server.url, b"{}")


def test_nobody_listening_is_a_connect_error():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        client().request("POST", f"http://127.0.0.1:{port}/v1", b"{}")


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "http:///v1", "http://host:99999/v1"])
def test_a_url_that_is_not_http_is_refused_before_connecting(url):
    with pytest.raises((httpx.UnsupportedProtocol, httpx.InvalidURL)):
        client().request("POST", url, b"{}")
