"""A streaming client for OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, LM Studio...),
the part of the OpenAI Chat Model node (engine/nodes/lm_chat_openai.py) that talks to the server.

The model always streams: text pieces go to the Agent's `on_token` as they arrive, tool calls are
reassembled from their pieces by index. The HTTP client (connections of our own,
engine/model_http.py, or httpx where a proxy is configured) blocks in socket reads, so a
background pump (a greenlet under gevent) reads the stream into a queue and the caller waits on
the queue in short slices: a stop is noticed within POLL seconds, even before the first byte.

The request is one POST of a plain JSON body and the answer is read as server-sent events, each
`data:` line parsed once into a dict: no SDK. The `openai` SDK did the same over its typed request
and response layers, which cost about a third of a worker's CPU per chat message (issue 14:
`maybe_transform` of the request's typed dicts, a pydantic-like model per streamed chunk) and
bought nothing this path reads.

Failures become NodeExecutionError messages a user can act on, built here from status codes and
never from the server's raw text or an exception's (which may echo headers or the key). Retries
happen only where they cannot duplicate output: before any token reached the Agent, never for
401/404/timeouts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from core import jsontext
from engine import model_connection, model_http
from engine.errors import ExecutionCanceled, NodeExecutionError
from engine.llm import Cancellation, TokenCallback, Tool
from engine.services import Spawn, spawn_thread
from memory.messages import ChatMessage, ToolCall

log = logging.getLogger(__name__)

LABEL = "OpenAI Chat Model"  # n8n's display name; messages start with the node's own name
DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_MS = 60000  # n8n's default
DEFAULT_MAX_RETRIES = 2  # n8n's default
MAX_RETRY_AFTER = 60.0  # a server asking for a longer pause gets an error, not a frozen chat
WARM_TIMEOUT = 2.0  # seconds: a worker start waits no longer for an endpoint (warm_endpoint)
MAX_DRAIN_BYTES = 4096  # after `[DONE]`, what a server may still send before its body ends
POLL = 0.1  # seconds between checks of the stop flag while waiting for the server
ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


@dataclass(frozen=True)
class OpenAiSettings:
    """Everything but the key: safe to print."""

    model: str = DEFAULT_MODEL
    base_url: str = field(default=DEFAULT_BASE_URL, repr=False)  # may hold user:password@
    timeout: float = DEFAULT_TIMEOUT_MS / 1000  # seconds, per connect/read
    max_retries: int = DEFAULT_MAX_RETRIES
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    credential_name: str = "openAiApi"
    label: str = LABEL
    organization: str | None = None


class _Failure(Exception):
    """One failed attempt, described for the user; invoke decides whether to retry."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


