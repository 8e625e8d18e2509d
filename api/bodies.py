"""Request bodies, read and parsed one way at every door: webhooks, the Chat Trigger (JSON and
multipart `metadata`), REST, and the chat WebSocket's frames (api/chat_socket.py).

- **Size, per route, refused early.** Each route sets its limit before the body is read
  (`limit`): a `Content-Length` past it is answered 413 before one byte is read, and a chunked
  body is cut off with 413 as soon as it passes it. The limits are settings (docs/limits.md).
- **Reading never holds the api.** A body is read in chunks with a turn of the gevent loop
  between them (`read`): on loopback a 16 MiB body arrives faster than it is read, and one read
  of it held every other request (`/healthz` included) for over 100 ms.
- **Parsing never holds the api.** JSON goes through core.jsontext.loads_request (orjson, no
  Python call per value, a bounded number of values, depth, no NaN/Infinity, no lone
  surrogate); a urlencoded form is counted before it is decoded, since its decoding is Python
  per field and per %-escape. So no body, whatever its shape, keeps the gevent loop from other
  requests for more than a few milliseconds.

A body that fails gets a 4xx JSON answer and starts nothing.
"""

from __future__ import annotations

from typing import Any

from flask import Request

from api.errors import ApiError
from core.jsontext import JSONTextError, loads_request
from worker.greenlets import pause

# What a urlencoded form may hold: fields ("&") and escapes ("%", "+") cost about a microsecond
# each to decode in Python; 20,000 of them stay near 20 ms.
MAX_FORM_TOKENS = 20_000
# Bodies past this are started one at a time (api/admission.py): memory, not time.
LARGE_BODY_BYTES = 1024 * 1024
# Read at once, then a turn of the loop: a few milliseconds of reading at most.
READ_CHUNK_BYTES = 256 * 1024


def limit(request: Request, max_bytes: int) -> None:
    """This request's body may be at most `max_bytes`: checked against Content-Length before
    reading, and while reading a body without one."""
    request.max_content_length = max_bytes


def read(request: Request) -> bytes:
    """The whole body, read a chunk at a time with the loop's other work in between, and kept
    where Flask keeps what `get_data(cache=True)` read (so forms parse from it)."""
    cached = getattr(request, "_cached_data", None)  # werkzeug's cache of a body read before
    if cached is not None:
        return cached
    chunks = []
    while chunk := request.stream.read(READ_CHUNK_BYTES):
        chunks.append(chunk)
        if len(chunk) == READ_CHUNK_BYTES:
            pause()
    data = request._cached_data = b"".join(chunks)
    return data


def json_value(request: Request, max_values: int | None = None) -> Any:
    """The body as any JSON value; an empty body is None."""
    data = read(request)
    if not data:
        return None
    return parse(data, max_values)


def json_object(request: Request, max_values: int | None = None) -> dict[str, Any]:
    value = json_value(request, max_values)
    if not isinstance(value, dict):  # an empty body (None) included
        raise ApiError(400, "The request body must be a JSON object")
    return value


def parse(data: bytes | str, max_values: int | None = None) -> Any:
    """The one body rule of every door: a value, or ApiError (400, or 413 for too many values)."""
    try:
        if max_values is None:
            return loads_request(data)
        return loads_request(data, max_values)
    except JSONTextError as err:
        raise ApiError(err.status, str(err)) from None


def require_json(request: Request) -> None:
    """A body, if any, must say it is JSON: a page on another site can send text/plain or a
    form without asking first (no CORS preflight), never application/json."""
    if request.content_length == 0 or (request.content_length is None and not _chunked(request)):
        return
    if request.mimetype != "application/json":
        raise ApiError(415, "The request body must be JSON (Content-Type: application/json)")


def form_fields(request: Request) -> dict[str, str]:
    """A urlencoded form's fields, after counting what decoding them would cost."""
    data = read(request)
    tokens = data.count(b"&") + data.count(b"%") + data.count(b"+")
    if tokens > MAX_FORM_TOKENS:
        raise ApiError(
            413, f"The form holds too many fields and escapes (at most {MAX_FORM_TOKENS:,})"
        )
    return request.form.to_dict()


def is_large(request: Request) -> bool:
    """Is the body past LARGE_BODY_BYTES (or of unknown length)?"""
    if request.content_length is not None:
        return request.content_length > LARGE_BODY_BYTES
    return _chunked(request)


def _chunked(request: Request) -> bool:
    return "chunked" in request.headers.get("Transfer-Encoding", "").lower()
