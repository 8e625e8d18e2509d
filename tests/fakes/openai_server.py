"""A fake OpenAI-compatible server for tests: `POST /v1/chat/completions`, streamed or not, and
`GET /v1/models`.

It plays the mock model's part (DESIGN section 7) over the real wire format, so the OpenAI Chat
Model node can be tested end to end without a network:

    server, base_url = start_fake_openai()
    server.delay_per_token = 0.05      # seconds between streamed pieces
    server.fail = "429"; server.fail_count = 1   # only the first request fails
    ...
    server.stop()

`fail` modes: "400" (a body that says more than it should: BAD_REQUEST), "401", "404" (model
not found), "429" (with `retry-after`), "500", "malformed"
(garbage SSE line after two tokens), "bad_args" (a tool call whose arguments are not JSON),
"hang" (reads the request, never answers), "drop" (closes the connection mid-stream).
Requests are recorded in `server.requests` (path, lower-cased headers, body, the
`at` monotonic time it arrived) and never printed;
`server.sent` holds (monotonic time, kind, piece) for each streamed piece as it was flushed.
The 401 answer echoes the API key on purpose, as some servers do: the client must not repeat it.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.nodes.lm_chat_mock import tool_result as _tool_result

ARITHMETIC = re.compile(r"\(?-?\d+(?:\.\d+)?\)?(?:\s*[-+*/^%]\s*\(?-?\d+(?:\.\d+)?\)?)+")
NAME_IS = re.compile(r"\bmy name is\s+([^\s.,!?;:]+)", re.IGNORECASE)
ASKS_NAME = re.compile(r"\bwhat(?:'s| is) my name\b", re.IGNORECASE)
ARG_PIECE = 4  # characters of tool-call arguments per chunk: forces reassembly by the client
# A careless server's 400: what it says must reach the execution record, never a public client.
BAD_REQUEST = "bad request ... db password hunter2"


def tokenize(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def tool_result(content: Any) -> str:
    return _tool_result(content if isinstance(content, str) else json.dumps(content))


def scripted_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, list]:
    """(text, tool calls as (name, arguments JSON)) the mock model would answer."""
    last = messages[-1] if messages else {"role": "user", "content": ""}
    if last.get("role") == "tool":
        return f"Based on the tools: Calculator returned {tool_result(last.get('content'))}.", []
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    text = users[-1] if users else ""
    names = [t.get("function", {}).get("name", "") for t in tools]
    calculator = next((n for n in names if "calculator" in n.lower()), None)
    expressions = [m.group(0).strip() for m in ARITHMETIC.finditer(text)]
    if calculator and expressions:
        return "", [(calculator, json.dumps({"input": e})) for e in expressions]
    if ASKS_NAME.search(text):
        for earlier in reversed(users[:-1]):
            if named := NAME_IS.search(earlier):
                return f"Your name is {named.group(1)}.", []
        return "I don't know your name yet.", []
    if named := NAME_IS.search(text):
        return f"Nice to meet you, {named.group(1)}!", []
    return f"You said: {text}", []


def _error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.delay_per_token = 0.0
        self.fail: str | None = None
        self.fail_count: int | None = None  # fail only the first N requests; None = all of them
        self.retry_after = "1"
        self.requests: list[dict[str, Any]] = []
        self.sent: list[tuple[float, str, str]] = []
        self.client_gone = threading.Event()  # a write failed: the client closed the stream
        self.released = threading.Event()  # set by stop(): hanging handlers give up
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.shutdown()
        self.server_close()

    def __repr__(self) -> str:  # never the recorded headers: they hold the API key
        return f"FakeOpenAI({self.base_url}, fail={self.fail!r}, requests={len(self.requests)})"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet when a client hangs up: the model under test closes streams on purpose."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def record(
        self, path: str, headers: dict[str, str], body: Any, peer: Any = None, at: float = 0.0
    ) -> str | None:
        """Keep the request (the client's address: one per connection; `at`: the monotonic time
        its first line was read); answer which failure (if any) it gets."""
        with self._lock:
            self.requests.append(
                {"path": path, "headers": headers, "body": body, "peer": peer, "at": at}
            )
            first_n = self.fail_count is None or len(self.requests) <= self.fail_count
            return self.fail if first_n else None

    def note_sent(self, kind: str, piece: str) -> None:
        with self._lock:
            self.sent.append((time.monotonic(), kind, piece))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked bodies, so a dropped stream is detectably incomplete
    server: FakeOpenAI

    def setup(self) -> None:
        # As real servers (uvicorn, Go's net/http, nginx) do: without it, a small write that
        # follows another on a reused connection waits for the client's delayed ACK (40 ms).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the default prints every request line to stderr."""

    def do_GET(self) -> None:
        """The model list, which a worker asks for when it starts (warm start); not recorded."""
        if self.path.rstrip("/") != "/v1/models":
            return self._json(404, {"detail": "Not Found"})
        return self._json(
            200, {"object": "list", "data": [{"id": "gpt-4.1-mini", "object": "model"}]}
        )

    def do_POST(self) -> None:
        at = time.monotonic()  # its line and headers were just read
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {k.lower(): v for k, v in self.headers.items()}
        fail = self.server.record(self.path, headers, body, self.client_address, at)
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._json(404, {"detail": "Not Found"})
        if fail == "hang":
            self.server.released.wait(60)
            self.close_connection = True
            return None
        if fail in ("400", "401", "404", "429", "500"):
            return self._fail(fail, body, headers)
        text, calls = scripted_reply(body.get("messages") or [], body.get("tools") or [])
        if fail == "bad_args":
            calls = [(name, '{"input": "19 *') for name, _ in calls] or [("calculator", "{oops")]
        if not body.get("stream"):
            return self._json(200, _completion(body, text, calls))
        try:
            self._stream(body, text, calls, fail)
        except (BrokenPipeError, ConnectionResetError):
            self.server.client_gone.set()
            self.close_connection = True
        return None

    def _fail(self, fail: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        model = body.get("model")
        if fail == "400":
            return self._json(400, _error(BAD_REQUEST, "invalid_request_error", None))
        if fail == "401":
            key = headers.get("authorization", "").removeprefix("Bearer ")
            return self._json(
                401,
                _error(
                    f"Incorrect API key provided: {key}.",
                    "invalid_request_error",
                    "invalid_api_key",
                ),
            )
        if fail == "404":
            message = f"The model `{model}` does not exist or you do not have access to it."
            return self._json(404, _error(message, "invalid_request_error", "model_not_found"))
        if fail == "429":
            error = _error(f"Rate limit reached for {model}.", "requests", "rate_limit_exceeded")
            return self._json(429, error, {"retry-after": self.server.retry_after})
        return self._json(
            500,
            _error("The server had an error while processing your request.", "server_error", None),
        )

    def _json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, body: dict[str, Any], text: str, calls: list, fail: str | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        model = body.get("model", "")
        self._event(_chunk(model, {"role": "assistant", "content": ""}))
        for index, token in enumerate(tokenize(text)):
            if index == 2 and fail in ("malformed", "drop"):
                return self._break(fail)
            self._pause()
            # Noted as the write begins: a client can read a piece before a note taken after
            # the write, so `sent` times would not bound `received` ones.
            self.server.note_sent("content", token)
            self._event(_chunk(model, {"content": token}))
        for piece in _tool_call_deltas(calls):
            self._pause()
            self.server.note_sent("tool_call", json.dumps(piece))
            self._event(_chunk(model, {"tool_calls": [piece]}))
        self._event(_chunk(model, {}, "tool_calls" if calls else "stop"))
        self._write(b"data: [DONE]\n\n")
        self._write(b"")  # the last chunk: the body is complete
        return None

    def _break(self, fail: str) -> None:
        if fail == "malformed":
            self._write(b"data: {this is not json\n\n")
            self._write(b"data: [DONE]\n\n")
            self._write(b"")
            return
        self.close_connection = True  # "drop": no terminating chunk, the client sees a cut body
        self.connection.shutdown(socket.SHUT_RDWR)

    def _pause(self) -> None:
        if self.server.delay_per_token:
            self.server.released.wait(self.server.delay_per_token)

    def _event(self, payload: dict[str, Any]) -> None:
        self._write(f"data: {json.dumps(payload)}\n\n".encode())

    def _write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _tool_call_deltas(calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """OpenAI's shape: a head per call (id, name), then argument pieces, calls interleaved."""
    heads = [
        {
            "index": i,
            "id": f"call_fake_{i}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        for i, (name, _) in enumerate(calls)
    ]
    pieces = [
        [
            {"index": i, "function": {"arguments": args[p : p + ARG_PIECE]}}
            for p in range(0, len(args), ARG_PIECE)
        ]
        for i, (_, args) in enumerate(calls)
    ]
    interleaved = [piece for row in _zip_longest(pieces) for piece in row]
    return heads + interleaved


def _zip_longest(rows: list[list[Any]]) -> list[list[Any]]:
    longest = max((len(r) for r in rows), default=0)
    return [[r[i] for r in rows if i < len(r)] for i in range(longest)]


def _completion(body: dict[str, Any], text: str, calls: list[tuple[str, str]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_fake_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": len(tokenize(text)), "total_tokens": 1},
    }


def start_fake_openai(host: str = "127.0.0.1") -> tuple[FakeOpenAI, str]:
    """`host`: any loopback address (127.0.0.2 is another host to a client, on this machine)."""
    server = FakeOpenAI(host).start()
    return server, server.base_url


@contextmanager
def fake_openai():
    server, base_url = start_fake_openai()
    try:
        yield server, base_url
    finally:
        server.stop()
