"""What the AI Agent expects from the sub-nodes it drives.

A model sub-node's `supply_data` returns a `ChatModel`; a tool sub-node's returns a `Tool`; a
memory sub-node's returns a `SessionMemory` (memory/base.py). The Agent records every call it
makes through them as a run of that sub-node.

A model that talks to a server is not built here: the engine does no I/O. Its node asks the
`ChatModels` its runner lends (Services.chat_models; the clients live in models/).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from engine.model_settings import OpenAiSettings
from memory.messages import ChatMessage

TokenCallback = Callable[[str], None]


class Cancellation(Protocol):
    """Set when the execution is stopped; long calls poll it or register on it."""

    def is_set(self) -> bool: ...


class ChatModel(Protocol):
    # The model id its tokens are counted for (engine/tokenizer.py); None: estimated.
    model_name: str | None

    def invoke(
        self,
        messages: list[ChatMessage],
        tools: list[Tool],
        on_token: TokenCallback | None = None,
        cancel: Cancellation | None = None,
    ) -> ChatMessage:
        """Answer the conversation with an AI message (text and/or tool calls).

        When `on_token` is given, each piece of answer text is passed to it as soon as it is
        produced; the returned message still holds the whole text.
        Raises engine.errors.NodeExecutionError with a readable message on failure and
        engine.errors.ExecutionCanceled when `cancel` is set mid-call.
        """
        ...


MAX_TOOL_NAME = 64  # OpenAI's limit on a function's name
_NOT_IN_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


def tool_name(node_name: str) -> str:
    """The name a tool node gives its tool, as n8n's nodeNameToToolName makes it from the
    node's name: runs of other characters become `_`, at most 64 characters, no `_` or `-`
    left at the end of a cut name. The model calls the tool by it and memory keeps it."""
    name = _NOT_IN_TOOL_NAME.sub("_", node_name)
    if len(name) > MAX_TOOL_NAME:
        name = name[:MAX_TOOL_NAME].rstrip("_-")
    return name


class Tool(Protocol):
    name: str  # tool_name() of its node's name
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments

    def call(self, args: dict[str, Any]) -> str: ...


class ChatModels(Protocol):
    """Builds the chat models that talk to a server (models/clients.py): the runner's, with its
    connections, its way of reading a stream beside the execution, and its retries."""

    def openai(
        self, settings: OpenAiSettings, api_key: str, cancel: Cancellation | None = None
    ) -> ChatModel:
        """A client of an OpenAI-compatible endpoint; `cancel` as ChatModel.invoke's."""
        ...
