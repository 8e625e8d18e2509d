"""How many bytes a request's body may have: one function (`body_limit`) for every door.

| door                                              | limit                                       |
|---------------------------------------------------|---------------------------------------------|
| a webhook, REST, and every other route            | MINI_N8N_MAX_BODY_BYTES                     |
| a Chat Trigger's message (any type but multipart) | MINI_N8N_CHAT_BODY_MAX_BYTES, within it     |
| a Chat Trigger's message as multipart (files)     | MINI_N8N_MAX_BODY_BYTES                     |
| a message on the chat socket                      | its files as data URLs (4/3 of their size)  |
|                                                   |   beside a chat message, within the first   |

Past its door's limit a body is refused with 413 (api/bodies.py `limit`), and a socket message
closes its socket with 1009 (api/websocket.py). The process's limit bounds every door: no door
takes more than MINI_N8N_MAX_BODY_BYTES.
"""

from __future__ import annotations

from enum import StrEnum

from flask import Request

from core.settings import Settings

MULTIPART = "multipart/form-data"


class Door(StrEnum):
    """Where a body comes in."""

    WEBHOOK = "webhook"  # /webhook/<path> whose trigger is a Webhook node (or is unknown)
    CHAT = "chat"  # /webhook/<path> whose trigger is a Chat Trigger: a chat message
    CHAT_SOCKET = "chat socket"  # a message on the /chat WebSocket: a reply to a Chat node
    REST = "rest"  # /rest/..., the Chat Hub's /rest/chat/... included
    OTHER = "other"  # the pages, sign-in, approval links, health: no body is expected


def body_limit(settings: Settings, door: Door, mimetype: str = "") -> int:
    """The most bytes a body coming in at `door` (with that Content-Type) may have."""
    process = settings.max_body_bytes
    if door is Door.CHAT and mimetype != MULTIPART:
        # A chat message as JSON is text and metadata, far less than a webhook's body.
        return min(settings.chat_body_max_bytes, process)
    if door is Door.CHAT_SOCKET:
        files_as_data_urls = settings.chat_files_max_bytes * 4 // 3
        return min(files_as_data_urls + settings.chat_body_max_bytes, process)
    return process


def route_door(request: Request) -> Door:
    """The door of a request whose view does not name one itself (api/bodies.py
    `received_by_view`)."""
    return Door.REST if request.blueprint in ("rest", "chat_hub") else Door.OTHER
