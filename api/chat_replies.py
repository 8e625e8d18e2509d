"""What a chat WebSocket's client says: heartbeat acks, and its reply to the Chat node that
waits, `{"sessionId","action":"sendMessage","chatInput","files"}`, which is the session's next
message and which the conversation takes (api/conversation.py).

Every client frame goes through the body rules of every door in HTTP's words
(api/bodies.py `parse_object`; a binary frame must be UTF-8), its files through the multipart
limits and types: a bad frame gets an error frame and the wait goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from api import bodies
from api.chat_feed import ChatFeed
from api.chat_files import reply_files
from api.chat_frames import HEARTBEAT_ACKS, error_frame
from api.chat_heartbeat import Heartbeat
from api.conversation import ReplyRefused, deliver_reply
from api.errors import ApiError
from core.retention import REDIS_FULL
from core.settings import Settings


def parse_reply(
    data: str | bytes, settings: Settings, allowed_file_types: list[str]
) -> dict[str, Any] | None:
    """The frame as a reply, under the body rules of every door; None for an ack."""
    body = bodies.parse_object(data, settings.json_max_values)
    if body.get("type") == "heartbeat-ack":
        return None
    if body.get("action") != "sendMessage" or not isinstance(body.get("chatInput"), str):
        raise ApiError(400, 'A reply needs "action": "sendMessage" and a "chatInput".')
    files_bytes = reply_files(body.get("files"), settings, allowed_file_types)
    # Beside its files, a frame is held to the limit of a chat message POSTed as JSON.
    if len(data) - files_bytes > settings.chat_body_max_bytes:
        raise ApiError(413, f"A message may be at most {settings.chat_body_max_bytes} bytes")
    return body


class Replies:
    """One socket's client frames, handled in the socket's own greenlet."""

    def __init__(
        self,
        rt,
        session_id: str,
        feed: ChatFeed,
        heartbeat: Heartbeat,
        send: Callable[[str], None],
    ):
        self.rt = rt
        self.session_id = session_id
        self.feed = feed
        self.heartbeat = heartbeat
        self.send = send
        self.allowed_file_types: list[str] = []  # the chat's, once its access is checked

    def handle(self, data: str | bytes) -> None:
        if data in HEARTBEAT_ACKS:
            self.heartbeat.acked()
            return
        try:
            body = parse_reply(data, self.rt.settings, self.allowed_file_types)
        except ApiError as err:  # a bad frame: said so, and the wait goes on
            self.send(error_frame(err.message))
            return
        if body is None:
            self.heartbeat.acked()  # a JSON heartbeat-ack
            return
        self.heartbeat.heard()
        self._deliver(body)

    def _deliver(self, body: dict[str, Any]) -> None:
        feed = self.feed
        # Before the delivery: the resumed run's next message may be written before it returns.
        awaiting, feed.awaiting = feed.awaiting, False
        try:
            deliver_reply(self.rt, feed.execution_id, self.session_id, body)
            return
        except ReplyRefused as err:
            refusal = str(err)
        except redis.OutOfMemoryError:  # as HTTP's 503: nothing changed, the wait goes on
            refusal = REDIS_FULL
        feed.awaiting = awaiting
        self.send(error_frame(refusal))
