"""The chat memory interface: one backend holds many sessions.

A turn (the user's message and the answer) is written with `add_turn`, all at once, so a reader
never sees half a turn. `load` applies the window: K turns = the last 2K messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.messages import ChatMessage

if TYPE_CHECKING:
    from memory.journal import Journal


class ChatMemory(ABC):
    @abstractmethod
    def messages(self, session_key: str) -> list[ChatMessage]:
        """Every stored message of the session, oldest first."""

    @abstractmethod
    def add_turn(self, session_key: str, messages: list[ChatMessage]) -> None:
        """Append the messages of one turn atomically (oldest first)."""

    @abstractmethod
    def clear(self, session_key: str) -> None: ...

    @abstractmethod
    def sessions(self) -> list[str]:
        """Session keys that hold messages."""

    def place(self, session_key: str) -> Hashable:
        """Where the session is stored: two backends that give the same place hold the same
        messages (memory/journal.py matches a run's pending turns by it)."""
        return (id(self), session_key)

    def load(self, session_key: str, window: int | None) -> list[ChatMessage]:
        """The last `window` turns (2*window messages), oldest first; all when window is None."""
        history = self.messages(session_key)
        if window is None:
            return history
        if window <= 0:
            return []
        return history[-2 * window :]


@dataclass
class SessionMemory:
    """A backend bound to one session and window: what a memory sub-node supplies. With a
    `journal` (a worker's execution), turns wait there for the run's end (memory/journal.py)."""

    backend: ChatMemory
    session_key: str
    window: int | None
    journal: Journal | None = None

    def load(self) -> list[ChatMessage]:
        if not self.journal:
            return self.backend.load(self.session_key, self.window)
        if self.window is not None and self.window <= 0:
            return []
        history = self.backend.load(self.session_key, self.window)
        history = self.journal.overlay(self.backend, self.session_key, history)
        return history if self.window is None else history[-2 * self.window :]

    def messages(self) -> list[ChatMessage]:
        history = self.backend.messages(self.session_key)
        if not self.journal:
            return history
        return self.journal.overlay(self.backend, self.session_key, history)

    def add_turn(self, messages: list[ChatMessage]) -> None:
        if self.journal is None:
            self.backend.add_turn(self.session_key, messages)
        else:
            self.journal.stage(self.backend, self.session_key, messages)

    def clear(self) -> None:
        if self.journal is not None:
            self.journal.drop(self.backend, self.session_key)
        self.backend.clear(self.session_key)
