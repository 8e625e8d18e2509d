"""Editor push over Server-Sent Events: `GET /rest/push?pushRef=<tab>`.

Workers publish push events (core.events) on `push:<pushRef>` for executions the tab started;
each becomes one SSE `data:` line holding `{"type", "data"}`. The subscription is confirmed by
Redis before the response starts, so once the browser sees the stream open, nothing the tab starts
afterwards can be missed. EventSource cannot send headers: the key may come as `?key=` (never
logged here; `mini-n8n api` keeps query strings out of its access log).
"""

from __future__ import annotations

import logging
import threading

from flask import Blueprint, Response, request

from api.errors import ApiError
from api.relay import RelayError, Stream
from api.rest import auth
from api.rest.workflows import PUSH_REF
from api.runtime import runtime
from core.events import Kind
from core.jsontext import dumps

log = logging.getLogger("mini_n8n.api")

bp = Blueprint("push", __name__)

HEARTBEAT_SECONDS = 15.0  # a comment line this often keeps proxies from closing a quiet stream
RETRY_MS = 1000  # how soon EventSource reconnects after the stream ends

# A tab that reconnects may do so before this process noticed the old connection was gone:
# the newest connection of a pushRef wins and the old stream is ended.
_open: dict[str, Stream] = {}
_open_lock = threading.Lock()
# Set once the api is stopping: a stream ended then is reconnected by the browser a second later,
# on the same keep-alive connection, and a new stream would hold the shutdown again.
_closing = threading.Event()


@bp.get("/rest/push")
def push() -> Response:
    auth.require_key(allow_query=True)
    push_ref = request.args.get("pushRef", "")
    if not PUSH_REF.match(push_ref):
        raise ApiError(400, '"pushRef" must be 1-64 letters, digits, "-" or "_"')
    if _closing.is_set():
        raise _stopping()
    rt = runtime()
    relay = rt.relay()
    channel = rt.keys.push(push_ref)
    with _open_lock:
        old = _open.pop(channel, None)
    if old is not None:
        relay.unsubscribe(old)
        old.fail("replaced by a newer connection")
    try:
        stream = relay.subscribe(channel, ordered=False)
    except RelayError as err:
        log.warning("push %s: %s", push_ref, err)  # the error names Redis' address: not public
        raise ApiError(503, "push is unavailable: Redis is unreachable") from err
    with _open_lock:
        closing = _closing.is_set()  # read under the lock `end_all` takes: no stream slips by
        if not closing:
            _open[channel] = stream
    if closing:
        relay.unsubscribe(stream)
        raise _stopping()

    def close() -> None:
        relay.unsubscribe(stream)
        with _open_lock:
            if _open.get(channel) is stream:
                del _open[channel]

    response = Response(
        _events(stream, close),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
    response.call_on_close(close)  # also when the generator never started
    return response


def _events(stream: Stream, close):
    try:
        yield f"retry: {RETRY_MS}\n: connected\n\n"
        while True:
            event = stream.get(timeout=HEARTBEAT_SECONDS)
            if event is None:
                yield ": heartbeat\n\n"
            elif event.kind == Kind.PUSH:
                yield f"data: {dumps(event.body)}\n\n"
            elif event.kind in (Kind.BROKEN, Kind.MISSED):
                # End the stream; the browser reconnects and catches up over REST.
                reason = event.reason or "events may have been missed"
                payload = {"type": "pushError", "data": {"message": reason}}
                yield f"data: {dumps(payload)}\n\n"
                return
    finally:
        close()


def _stopping() -> ApiError:
    """The answer to a push request while the api stops: EventSource gives up on a 503 and the
    tab opens a new connection a little later, which another api process (or this one, started
    again) takes."""
    return ApiError(503, "the api is shutting down; the editor reconnects by itself")


def end_all(reason: str) -> int:
    """End every open push stream of this process, and refuse new ones, because the api is
    shutting down: editor tabs are endless streams and would otherwise hold the shutdown for the
    whole graceful timeout. The browser reconnects to another api process and catches up over
    REST. Returns how many streams it ended."""
    with _open_lock:
        _closing.set()
        streams = list(_open.values())
    for stream in streams:
        stream.fail(reason)
    return len(streams)