class OpenAiChatModel:
    retry_base_delay = 0.5  # seconds; doubles per retry when the server names no delay

    def __init__(
        self,
        settings: OpenAiSettings,
        api_key: str,
        cancel: Cancellation | None = None,
        spawn: Spawn = spawn_thread,
    ):
        self.settings = settings
        self._api_key = api_key
        self._cancel = cancel
        self._spawn = spawn

    @property
    def model_name(self) -> str:
        """The model id: what its tokenizer is chosen by (engine/tokenizer.py)."""
        return self.settings.model

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"OpenAiChatModel(model={s.model!r}, base_url={_safe_url(s.base_url)!r}, api_key=***)"
        )

    def invoke(
        self,
        messages: list[ChatMessage],
        tools: list[Tool],
        on_token: TokenCallback | None = None,
        cancel: Cancellation | None = None,
    ) -> ChatMessage:
        cancel = cancel if cancel is not None else self._cancel
        body = self.request_body(messages, tools)
        for attempt in range(self.settings.max_retries + 1):
            answer = _Answer(on_token, _safe_url(self.settings.base_url))
            try:
                self._stream_once(body, answer, cancel)
                return answer.message()
            except _Failure as failure:
                delay = self._retry_delay(failure, answer, attempt)
                if delay is None:
                    raise NodeExecutionError(f"{self.settings.label}: {failure.message}") from None
                log.info(
                    "%s: %s; retry %d of %d in %.1f s",
                    self.settings.label,
                    failure.message,
                    attempt + 1,
                    self.settings.max_retries,
                    delay,
                )
                _wait(delay, cancel)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def request_body(self, messages: list[ChatMessage], tools: list[Tool]) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": [to_openai(m) for m in messages]}
        if tools:
            body["tools"] = [tool_to_openai(t) for t in tools]
        optional = {"temperature": s.temperature, "max_tokens": s.max_tokens, "top_p": s.top_p}
        body.update({k: v for k, v in optional.items() if v is not None})
        return body

    def _retry_delay(self, failure: _Failure, answer: _Answer, attempt: int) -> float | None:
        if not failure.retryable or answer.emitted or attempt >= self.settings.max_retries:
            return None
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= MAX_RETRY_AFTER else None
        return self.retry_base_delay * 2**attempt

    def _stream_once(self, body: dict[str, Any], answer: _Answer, cancel) -> None:
        client = _shared_client(self.settings, self._api_key)
        payload = jsontext.dumps_bytes({**body, "stream": True})
        url = f"{self.settings.base_url}/chat/completions"
        pump = _Pump(client, url, payload, self._spawn)
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    raise ExecutionCanceled() from None
                try:
                    kind, value = pump.events.get(timeout=POLL)
                except queue.Empty:
                    continue
                if kind == "done":
                    return
                if kind == "chunks":
                    for chunk in value:
                        answer.add(chunk)
                else:
                    raise self._describe(value, kind, answer.emitted)
        finally:
            pump.stop()

    def _describe(self, err: BaseException, phase: str, emitted: bool) -> _Failure:
        s = self.settings
        url = _safe_url(s.base_url)
        if isinstance(err, httpx.InvalidURL | httpx.UnsupportedProtocol):
            return _Failure(f"invalid base URL {url}")  # never the exception's text: it may hold it
        if isinstance(err, httpx.TimeoutException):
            return _Failure(f"timed out after {s.timeout:g} s waiting for {url}")
        if isinstance(err, httpx.TransportError):
            if phase == "stream":
                return _Failure(
                    f"the connection to {url} was lost mid-stream", retryable=not emitted
                )
            return _Failure(f"could not connect to {url}", retryable=True)
        if isinstance(err, _StatusError):
            return self._describe_status(err, url)
        if isinstance(err, _StreamedError):
            text = self._server_text(err.body)
            return _Failure(f"the model reported an error mid-stream: {text}")
        if phase == "stream":  # undecodable SSE data, or chunks of the wrong shape
            return _Failure(f"malformed response stream from {url}")
        return _Failure(f"unexpected {type(err).__name__} calling {url}")

    def _describe_status(self, err: _StatusError, url: str) -> _Failure:
        s, status = self.settings, err.status_code
        code = err.body.get("code") if isinstance(err.body, dict) else None
        if status == 401:
            return _Failure(
                f'authentication failed (401): check the API key of credential "{s.credential_name}"'
            )
        if status == 403:
            return _Failure(
                f'access denied (403) for credential "{s.credential_name}": '
                f"{self._server_text(err.body)}"
            )
        if status == 404:
            text = self._server_text(err.body)
            if code == "model_not_found" or "model" in text.lower():
                return _Failure(f'model "{s.model}" not found (404)')
            return _Failure(f"{url}/chat/completions not found (404): check the base URL")
        if status == 429 and code == "insufficient_quota":
            return _Failure("quota exceeded (429): check the plan and billing of the account")
        if status == 429:
            after = _retry_after(err.headers)
            hint = f"; retry after {after:g} s" if after is not None else "; try again later"
            return _Failure(f"rate limited (429){hint}", retryable=True, retry_after=after)
        if status >= 500:
            return _Failure(f"server error ({status}) from {url}", retryable=True)
        return _Failure(f"request rejected ({status}): {self._server_text(err.body)}")

    def _server_text(self, body: Any) -> str:
        """The server's own explanation, cut short and with our key masked out of it."""
        text = body.get("message") if isinstance(body, dict) else None
        text = " ".join(str(text or "no details").split())[:300]
        return text.replace(self._api_key, "***") if len(self._api_key) >= 4 else text


