"""gunicorn's response as the api installs it (api/http_response.py): the same bytes on the wire
as gunicorn's own, in fewer writes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from gunicorn.http import wsgi

from api.http_response import Last, Response


class Socket:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))


def respond(cls, method: str, headers: list[tuple[str, str]], body: list[bytes]) -> list[bytes]:
    req = SimpleNamespace(version=(1, 1), method=method, should_close=lambda: False)
    cfg = SimpleNamespace(protocol="http", is_ssl=False, sendfile=None)
    sock = Socket()
    response = cls(req, sock, cfg)
    response.start_response("200 OK", headers)
    for piece in body:
        response.write(piece)
    response.close()
    return sock.writes


def same_bytes(writes: list[bytes], theirs: list[bytes]) -> bool:
    # The Date header may differ by a second between the two responses.
    def strip(data: bytes) -> bytes:
        return b"\r\n".join(x for x in data.split(b"\r\n") if not x.startswith(b"Date:"))

    return strip(b"".join(writes)) == strip(b"".join(theirs))


STREAM = [("Content-Type", "application/json; charset=utf-8")]
JSON = [("Content-Type", "application/json"), ("Content-Length", "11")]


@pytest.mark.parametrize(
    ("method", "headers", "body", "writes", "gunicorns"),
    [
        ("POST", STREAM, [b'{"type":"begin"}\n', b'{"type":"end"}\n'], 3, 4),  # +1: the end
        ("POST", STREAM, [b'{"a":1}\n{"b":2}\n'], 2, 3),
        ("POST", STREAM, [], 1, 2),  # headers and the chunked end at once
        ("POST", STREAM, [b"", b"x"], 3, 3),  # an empty write sends the headers at once
        # The body's last piece and the chunked end in one write.
        ("POST", STREAM, [b'{"type":"begin"}\n', Last(b'{"type":"end"}\n')], 2, 4),
        ("POST", STREAM, [Last(b'{"a":1}\n{"b":2}\n')], 1, 3),  # headers, body and end at once
        ("POST", STREAM, [b"x", Last(b"")], 2, 3),  # an empty last piece: the end as before
        ("GET", JSON, [b'{"ok":true}'], 1, 2),
        ("GET", JSON, [Last(b'{"ok":true}')], 1, 2),  # a length, not chunks: nothing to end
        ("HEAD", JSON, [b'{"ok":true}'], 1, 1),
    ],
)
def test_headers_go_with_the_first_body_bytes_and_the_wire_is_unchanged(
    method, headers, body, writes, gunicorns
):
    ours = respond(Response, method, headers, body)
    theirs = respond(wsgi.Response, method, headers, body)
    assert (len(ours), len(theirs)) == (writes, gunicorns)
    assert same_bytes(ours, theirs)
    assert ours[0].startswith(b"HTTP/1.1 200 OK\r\n")
    if body and body[0] and method != "HEAD":
        assert body[0] in ours[0]  # the first bytes went with the headers


def test_installed_gunicorn_builds_its_responses_with_it(monkeypatch):
    monkeypatch.setattr(wsgi, "Response", wsgi.Response)  # put back after the test
    from api.http_response import install

    assert install() is True
    req = SimpleNamespace(version=(1, 1), method="GET", should_close=lambda: False)
    assert isinstance(wsgi.create.__globals__["Response"](req, Socket(), None), Response)
