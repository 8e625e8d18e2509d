"""Request bodies, received, read and parsed one way at every door: webhooks, the Chat Trigger
(JSON and multipart `metadata`), REST, and the chat WebSocket's frames (api/chat_replies.py).

- **Received whole before anything else, under deadlines** (`receive`, run before every view).
  No turn (api/admission.py) is held while a body arrives: a client that sends slowly holds its
  connection and the bytes it sent, nothing others need. A body must keep coming: a pause of
  `idle_seconds` between two bytes, or less than `min_rate` bytes a second on average once its
  first `grace_seconds` are over, and it is cut off with 408 (`Arrival`, docs/limits.md).
  The bytes being received are bounded per process (`ByteBudget`, counted as they arrive): a
  body past SMALL_BODY_BYTES waits for room before each read, its sender held back by TCP
  meanwhile, so N clients sending 16 MiB at once cost the budget, not N x 16 MiB.
- **Size, per door, refused early.** Each request gets its door's limit (`limit`, decided by
  api/body_limit.py): a `Content-Length` past it is answered 413 before one byte is read, a
  chunked body is cut off with 413 as soon as it passes it, and a limit set once the body is in
  (a chat message found on re-routing) is checked against what arrived.
- **Reading never holds the api.** A body is read in pieces sized to how fast it arrives, with
  a turn of the gevent loop between them: on loopback a large body arrives faster than it is
  read, and one read of it held every other request, `/healthz` included (docs/performance.md).
- **Parsing never holds the api.** JSON goes through core.jsontext.loads_request (orjson, no
  Python call per value, a bounded number of values, depth, no NaN/Infinity, no lone
  surrogate); a urlencoded form is counted before it is decoded, since its decoding is Python
  per field and per %-escape; the loop turns between these steps. Parsing stays in the loop's
  thread: in a thread of its own it would still hold the GIL through each C call, and every
  socket call of the loop's other requests would then wait for the GIL, one C call each.

A body that fails gets a 4xx JSON answer and starts nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, Request, current_app, g, request

from api.admission import ByteBudget, Held, overloaded
from api.body_limit import Door, body_limit, route_door
from api.errors import ApiError
from core.jsontext import JSONTextError, loads_request
from core.settings import Settings
from runtime.patching import gevent_patched
from runtime.timers import pause

KIB, MIB = 1024, 1024 * 1024
# What a urlencoded form may hold: fields ("&") and escapes ("%", "+") are decoded in Python one
# at a time, so their count bounds how long a form holds the loop (docs/performance.md).
MAX_FORM_TOKENS = 20_000
# Bodies past this are started one at a time (api/admission.py): memory, not time.
LARGE_BODY_BYTES = MIB
# A body announced at most this long takes its bytes without waiting for the budget: a chat
# message is never held up behind large bodies (the budget still counts it).
SMALL_BODY_BYTES = 64 * KIB
# A read asks for what arrives in about READ_SECONDS at the rate seen so far, within these
# bounds: few reads for a fast body, and a slow one is checked against its deadline often.
MIN_READ_BYTES, MAX_READ_BYTES, READ_SECONDS = 16 * KIB, MIB, 0.1
# Read at once, then a turn of the loop: a few milliseconds of reading at most.
PAUSE_BYTES = 256 * KIB
INTAKE = "mini_n8n.intake"
_OWN_BODY = "mini_n8n_receives_body"


@dataclass(frozen=True)
class Arrival:
    """How a body (or a chat socket message) must arrive: core/settings.py's `body_*` settings,
    each with its reason there."""

    idle_seconds: float
    min_rate: float
    grace_seconds: float
    buffer_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Arrival:
        return cls(
            idle_seconds=settings.body_idle_seconds,
            min_rate=settings.body_min_rate,
            grace_seconds=settings.body_grace_seconds,
            buffer_bytes=settings.body_buffer_bytes,
        )


class TooSlow(TimeoutError):
    """A body or message missed its deadline (a TimeoutError, as a socket's own timeout is)."""


class Pace:
    """The deadlines of one body or message as it arrives (`Arrival`): by `started + grace +
    n / min_rate` its first n bytes must be in, and no gap between bytes may last `idle`."""

    __slots__ = ("arrival", "started", "received", "last")

    def __init__(self, arrival: Arrival, now: float):
        self.arrival = arrival
        self.started = self.last = now
        self.received = 0

    def arrived(self, size: int, now: float) -> None:
        self.received += size
        self.last = now

    def held_up(self, seconds: float) -> None:
        """The server, not the sender, kept the bytes waiting (no room in the budget)."""
        self.started += seconds
        self.last += seconds

    def due(self, more: int = 0) -> float:
        """When `more` bytes past what arrived must be in, by the rate (never, with no rate)."""
        rate = self.arrival.min_rate
        if rate <= 0:
            return math.inf
        return self.started + self.arrival.grace_seconds + (self.received + more) / rate

    def deadline(self) -> float:
        """When the sender is late unless another byte came: by the rate, or the idle time."""
        return min(self.due(), self.last + self.arrival.idle_seconds)

    def too_slow(self, what: str, stalled: bool) -> str:
        """What a sender that missed a deadline is told (HTTP's 408, a socket's close)."""
        arrival = self.arrival
        if stalled:
            return (
                f"{what} stalled: nothing arrived for {arrival.idle_seconds:g} s "
                "(MINI_N8N_BODY_IDLE_SECONDS)"
            )
        return (
            f"{what} arrived too slowly: less than {arrival.min_rate:g} bytes/s after its first "
            f"{arrival.grace_seconds:g} s (MINI_N8N_BODY_MIN_RATE)"
        )


@dataclass
class Intake:
    """One process's rules and budget for bodies and messages, kept in the app's extensions."""

    settings: Settings  # the limits (api/body_limit.py)
    arrival: Arrival
    budget: ByteBudget
    wait_seconds: float  # for room in the budget, as for a start turn (MINI_N8N_START_WAIT)


def install(app: Flask, settings: Settings) -> None:
    """Every request's body is received before its view runs (`receive`, under its route's
    limit; a view marked `received_by_view` sets its door's limit and receives it itself), and
    what it held is given back when the request ends at the latest."""
    arrival = Arrival.from_settings(settings)
    budget = ByteBudget(arrival.buffer_bytes)
    app.extensions[INTAKE] = Intake(settings, arrival, budget, settings.start_wait_seconds)
    app.before_request(_receive_before_view)
    app.teardown_request(lambda _error: release())


def received_by_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """The view calls `receive` itself, once it knows its route's limit."""
    setattr(view, _OWN_BODY, True)
    return view


def current_request() -> Request:
    """The request itself, not the proxy: a function that reads it many times (each read of
    the proxy is four calls) takes it once."""
    return request._get_current_object()  # type: ignore[attr-defined]


def _receive_before_view() -> None:
    req = current_request()
    view = current_app.view_functions.get(req.endpoint or "")
    if not getattr(view, _OWN_BODY, False):
        limit(req, route_door(req))
        receive(req)


def intake(app: Flask | None = None) -> Intake:
    intake: Intake = (app or current_app).extensions[INTAKE]
    return intake


def receive(request: Request) -> None:
    """The whole body, in before any turn is taken: read under the deadlines of `Arrival` and
    the process's budget of bytes, kept where Flask keeps what `get_data(cache=True)` read (so
    forms parse from it). 408 for a sender too slow, 413 past the limit, 503 if no room came."""
    length = request.content_length
    if not _has_body(request, length) or getattr(request, "_cached_data", None) is not None:
        return
    limit = request.max_content_length
    if length is not None and limit is not None and length > limit:
        raise _too_large(limit)
    rules = intake()
    held = g.body_held = Held(rules.budget)
    if "wsgi.input_terminated" in request.environ and gevent_patched():
        data = _receive(request, length, rules, held)
    else:  # a body already in memory (Flask's test client): nothing to wait for
        data = request.stream.read()
        held.take(len(data), None)
    request._cached_data = data  # werkzeug's cache of the body, which get_data and forms read


def release() -> None:
    """Give back the bytes this request's body took from the budget: its execution started
    (api/webhooks.py), or it ended."""
    held = g.pop("body_held", None)
    if held is not None:
        held.release()


def _receive(request: Request, length: int | None, rules: Intake, held: Held) -> bytes:
    """Read from the server's input: gunicorn ends it at the body's end (length or chunks); the
    socket's timeout is the idle time between two bytes, a timer each read's rate deadline."""
    environ = request.environ
    stream, sock = environ["wsgi.input"], environ.get("gunicorn.socket")
    small = length is not None and length <= SMALL_BODY_BYTES
    pace = Pace(rules.arrival, time.monotonic())
    reader = _Reader(length, request.max_content_length)
    previous = sock.gettimeout() if sock is not None else None
    if sock is not None:
        sock.settimeout(rules.arrival.idle_seconds)
    try:
        if length is not None and length <= MIN_READ_BYTES:
            return _at_once(stream, length, held, pace)
        while (size := reader.next_size()) > 0:
            _take_room(held, size, None if small else rules.wait_seconds, pace)
            started = time.monotonic()
            chunk = _read_in_time(stream, size, pace, started)
            held.give(size - len(chunk))
            pace.arrived(len(chunk), time.monotonic())
            if reader.add(chunk, time.monotonic() - started):
                pause()
    except TimeoutError as err:  # a socket's timeout (no byte for idle_seconds), or TooSlow
        stalled = not isinstance(err, TooSlow)
        raise ApiError(408, pace.too_slow("The request body", stalled)) from None
    finally:
        if sock is not None:
            sock.settimeout(previous)
    return reader.body()


def _read_in_time(stream: Any, size: int, pace: Pace, now: float) -> bytes:
    """Up to `size` bytes, in by the rate's deadline for them (TooSlow past it)."""
    import gevent

    due = pace.due(size)
    seconds = None if math.isinf(due) else max(due - now, 0.0)  # None: no rate
    with gevent.Timeout(seconds, TooSlow()):
        return stream.read(size)


def _at_once(stream: Any, length: int, held: Held, pace: Pace) -> bytes:
    """A body of one read's size (most chat messages): the same deadlines, without the
    bookkeeping of a body read piece by piece."""
    held.take(length, None)
    data = _read_in_time(stream, length, pace, time.monotonic())
    if len(data) < length:
        held.give(length - len(data))
        raise ApiError(400, "The request body ended before its Content-Length")
    return data


class _Reader:
    """The pieces of one body as they come, and how much to ask for next."""

    __slots__ = ("length", "limit", "chunks", "total", "size", "unpaused", "ended")

    def __init__(self, length: int | None, limit: int | None):
        self.length, self.limit = length, limit
        self.chunks: list[bytes] = []
        self.total = self.unpaused = 0
        self.size = MIN_READ_BYTES
        self.ended = False

    def next_size(self) -> int:
        if self.ended:
            return 0
        if self.length is not None:
            return min(self.size, self.length - self.total)
        if self.limit is not None:  # one byte past the limit is enough to refuse the body
            return min(self.size, self.limit + 1 - self.total)
        return self.size

    def add(self, chunk: bytes, seconds: float) -> bool:
        """Keep a piece; True when it is time for a turn of the loop."""
        if not chunk:
            if self.length is not None and self.total < self.length:
                raise ApiError(400, "The request body ended before its Content-Length")
            self.ended = True
            return False
        self.chunks.append(chunk)
        self.total += len(chunk)
        if self.limit is not None and self.total > self.limit:
            raise _too_large(self.limit)
        rate = len(chunk) / max(seconds, 1e-3)
        self.size = int(min(MAX_READ_BYTES, max(MIN_READ_BYTES, rate * READ_SECONDS)))
        self.unpaused += len(chunk)
        if self.unpaused < PAUSE_BYTES:
            return False
        self.unpaused = 0
        return True

    def body(self) -> bytes:
        return b"".join(self.chunks)


def limit(request: Request, door: Door) -> None:
    """This request's body may be at most its door's limit (api/body_limit.py): checked
    against Content-Length before reading, against what arrived once it is in."""
    mimetype = request.mimetype if door is Door.CHAT else ""  # only a chat's limit depends on it
    max_bytes = body_limit(intake().settings, door, mimetype)
    request.max_content_length = max_bytes
    length = request.content_length
    if length is not None and length > max_bytes:
        raise _too_large(max_bytes)
    cached = getattr(request, "_cached_data", None)
    if cached is not None and len(cached) > max_bytes:
        raise _too_large(max_bytes)


def _take_room(held: Held, size: int, wait: float | None, pace: Pace) -> None:
    """Room for the next read (a small body's at once); waiting for it is the server's delay,
    not the sender's."""
    started = time.monotonic()
    if not held.take(size, wait):
        raise overloaded()
    pace.held_up(time.monotonic() - started)


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(413, f"The request body is larger than {max_bytes:,} bytes")


def read(request: Request) -> bytes:
    """The whole body (received before the view ran, `receive`)."""
    cached = getattr(request, "_cached_data", None)  # werkzeug's cache of a body read before
    if cached is not None:
        return cached
    data = request._cached_data = request.stream.read()
    return data


def json_value(request: Request, max_values: int | None = None) -> Any:
    """The body as any JSON value; an empty body is None."""
    data = read(request)
    if not data:
        return None
    return parse(data, max_values)


def json_object(request: Request, max_values: int | None = None) -> dict[str, Any]:
    return parse_object(read(request), max_values)


def parse(data: bytes | str, max_values: int | None = None) -> Any:
    """The one body rule of every door: a value, or ApiError (400, or 413 for too many values)."""
    try:
        value = loads_request(data) if max_values is None else loads_request(data, max_values)
    except JSONTextError as err:
        raise ApiError(err.status, str(err)) from None
    if len(data) > PAUSE_BYTES:
        pause()  # parsing a large body held the loop a while: others first, then the next step
    return value


def parse_object(data: bytes | str, max_values: int | None = None) -> dict[str, Any]:
    """A JSON object, by the rule of every door: an HTTP body or a chat socket frame."""
    value = parse(data, max_values) if data else None
    if not isinstance(value, dict):  # an empty body (None) included
        raise ApiError(400, "The request body must be a JSON object")
    return value


def require_json(request: Request) -> None:
    """A body, if any, must say it is JSON: a page on another site can send text/plain or a
    form without asking first (no CORS preflight), never application/json."""
    if not _has_body(request, request.content_length):
        return
    if request.mimetype != "application/json":
        raise ApiError(415, "The request body must be JSON (Content-Type: application/json)")


def form_fields(request: Request) -> dict[str, str]:
    """A urlencoded form's fields, after counting what decoding them would cost."""
    data = read(request)
    tokens = 0
    for token in (b"&", b"%", b"+"):  # a pass over the body each, the loop's others between
        tokens += data.count(token)
        if len(data) > PAUSE_BYTES:
            pause()
    if tokens > MAX_FORM_TOKENS:
        raise ApiError(
            413, f"The form holds too many fields and escapes (at most {MAX_FORM_TOKENS:,})"
        )
    return request.form.to_dict()


def is_large(request: Request) -> bool:
    """Is the body past LARGE_BODY_BYTES? (Known once it is in; before, by its announcement.)"""
    cached = getattr(request, "_cached_data", None)
    if cached is not None:
        return len(cached) > LARGE_BODY_BYTES
    length = request.content_length
    if length is not None:
        return length > LARGE_BODY_BYTES
    return _chunked(request)


def _has_body(request: Request, length: int | None) -> bool:
    if length is not None:
        return length > 0
    return _chunked(request)


def _chunked(request: Request) -> bool:
    return "chunked" in request.headers.get("Transfer-Encoding", "").lower()
