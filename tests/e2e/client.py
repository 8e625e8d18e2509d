"""A streaming chat client for tests: NDJSON lines with their arrival times."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class ChatReply:
    status: int
    headers: dict[str, str]
    chunks: list[dict] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # monotonic seconds, per chunk
    sent_at: float = 0.0
    ended_at: float = 0.0

    def items(self) -> list[dict]:
        return [c for c in self.chunks if c["type"] == "item"]

    def text(self) -> str:
        return "".join(c.get("content", "") for c in self.items())

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks if c["type"] != "keepalive"]


def stream_chat(
    url: str, message: str, session: str, timeout: float = 60.0, on_chunk=None
) -> ChatReply:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
    sent = time.monotonic()
    with httpx.stream("POST", url, json=body, timeout=timeout) as response:
        reply = ChatReply(response.status_code, dict(response.headers), sent_at=sent)
        for line in response.iter_lines():
            if not line.strip():
                continue
            chunk = json.loads(line)
            reply.chunks.append(chunk)
            reply.arrivals.append(time.monotonic())
            if on_chunk:
                on_chunk(chunk)
    reply.ended_at = time.monotonic()
    return reply
