"""The memory writes of one execution, held until its worker records how the run ended.

A worker that was declared lost (its process gone, or silent past its lease) must leave no trace
in a session's memory: its client was told the turn failed, and the next message is answered
from the memory that client saw. So a worker's executions do not write memory as they go; each
turn waits here, and the step that records the end (or a Chat node's wait) writes it in the same
Redis script, or, for a backend that script cannot reach (Simple Memory, another Redis server, a
cluster), right after that step succeeded. A reaped execution's journal is dropped.

Reads within the run see what it wrote: `overlay` puts a session's pending turns after what the
backend holds (they are the newest).
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.base import ChatMemory
from memory.messages import ChatMessage


@dataclass(frozen=True)
class Write:
    """One turn for one session of one backend, oldest message first."""

    backend: ChatMemory
    session_key: str
    messages: list[ChatMessage]


class Journal:
    def __init__(self) -> None:
        self._writes: list[Write] = []

    def stage(self, backend: ChatMemory, session_key: str, messages: list[ChatMessage]) -> None:
        if messages:
            self._writes.append(Write(backend, session_key, list(messages)))

    def overlay(
        self, backend: ChatMemory, session_key: str, history: list[ChatMessage]
    ) -> list[ChatMessage]:
        """`history` (as the backend holds it) followed by this run's pending turns."""
        place = backend.place(session_key)
        pending = [
            m for w in self._writes if w.backend.place(w.session_key) == place for m in w.messages
        ]
        return history + pending if pending else history

    def drop(self, backend: ChatMemory, session_key: str) -> None:
        """The session was cleared: what this run wrote to it before goes too."""
        place = backend.place(session_key)
        self._writes = [w for w in self._writes if w.backend.place(w.session_key) != place]

    def take(self) -> list[Write]:
        """Every pending write, in order; the journal is empty afterwards."""
        writes, self._writes = self._writes, []
        return writes

    def __bool__(self) -> bool:
        return bool(self._writes)
