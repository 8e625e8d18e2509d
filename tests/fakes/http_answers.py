"""A small HTTP server with fixed answers, on loopback, for the HTTP Request node's tests and for
recording what the real n8n makes of the same answers (scripts/record-n8n-http-outputs).

Every answer is written byte for byte (no Date or Server header), so n8n and mini-n8n read the
same bytes. Routes:

    /json   /list   /text   /html   /file.png       fixed bodies of those types
    /echo...                 (any method) what the request carried: method, path with its
                             query, the headers named in ECHOED, the body as text
    /status/<code>           that status, with {"message": "status <code>"} as JSON
    /redirect?to=<url>&status=<3xx>   a redirect (302 by default); /loop redirects to itself
    /big?bytes=<n>           n bytes of text; /gzip?bytes=<n> the same, gzip-coded
    /hang                    reads the request, never answers (a timeout's test)

`server.requests` keeps each request's head and body, in order.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
from urllib.parse import parse_qs, urlsplit

ECHOED = ("content-type", "accept", "user-agent", "authorization", "x-api-key", "x-custom",
          "cookie", "content-length")  # fmt: skip
JSON_BODY = {"id": 1, "name": "Ada", "tags": ["a", "b"], "nested": {"ok": True}}
LIST_BODY = [{"n": 1}, {"n": 2}, {"n": 3}]
TEXT_BODY = "hello from the server\n"
HTML_BODY = (
    "<html><head><title>T</title><style>p{color:red}</style></head>"
    "<body><h1>Title</h1>\n<p>Some <b>bold</b> text.</p><script>x()</script></body></html>"
)
PNG_BODY = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")


class HttpAnswers:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.listener = socket.create_server((host, 0))
        self.host = host
        self.port = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.open: list[socket.socket] = []
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
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
                line, *lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for text in lines:
                    name, _, value = text.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
                self.requests.append((line, headers, body))
                answer = self.answer(line, headers, body)
                if answer is None:  # /hang: hold the connection until the client gives up
                    conn.recv(1)
                    return
                conn.sendall(answer)

    def answer(self, line: str, headers: dict[str, str], body: bytes) -> bytes | None:
        method, target = line.split(" ")[:2]
        parts = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        if path == "/json":
            return _answer(200, json.dumps(JSON_BODY).encode(), "application/json; charset=utf-8")
        if path == "/list":
            return _answer(200, json.dumps(LIST_BODY).encode(), "application/json")
        if path == "/text":
            return _answer(200, TEXT_BODY.encode(), "text/plain; charset=utf-8")
        if path == "/html":
            return _answer(200, HTML_BODY.encode(), "text/html; charset=utf-8")
        if path == "/file.png":
            return _answer(200, PNG_BODY, "image/png")
        if path.startswith("/echo"):
            echo = {
                "method": method,
                "path": target,
                "headers": {k: headers[k] for k in ECHOED if k in headers},
                "body": body.decode("utf-8", "replace"),
            }
            return _answer(200, json.dumps(echo).encode(), "application/json")
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            message = json.dumps({"message": f"status {code}"}).encode()
            return _answer(code, message, "application/json")
        if path == "/redirect":
            status = int(query.get("status", "302"))
            return _answer(status, b"", "text/plain", [("Location", query.get("to", "/json"))])
        if path == "/loop":
            return _answer(302, b"", "text/plain", [("Location", "/loop")])
        if path in ("/big", "/gzip"):
            data = b"x" * int(query.get("bytes", "0"))
            if path == "/gzip":
                return _answer(
                    200, gzip.compress(data), "text/plain", [("Content-Encoding", "gzip")]
                )
            return _answer(200, data, "text/plain")
        if path == "/hang":
            return None
        return _answer(404, b'{"message":"no such route"}', "application/json")

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.close()


REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 303: "See Other",
           307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request",
           401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


def _answer(status: int, body: bytes, content_type: str,
            extra: list[tuple[str, str]] | None = None) -> bytes:  # fmt: skip
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
             f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]  # fmt: skip
    lines += [f"{name}: {value}" for name, value in extra or []]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def start_http_answers(host: str = "127.0.0.1") -> HttpAnswers:
    return HttpAnswers(host)
