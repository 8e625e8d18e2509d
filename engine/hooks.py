"""Lifecycle hooks: a plain object of named handler lists, as n8n's ExecutionLifecycleHooks.

Handlers are registered by whoever runs an execution (the CLI prints chunks, a worker publishes
them to Redis, a test records them); the engine only calls `run`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HOOK_NAMES = (
    "workflowExecuteBefore",  # (execution)
    "workflowExecuteAfter",  # (execution, run)
    "nodeExecuteBefore",  # (execution, node_name, run_index)
    "nodeExecuteAfter",  # (execution, node_name, run_index, task_data)
    "sendChunk",  # (chunk)  one streamed chunk: {"type", "content"?, "metadata"}
    "sendResponse",  # (response)  a Respond to Webhook answer: {"status", "headers", "body"}
    "sendMessage",  # (message)  a Chat node's message (core/chat_node_message.py)
)


class Hooks:
    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[..., Any]]] = {name: [] for name in HOOK_NAMES}

    def add_handler(self, name: str, handler: Callable[..., Any]) -> Hooks:
        if name not in self._handlers:
            raise ValueError(f"unknown hook {name!r}")
        self._handlers[name].append(handler)
        return self

    def has(self, name: str) -> bool:
        return bool(self._handlers.get(name))

    def run(self, name: str, *args: Any) -> None:
        for handler in self._handlers[name]:
            handler(*args)
