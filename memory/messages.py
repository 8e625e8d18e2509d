"""Chat messages and their two LangChain JSON forms.

- stored form (what n8n's Redis memory keeps in a list): {"type": "human", "data": {"content": ...}}
- serialized form (what the Chat Trigger's loadPreviousSession returns):
  {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {...}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "human", "ai", "tool"]

_CLASS_NAMES = {
    "system": "SystemMessage",
    "human": "HumanMessage",
    "ai": "AIMessage",
    "tool": "ToolMessage",
}


@dataclass
class ToolCall:
    name: str
    args: dict[str, Any]
    id: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "args": self.args, "type": "tool_call"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(name=data["name"], args=dict(data.get("args") or {}), id=str(data.get("id", "")))


@dataclass
class ChatMessage:
    role: Role
    content: str  # the text (of the blocks, when the content is a list of them)
    tool_calls: list[ToolCall] = field(default_factory=list)  # ai messages only
    tool_call_id: str | None = None  # tool messages only
    name: str | None = None  # tool messages: the tool's name
    # LangChain's content as a list of blocks, kept as it was written: n8n's Agent 3.x writes
    # a tool-calling AI message with `"content": []`, and reads and sends it back as that.
    blocks: list[Any] | None = None

    def _kwargs(self) -> dict[str, Any]:
        """The fields in the order @langchain/core 1.x writes them (checked against the JSON
        n8n 2.41.1 stores), so a stored message is byte for byte what n8n would write."""
        content = self.content if self.blocks is None else self.blocks
        kwargs: dict[str, Any] = {"content": content}
        if self.role == "ai":
            kwargs["tool_calls"] = [c.to_dict() for c in self.tool_calls]
            kwargs["invalid_tool_calls"] = []
        if self.role == "tool":
            kwargs["tool_call_id"] = self.tool_call_id or ""
            if self.name:
                kwargs["name"] = self.name
        kwargs["additional_kwargs"] = {}
        kwargs["response_metadata"] = {}
        return kwargs

    def to_stored(self) -> dict[str, Any]:
        """LangChain's `message.toDict()`: the form n8n's Redis memory stores."""
        return {"type": self.role, "data": self._kwargs()}

    def to_serialized(self) -> dict[str, Any]:
        """LangChain's `message.toJSON()`: the form the chat widget reads."""
        return {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain_core", "messages", _CLASS_NAMES[self.role]],
            "kwargs": self._kwargs(),
        }

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> ChatMessage:
        role = data.get("type")
        if role not in _CLASS_NAMES:
            raise ValueError(f"unknown message type {role!r}")
        body = data.get("data") or {}
        content = body.get("content", "")
        blocks = None
        if isinstance(content, list):
            blocks = content
            content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        elif not isinstance(content, str):
            content = "" if content is None else str(content)
        return cls(
            role=role,
            content=content,
            tool_calls=[ToolCall.from_dict(c) for c in body.get("tool_calls") or []],
            tool_call_id=body.get("tool_call_id"),
            name=body.get("name"),
            blocks=blocks,
        )


def human(content: str) -> ChatMessage:
    return ChatMessage("human", content)


def ai(
    content: str, tool_calls: list[ToolCall] | None = None, blocks: list[Any] | None = None
) -> ChatMessage:
    return ChatMessage("ai", content, tool_calls=list(tool_calls or []), blocks=blocks)


def system(content: str) -> ChatMessage:
    return ChatMessage("system", content)


def tool(content: str, tool_call_id: str, name: str | None = None) -> ChatMessage:
    return ChatMessage("tool", content, tool_call_id=tool_call_id, name=name)
