"""A Chat node's message to its chat user (responseNodes mode): the engine sends it through its
`sendMessage` hook, the worker appends it to `execution:<id>:messages` and publishes it as a
`message` event (core/waiting.py), the api's chat socket writes it to its client, and an
editor's chat panel gets it as a `chatMessage` push event. One type, one encoder, one decoder.

Stored in the list: `{"text", "wait", "node", "runIndex", "sentAt"}`; on a channel it also
carries its index in the list, first: `{"n", "text", ...}`. `text` is the frame the chat client
is sent: plain text, or for an approval n8n's message with buttons (`Approval`), which
`@n8n/chat` renders; a click GETs a button's link (api/waiting_webhook.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from core.jsontext import dumps

WITH_BUTTONS = "with-buttons"
_BUTTONS_FRAME = '{"type":"' + WITH_BUTTONS + '"'


@dataclass(frozen=True, slots=True)
class ChatNodeMessage:
    text: str  # the frame for the chat client: plain text, or an approval's JSON
    wait: bool  # the node waits for the user's reply after it
    node: str = ""
    run_index: int = 0
    sent_at: float | None = None  # ms, fractional: what the latency bench measures from
    n: int | None = None  # its index in the execution's message list, once appended

    def numbered(self, n: int) -> ChatNodeMessage:
        return replace(self, n=n)

    def to_json(self) -> dict[str, Any]:
        """As a channel's `message` event or a push event carries it (its index first, when
        known)."""
        body: dict[str, Any] = {} if self.n is None else {"n": self.n}
        body.update(text=self.text, wait=self.wait, node=self.node, runIndex=self.run_index)
        if self.sent_at is not None:
            body["sentAt"] = self.sent_at
        return body

    def encode(self) -> str:
        """As the message list keeps it: without its index, which is its place in the list."""
        return dumps(replace(self, n=None).to_json())

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ChatNodeMessage:
        """From an event's body or a stored message; what is missing or of another type reads
        as empty (a message of an older version)."""
        sent_at = body.get("sentAt")
        return cls(
            text=_text(body.get("text")),
            wait=body.get("wait") is True,
            node=_text(body.get("node")),
            run_index=_int(body.get("runIndex")) or 0,
            sent_at=float(sent_at) if isinstance(sent_at, int | float) else None,
            n=_int(body.get("n")),
        )

    @classmethod
    def decode(cls, raw: str | bytes, n: int | None = None) -> ChatNodeMessage:
        """A message as the list keeps it, at index `n`."""
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("a chat message is a JSON object")
        return replace(cls.from_json(body), n=n)


@dataclass(frozen=True, slots=True)
class Button:
    text: str
    link: str  # a path that resumes the node's wait (engine/context.py `resume_url`)
    type: str = "primary"

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "link": self.link, "type": self.type}


@dataclass(frozen=True, slots=True)
class Approval:
    """n8n's message with buttons: `{"type": "with-buttons", "text", "blockUserInput",
    "buttons": [{"text", "link", "type"}]}`, sent as a ChatNodeMessage's text."""

    text: str
    block_user_input: bool
    buttons: tuple[Button, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": WITH_BUTTONS,
            "text": self.text,
            "blockUserInput": self.block_user_input,
            "buttons": [b.to_json() for b in self.buttons],
        }

    def frame(self) -> str:
        return dumps(self.to_json())

    @classmethod
    def from_frame(cls, frame: str) -> Approval | None:
        """The approval a message's text holds; None for any other text."""
        if not frame.startswith(_BUTTONS_FRAME):
            return None
        try:
            body = json.loads(frame)
            buttons = tuple(
                Button(str(b["text"]), str(b["link"]), str(b["type"])) for b in body["buttons"]
            )
            return cls(str(body["text"]), body["blockUserInput"] is True, buttons)
        except (ValueError, KeyError, TypeError):
            return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
