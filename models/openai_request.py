"""The request of a chat completion: the conversation and tools in OpenAI's chat format, as one
plain JSON body (no SDK: its typed request layers cost CPU and bought nothing this path sends)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from core.jsontext import dumps
from engine.llm import Tool
from engine.model_settings import OpenAiSettings
from memory.messages import ChatMessage

ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def request_body(
    settings: OpenAiSettings, messages: list[ChatMessage], tools: list[Tool]
) -> dict[str, Any]:
    s = settings
    body: dict[str, Any] = {"model": s.model, "messages": [to_openai(m) for m in messages]}
    if tools:
        body["tools"] = [tool_to_openai(t) for t in tools]
    optional = {"temperature": s.temperature, "max_tokens": s.max_tokens, "top_p": s.top_p}
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def to_openai(message: ChatMessage) -> dict[str, Any]:
    """One message in OpenAI's chat format, as LangChain's converter writes it for n8n: the
    content as it is (`""`, or the list of blocks n8n's Agent 3.x gives a tool-calling message),
    and a tool message's `name` when it has one (those read back from memory do)."""
    content = message.content if message.blocks is None else message.blocks
    out: dict[str, Any] = {"role": ROLES[message.role], "content": content}
    if message.role == "ai" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": dumps(c.args)},
            }
            for c in message.tool_calls
        ]
    if message.role == "tool":
        if message.name:
            out["name"] = message.name
        out["tool_call_id"] = message.tool_call_id or ""
    return out


def tool_to_openai(tool: Tool) -> dict[str, Any]:
    schema = tool.parameters or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }


def safe_url(url: str) -> str:
    """The base URL without user:password@ or a query string, fit for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the configured base URL"
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
