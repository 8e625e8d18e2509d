"""The chat memory interface: one backend holds many sessions.

A turn (the user's message and the answer) is written with `add_turn`, all at once, so a reader
never sees half a turn. `load` applies the window: K turns = the last 2K messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from memory.messages import ChatMessage


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
    """A backend bound to one session and window: what a memory sub-node supplies."""

    backend: ChatMemory
    session_key: str
    window: int | None

    def load(self) -> list[ChatMessage]:
        return self.backend.load(self.session_key, self.window)

    def messages(self) -> list[ChatMessage]:
        return self.backend.messages(self.session_key)

    def add_turn(self, messages: list[ChatMessage]) -> None:
        self.backend.add_turn(self.session_key, messages)

    def clear(self) -> None:
        self.backend.clear(self.session_key)