_CLIENTS: dict[tuple, _ModelClient] = {}
_CLIENTS_LOCK = threading.Lock()
MAX_CLIENTS = 16  # distinct endpoints/keys per process; beyond that the oldest client is dropped
# httpx's, where a proxy is configured: as many connections as the openai SDK allowed, a worker
# streams many answers at once. Idle ones kept for reuse are fewer than its 100: httpcore's pool polls every idle connection's
# socket on each request and each release, which under gevent cost more CPU with 25 idle
# connections than opening new local ones did (32 concurrent answers, issue 14); 8 keep most
# of the reuse (no TCP and TLS handshake) at about the CPU of no reuse.
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=8)
# The client's own connections (engine/model_http.py) are taken without looking at the others:
# as many kept as the openai SDK keeps. With 8, a worker answering 32 chats at once closed and
# opened connections all the time, and a server's full listen queue cost a new one a second.
MAX_IDLE = 100
_TLS: list[Any] = []  # the process's one TLS context, built once (loading CAs takes a while)


def warm() -> None:
    """What the first model call would otherwise build or import: the TLS context every client
    shares, and the transport's modules (httpx imports httpcore when a client is first built).
    A worker calls it before it takes its first task (warm start, issue 14)."""
    httpx.Client(verify=_tls_context()).close()


def warm_endpoint(credential: Mapping[str, Any]) -> None:
    """Build the shared client of an `openAiApi` credential's endpoint, as the node would with
    its default options, and open its first connection (TCP, and TLS for a remote endpoint:
    most of a first model call's extra time) with a request that costs no tokens: the model
    list every OpenAI-compatible server answers. Raises what httpx raised."""
    base_url = str(credential.get("url") or DEFAULT_BASE_URL).rstrip("/")
    organization = credential.get("organizationId") or None
    settings = OpenAiSettings(base_url=base_url, organization=organization)
    client = _shared_client(settings, str(credential.get("apiKey") or ""))
    client.fetch(f"{base_url}/models", WARM_TIMEOUT)  # the answer does not matter


def _tls_context() -> Any:
    with _CLIENTS_LOCK:
        if not _TLS:
            _TLS.append(httpx.create_ssl_context())  # honours SSL_CERT_FILE / SSL_CERT_DIR
        return _TLS[0]


def _shared_client(s: OpenAiSettings, api_key: str) -> _ModelClient:
    """One client per endpoint and key for the whole process, so executions reuse its pooled
    (TLS) connections. It never retries: our own loop does, since a client's retries can
    neither be stopped nor know whether tokens were already handed on."""
    key = (s.base_url, hashlib.sha256(api_key.encode()).hexdigest(), s.organization, s.timeout)
    tls = _tls_context()
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            headers = {
                # Keyless local servers (Ollama) ignore it; the SDK sent the same.
                "Authorization": f"Bearer {api_key or 'none'}",
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
            }
            if s.organization:
                headers["OpenAI-Organization"] = s.organization
            client = _ModelClient(
                headers=headers, timeout=s.timeout, limits=LIMITS, verify=tls, trust_env=True
            )
            # No 40 ms stall on kept connections (issue 26): the short way's own sockets see to
            # it; this is for httpx's, where a proxy is configured and NO_PROXY names the host.
            model_connection.install(client)
            if len(_CLIENTS) >= MAX_CLIENTS:
                # Not closed here: an execution may still be reading from it. Its pooled
                # connections close once it is no longer referenced.
                _CLIENTS.pop(next(iter(_CLIENTS)))
            _CLIENTS[key] = client
        return client


class _ModelClient(httpx.Client):
    """httpx's client, with a short way for the model call: where no proxy is configured in the
    environment (httpx's `trust_env`), requests go over the client's own kept-alive connections
    (engine/model_http.py) with the client's headers and timeout. httpx's layers (auth and
    redirect flows, event hooks, a cookie jar, then httpcore's pool and h11) took 570 us of CPU
    per call against a local server, these connections 221 us (the bare exchange on a socket,
    104 us), for a POST with a bearer key that is never redirected; n8n's model client keeps no
    cookies either. With a proxy, httpx's own way, unchanged."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._direct = None
        if not urllib.request.getproxies():
            self._direct = model_http.Connections(
                self.headers.raw,
                self.timeout.read,
                kwargs["verify"],
                MAX_IDLE,
            )

    def post_stream(self, url: str, content: bytes) -> Any:
        """POST `content`, the response's body still to be read (close it): an httpx.Response,
        or the short way's model_http.Reply, which has the same parts."""
        if self._direct is None:
            return self.send(self.build_request("POST", url, content=content), stream=True)
        return self._direct.request("POST", url, content)

    def post_now(self, url: str, content: bytes) -> model_http.Sent | None:
        """POST `content` at once, on the short way's kept connection if one is idle (its
        `reply()` is what post_stream returns); None: post_stream it."""
        if self._direct is None:
            return None
        return self._direct.send("POST", url, content)

    def fetch(self, url: str, timeout: float) -> None:
        """GET `url` and read its answer (warm_endpoint: it opens a kept connection)."""
        if self._direct is None:
            self.get(url, timeout=timeout)
            return
        reply = self._direct.request("GET", url, timeout=timeout)
        try:
            reply.read()
        finally:
            reply.close()

    def close(self) -> None:
        if self._direct is not None:
            self._direct.close()
        super().close()


