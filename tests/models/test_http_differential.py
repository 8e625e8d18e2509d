"""The model call's own HTTP/1.1 (models/http.py) and httpx, on the same recorded answers.

A local server plays each answer byte for byte, split where the test says; each client makes the
request the model call makes and its outcome is read as the model call reads it (models/pump.py):
the status, the decoded body and its server-sent events, or the failure a user is told
(models/openai_errors.py), with whether it is retried. The two must agree on every answer: the
short way is kept only as a faster path beside httpx's, never a different one."""

from __future__ import annotations

import gzip
import json
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model_settings import OpenAiSettings
from models.http import Connections
from models.openai_errors import Describer, StatusError, error_body
from models.openai_stream import sse_batches
from tests.fakes.scripted_server import ScriptedServer, chunked, ok, serving

pytestmark = pytest.mark.fast  # a server on threads of this process; no process of ours

KEY = "sk-test-SECRET-123"
HEADERS = [(b"Authorization", b"Bearer " + KEY.encode()), (b"Content-Type", b"application/json")]


def sse(*texts: str) -> bytes:
    """An OpenAI-style stream: one event per text piece, then [DONE]."""
    events = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in texts]
    return b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"


def answer(status: bytes, body: bytes, *headers: bytes) -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers)
    return head + b"\r\n" + body


def sized(status: bytes, body: bytes, *headers: bytes) -> bytes:
    return answer(status, body, *headers, b"Content-Length: %d" % len(body))


STREAM = sse("Hello", " there", ", kind", " world", "!")
CHUNKED_STREAM = ok(
    chunked(STREAM[:40], STREAM[40:]),
    b"Content-Type: text/event-stream",
    b"Transfer-Encoding: chunked",
)


class Script:
    """What the server plays for every request from now on: the answer's bytes cut at `cuts`
    (each piece a write of its own), then the connection kept or closed."""

    def __init__(self) -> None:
        self.data, self.cuts, self.keep = b"", (), True

    def play(self, data: bytes, cuts: tuple[int, ...] = (), keep: bool = True) -> None:
        self.data, self.cuts, self.keep = data, tuple(sorted(set(cuts))), keep

    def __call__(self, conn: socket.socket, _request: bytes) -> bool:
        # Each piece goes out at once (no Nagle): the client meets it as a read of its own
        # whenever it is not still busy with the previous one.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        at = 0
        for cut in (*self.cuts, len(self.data)):
            if cut > at:
                conn.sendall(self.data[at:cut])
                at = cut
        return self.keep


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[Script, ScriptedServer]]:
    script = Script()
    with serving(script) as server:
        yield script, server


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[str, Callable[[str], Any]]]:
    """Each way's request, as the model call makes it: a POST whose body is still to be read."""
    ours = Connections(HEADERS, 5.0, ssl.create_default_context())
    theirs = httpx.Client(headers=dict(HEADERS), timeout=5.0, trust_env=False)
    yield {
        "ours": lambda url: ours.request("POST", url, b"{}"),
        "httpx": lambda url: theirs.send(
            theirs.build_request("POST", url, content=b"{}"), stream=True
        ),
    }
    ours.close()
    theirs.close()


def outcome(open_reply: Callable[[], Any]) -> tuple:
    """What the model call concludes from one answer (models/pump.py reads it so)."""
    describe = Describer(OpenAiSettings(base_url="http://127.0.0.1/v1"), KEY)
    phase, body, reply = "request", b"", None
    try:
        reply = open_reply()
        if not reply.is_success:
            reply.read()
            raise StatusError(reply.status_code, error_body(reply), reply.headers)
        phase = "stream"
        for piece in reply.iter_bytes():
            body += piece
        events = [event for batch in sse_batches([body]) for event in batch]
        return ("answered", reply.status_code, body, events)
    except Exception as err:
        failure = describe.failure(err, phase, emitted=bool(body))
        return ("failed", failure.message, failure.retryable, failure.retry_after, body)
    finally:
        if reply is not None:
            reply.close()


def both(clients, server: ScriptedServer) -> dict[str, tuple]:
    return {name: outcome(lambda r=request: r(server.url)) for name, request in clients.items()}


def assert_same(results: dict[str, tuple]) -> tuple:
    assert results["ours"] == results["httpx"]
    return results["ours"]


