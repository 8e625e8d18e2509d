"""What the chat WebSocket says to `@n8n/chat`: its frames and its close codes.

Server frames are what the widget expects: each Chat-node message as a text frame (its text as
is; an approval's buttons with their links made absolute, api/waiting_webhook.py),
`n8n|continue` after a message that waits for no reply and, as n8n does, before the next message
when a wait ended some other way than by a reply on this socket (a button click, a POST, an
expired limit), `n8n|heartbeat` when quiet (answered `n8n|heartbeat-ack`), and
`{"type":"error","message":…}` (the widget shows `message`) when something cannot be done.
A socket ends with a close frame that says why, never with HTTP bytes in the upgraded socket.
"""

from __future__ import annotations

from core.jsontext import dumps

HEARTBEAT = "n8n|heartbeat"
HEARTBEAT_ACKS = ("n8n|heartbeat-ack", '{"type":"heartbeat-ack"}')
CONTINUE = "n8n|continue"

ALREADY_OPEN = "This conversation was opened in another window."
FULL = "This server holds as many chats as it may; try again shortly."
IDLE = "Closed after a long time without a message; reconnect to go on."
INTERNAL = "Internal server error"
# Redis failed under the socket (a restart, a partition): said as the HTTP doors say a 503, with
# nothing of where Redis is; the client may send again once it is back.
UNAVAILABLE = "The chat is unavailable: Redis was unreachable. Send your message again."
CLOSE_UNAVAILABLE = 1013  # "try again later"

# 1012, "service restart": the client may reconnect (to this api once it is back, or another).
CLOSE_RESTART = 1012
CLOSE_NORMAL = 1000
CLOSE_SILENT = 1001  # "going away": the client stopped answering heartbeats
CLOSE_IDLE = 1001  # "going away": no message from the client for too long
CLOSE_REFUSED = 1008  # "policy violation": not this chat's user (token, origin, login)
CLOSE_INTERNAL = 1011  # a bug; the reason says no more than an HTTP 500 would
CLOSE_FULL = 1013  # "try again later": this process holds as many sockets as it may
CLOSE_TOO_SLOW = 1008  # "policy violation": a message that stalled or trickled (HTTP's 408)


def error_frame(message: str) -> str:
    return dumps({"type": "error", "message": message})
