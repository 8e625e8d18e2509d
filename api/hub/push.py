"""`GET /rest/chat/push`: the signed-in user's Chat Hub events over Server-Sent Events, each a
`data:` line holding n8n's push message `{"type": "chatHub…", "data": {...}}` (the editor's push,
api/push.py, is per tab and per execution; the hub's is per user and carries every
conversation's events). The subscription is confirmed before the stream opens, so once the
browser sees it open nothing afterwards is missed; what came before, or while it was closed, a
reconnect reads back (`POST /rest/chat/conversations/:id/reconnect`). Any api process serves any
user: the events travel on Redis.
"""

from __future__ import annotations

import logging

from flask import Response

from api.errors import ApiError
from api.hub import bp
from api.hub.state import hub
from api.hub_identity import current_user
from api.relay import RelayError
from core.jsontext import dumps

log = logging.getLogger("mini_n8n.hub")

HEARTBEAT_SECONDS = 15.0  # a comment line this often keeps proxies from closing a quiet stream
RETRY_MS = 1000  # how soon EventSource reconnects after the stream ends


@bp.get("/push")
def push() -> Response:
    h = hub()
    channel = h.rt.keys.hub_push(current_user().id)
    try:
        listener = h.fanout.listen(channel)
    except RelayError as err:
        log.warning("hub push: %s", err)  # names Redis' address: not public
        raise ApiError(503, "push is unavailable: Redis is unreachable") from err
    closed: list[bool] = []

    def close() -> None:
        if not closed:
            closed.append(True)
            h.fanout.leave(channel, listener)

    def events():
        try:
            yield f"retry: {RETRY_MS}\n: connected\n\n"
            while True:
                message = listener.get(HEARTBEAT_SECONDS)
                if message is not None:
                    yield f"data: {message}\n\n"
                elif listener.ended is not None:
                    error = {"type": "pushError", "data": {"message": listener.ended}}
                    yield f"data: {dumps(error)}\n\n"
                    return
                else:
                    yield ": heartbeat\n\n"
        finally:
            close()

    response = Response(
        events(),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
    response.call_on_close(close)
    return response
