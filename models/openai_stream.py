"""The answer of a streamed chat completion: server-sent events, each `data:` line parsed once
into a dict, text pieces handed to the Agent as they arrive and tool calls reassembled from their
pieces by index."""

from __future__ import annotations

import json
import uuid
from typing import Any

from engine.llm import TokenCallback
from memory.messages import ChatMessage, ToolCall
from models.openai_errors import Failure


def sse_batches(pieces: Any) -> Any:
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


class Answer:
    """Accumulates one streamed answer: text pieces and tool calls by index."""

    def __init__(self, on_token: TokenCallback | None, source: str):
        self.on_token = on_token
        self.source = source  # the endpoint, for messages
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.emitted = False  # a token reached the Agent: retrying would duplicate output

    def add(self, chunk: Any) -> None:
        try:
            text, pieces = read_chunk(chunk)
        except (AttributeError, TypeError, KeyError, IndexError):
            raise Failure(f"malformed response stream from {self.source}") from None
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


def read_chunk(chunk: dict[str, Any]) -> tuple[str, list[tuple[int | None, str, str, str]]]:
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
        raise Failure("malformed response stream: a tool call without a tool name")
    try:
        args = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        raise Failure(
            f'the model sent malformed arguments for tool "{call["name"]}" (not a JSON object)'
        )
    return args


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