def test_a_stream_split_at_every_byte_is_read_alike(scripted, clients):
    script, server = scripted
    for cut in range(1, len(CHUNKED_STREAM)):
        script.play(CHUNKED_STREAM, (cut,))
        result = assert_same(both(clients, server))
        assert result == ("answered", 200, STREAM, [e[6:] for e in STREAM.split(b"\n\n")[:-1]])


FRAMINGS: dict[str, Callable[[bytes], bytes]] = {
    "chunked": lambda body: ok(chunked(body[:7], body[7:]), b"Transfer-Encoding: chunked"),
    "length": lambda body: ok(body, b"Content-Length: %d" % len(body)),
    "gzip chunked": lambda body: ok(
        chunked(gzip.compress(body)), b"Transfer-Encoding: chunked", b"Content-Encoding: gzip"
    ),
    "gzip length": lambda body: ok(
        gzip.compress(body),
        b"Content-Length: %d" % len(gzip.compress(body)),
        b"Content-Encoding: gzip",
    ),
}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6),
    framing=st.sampled_from(sorted(FRAMINGS)),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
)
def test_any_stream_in_any_framing_and_any_split_is_read_alike(
    scripted, clients, texts, framing, cuts
):
    script, server = scripted
    data = FRAMINGS[framing](sse(*texts))
    script.play(data, tuple(c for c in cuts if c < len(data)))
    result = assert_same(both(clients, server))
    assert result[:3] == ("answered", 200, sse(*texts))


def test_a_body_ended_by_the_connections_close_is_read_alike(scripted, clients):
    script, server = scripted
    script.play(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + STREAM, (20, 90), keep=False)
    assert assert_same(both(clients, server))[:3] == ("answered", 200, STREAM)


def test_a_kept_connection_is_reused_alike(scripted, clients):
    script, server = scripted
    script.play(CHUNKED_STREAM)
    opened = {}
    for name, request in clients.items():
        before = server.connections
        for _ in range(3):
            assert outcome(lambda r=request: r(server.url))[0] == "answered"
        opened[name] = server.connections - before
    assert opened["ours"] == opened["httpx"] <= 1  # one new connection at most, then reused


@pytest.mark.parametrize(
    "data, cuts",
    [
        (CHUNKED_STREAM[:-60], (50,)),  # closed mid-body, inside a chunk
        (CHUNKED_STREAM[: CHUNKED_STREAM.index(b"\r\n\r\n") + 4], ()),  # after the head
        (ok(STREAM[:30], b"Content-Length: %d" % len(STREAM)), (10,)),  # short of its length
        (b"", ()),  # closed without an answer
        (b"HTTP/1.1 200 OK\r\nContent-Le", ()),  # closed inside the head
    ],
    ids=["mid-chunk", "after-head", "short-length", "no-answer", "mid-head"],
)
def test_a_connection_closed_early_is_the_same_failure(scripted, clients, data, cuts):
    script, server = scripted
    script.play(data, cuts, keep=False)
    result = assert_same(both(clients, server))
    assert result[0] == "failed"


QUOTA = b'{"error": {"message": "quota", "code": "insufficient_quota"}}'
ERRORS = {
    "401": sized(
        b"401 Unauthorized",
        b'{"error": {"message": "Incorrect API key provided: sk-test-SECRET-123"}}',
        b"Content-Type: application/json",
    ),
    "404 model": answer(
        b"404 Not Found",
        chunked(b'{"error": {"message": "The model does not exist", "code": "model_not_found"}}'),
        b"Transfer-Encoding: chunked",
    ),
    "429 retry-after": sized(
        b"429 Too Many Requests", b'{"error": {"message": "slow down"}}', b"Retry-After: 7"
    ),
    "429 quota gzip": sized(
        b"429 Too Many Requests", gzip.compress(QUOTA), b"Content-Encoding: gzip"
    ),
    "500 text": sized(b"500 Internal Server Error", b"upstream exploded"),
    "400 closed": answer(
        b"400 Bad Request", b'{"error": {"message": "bad tools"}}', b"Connection: close"
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_error_status_with_a_body_is_the_same_failure(scripted, clients, name):
    script, server = scripted
    script.play(ERRORS[name], (12,), keep=not name.endswith("closed"))
    result = assert_same(both(clients, server))
    assert result[0] == "failed" and KEY not in result[1]
