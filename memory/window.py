"""In-process chat memory: the backend behind n8n's "Simple Memory" (memoryBufferWindow).

n8n keeps a process-local Map of session -> {buffer, last_accessed} and, on every access, drops
the sessions idle for more than one hour (`cleanupStaleBuffers`). This does the same. Nothing is
shared between processes, so in queue mode each worker has its own (forgetful) copy.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.base import ChatMemory
from memory.messages import ChatMessage

IDLE_SECONDS = 3600  # n8n's Simple Memory forgets a session after one hour without access


@dataclass
class _Session:
    last_accessed: float
    messages: list[ChatMessage] = field(default_factory=list)


class InProcessMemory(ChatMemory):
    """Sessions in a dict guarded by one lock (safe under threads and gevent).

    Messages are deep-copied in and out so a caller mutating what it got back cannot change the
    stored history, just as with a Redis backend.
    """

    def __init__(
        self,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._idle_seconds = idle_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

    def messages(self, session_key: str) -> list[ChatMessage]:
        with self._lock:
            session = self._touch(session_key)
            return copy.deepcopy(session.messages) if session else []

    def add_turn(self, session_key: str, messages: list[ChatMessage]) -> None:
        turn = copy.deepcopy(messages)
        with self._lock:
            session = self._touch(session_key)
            if not turn:
                return
            if session is None:
                session = self._sessions[session_key] = _Session(last_accessed=self._clock())
            session.messages.extend(turn)

    def clear(self, session_key: str) -> None:
        with self._lock:
            self._drop_stale(self._clock())
            self._sessions.pop(session_key, None)

    def sessions(self) -> list[str]:
        # Listing is not an access: it drops stale sessions but refreshes none.
        with self._lock:
            self._drop_stale(self._clock())
            return sorted(self._sessions)

    # Callers hold the lock.

    def _touch(self, session_key: str) -> _Session | None:
        """Drop stale sessions, then mark this one (if it exists) as just accessed."""
        now = self._clock()
        self._drop_stale(now)
        session = self._sessions.get(session_key)
        if session is not None:
            session.last_accessed = now
        return session

    def _drop_stale(self, now: float) -> None:
        stale = [
            key
            for key, session in self._sessions.items()
            if now - session.last_accessed > self._idle_seconds
        ]
        for key in stale:
            del self._sessions[key]