class _StatusError(Exception):
    """The server answered with an error status; `body` is its JSON error object (or text)."""

    def __init__(self, status_code: int, body: Any, headers: httpx.Headers):
        super().__init__(f"status {status_code}")  # never the body: it may echo the key
        self.status_code = status_code
        self.body = body
        self.headers = headers


class _StreamedError(Exception):
    """An `{"error": ...}` event inside the stream."""

    def __init__(self, body: Any):
        super().__init__("an error event in the stream")
        self.body = body


def _error_body(response: Any) -> Any:
    """As the SDK read it: the JSON's `error` object if there is one, else the JSON, else the
    text."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return data.get("error", data) if isinstance(data, dict) else data


def _sse_batches(pieces: Any) -> Any:
    """The `data` of each server-sent event, as bytes (several data lines joined by newlines),
    a list per piece of the body that completes any: what one read from the network brought,
    handed on at once. `event:`, `id:`, `retry:` and comment lines are not used by chat
    completions."""
    buffer = b""
    data: list[bytes] = []
    for piece in pieces:
        buffer += piece
        if b"\n" not in buffer:
            continue
        *lines, buffer = buffer.split(b"\n")
        events = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    events.append(b"\n".join(data))
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        if events:
            yield events
    if buffer.startswith(b"data:"):
        value = buffer[5:].rstrip(b"\r")
        data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield [b"\n".join(data)]


class _Answer:
    """Accumulates one streamed answer: text pieces and tool calls by index."""

    def __init__(self, on_token: TokenCallback | None, source: str):
        self.on_token = on_token
        self.source = source  # the endpoint, for messages
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.emitted = False  # a token reached the Agent: retrying would duplicate output

    def add(self, chunk: Any) -> None:
        try:
            text, pieces = _read_chunk(chunk)
        except (AttributeError, TypeError, KeyError, IndexError):
            raise _Failure(f"malformed response stream from {self.source}") from None
        for piece in pieces:
            self._add_call_piece(*piece)
        if text:
            self.parts.append(text)
            self.emitted = True
            if self.on_token is not None:
                self.on_token(text)

    def _add_call_piece(self, index: int | None, call_id: str, name: str, args: str) -> None:
        if index is None:  # servers that omit the index: a new id starts a new call
            last = max(self.calls, default=-1)
            is_new = last < 0 or (call_id and call_id != self.calls[last]["id"])
            index = last + 1 if is_new else last
        call = self.calls.setdefault(index, {"id": "", "name": "", "args": []})
        call["id"] = call["id"] or call_id
        call["name"] = call["name"] or name
        call["args"].append(args)

    def message(self) -> ChatMessage:
        tool_calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            tool_calls.append(ToolCall(call["name"], _parse_args(call), call["id"] or _new_id()))
        return ChatMessage("ai", "".join(self.parts), tool_calls=tool_calls)


def _read_chunk(chunk: dict[str, Any]) -> tuple[str, list[tuple[int | None, str, str, str]]]:
    """A chunk's text and tool-call pieces; TypeError/AttributeError/... when it has the wrong
    shape (a malformed stream)."""
    text, pieces = "", []
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta")
        if choice.get("index") not in (0, None) or delta is None:
            continue  # we ask for one choice; others would be a server quirk
        content = delta.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not text")
        text += content
        for tc in delta.get("tool_calls") or ():
            fn = tc.get("function") or {}
            name, args = fn.get("name") or "", fn.get("arguments") or ""
            if not isinstance(name, str) or not isinstance(args, str):
                raise TypeError("a tool call's name or arguments are not text")
            pieces.append((tc.get("index"), str(tc.get("id") or ""), name, args))
    return text, pieces


def _parse_args(call: dict[str, Any]) -> dict[str, Any]:
    raw = "".join(call["args"]).strip()
    if not call["name"]:
        raise _Failure("malformed response stream: a tool call without a tool name")
    try:
        args = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        raise _Failure(
            f'the model sent malformed arguments for tool "{call["name"]}" (not a JSON object)'
        )
    return args


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class _Pump:
    """Reads one streamed completion in the background into `events`:
    ("chunks", [dict, ...])..., then ("done", None) or (phase, exception) with phase request/stream."""

    def __init__(self, client: _ModelClient, url: str, payload: bytes, spawn: Spawn):
        self.events: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._answered = False  # the whole answer was read: what is left is the body's end
        # The request goes out now, on a kept connection, rather than once the reader first
        # runs: whatever else the caller's wait lets run first (the outbox's begin line, a
        # worker's next broker read) then happens while the model works, not before it has
        # the request.
        self._sent = self._post_now(client, url, payload)
        self._taken = threading.Lock()
        self._interrupt = spawn(lambda: self._run(client, url, payload))

    @staticmethod
    def _post_now(client: _ModelClient, url: str, payload: bytes) -> model_http.Sent | None:
        try:
            return client.post_now(url, payload)
        except Exception:  # a failure the reader's own request will meet and tell
            return None

    def _take_sent(self) -> model_http.Sent | None:
        with self._taken:
            sent, self._sent = self._sent, None
        return sent

    def _run(self, client: _ModelClient, url: str, payload: bytes) -> None:
        phase, response = "request", None
        try:
            sent = self._take_sent()
            if self._stopped.is_set():
                if sent is not None:
                    sent.close()
                return
            response = sent.reply() if sent is not None else client.post_stream(url, payload)
            if not response.is_success:
                response.read()
                raise _StatusError(response.status_code, _error_body(response), response.headers)
            phase = "stream"
            pieces = response.iter_bytes()
            for events in _sse_batches(pieces):
                if self._stopped.is_set():
                    return
                if self._hand_on(events):
                    break
            self._answered = True
            self.events.put(("done", None))
            _drain(pieces)
        except Exception as err:
            self.events.put((phase, err))
        finally:
            if response is not None:
                with contextlib.suppress(Exception):  # the connection is going away either way
                    response.close()

    def _hand_on(self, events: list[bytes]) -> bool:
        """The chunks of one read, put as one event (the caller wakes once for them, not once
        each); True at `[DONE]`. An error event raises after the chunks before it."""
        chunks = []
        try:
            for data in events:
                if data.startswith(b"[DONE]"):
                    return True
                chunk = jsontext.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise _StreamedError(chunk["error"])
                chunks.append(chunk)
            return False
        finally:
            if chunks:
                self.events.put(("chunks", chunks))

    def stop(self) -> None:
        self._stopped.set()
        sent = self._take_sent()
        if sent is not None:  # stopped before the reader took it up
            sent.close()
        if self._answered:
            return  # let it read the body's end, so its connection can serve the next call
        # A greenlet is interrupted in its socket wait at once and closes the response. A real
        # thread cannot be: it drops the stream at its next chunk or read timeout, while the
        # caller has already moved on.
        self._interrupt()


def _drain(pieces: Any) -> None:
    """Read the few bytes after `[DONE]` (the body's end): a response read to its end gives
    its connection back to the client's pool, where closing it early dropped it, and every
    model call paid a new TCP (and TLS) handshake. More than a body's end: let it go."""
    left = MAX_DRAIN_BYTES
    for piece in pieces:
        left -= len(piece)
        if left < 0:
            return


def _wait(seconds: float, cancel: Cancellation | None) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if cancel is not None and cancel.is_set():
            raise ExecutionCanceled()
        time.sleep(min(POLL, left))
    if cancel is not None and cancel.is_set():
        raise ExecutionCanceled()


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(float(value) * scale, 0.0)
        except ValueError:
            pass
    try:  # an HTTP date
        when = parsedate_to_datetime(headers.get("retry-after") or "")
        return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def _safe_url(url: str) -> str:
    """The base URL without user:password@ or a query string, fit for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the configured base URL"
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def to_openai(message: ChatMessage) -> dict[str, Any]:
    """One message in OpenAI's chat format."""
    out: dict[str, Any] = {"role": ROLES[message.role], "content": message.content}
    if message.role == "ai" and message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args)},
            }
            for c in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id or ""
    return out


def tool_to_openai(tool: Tool) -> dict[str, Any]:
    schema = tool.parameters or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }
