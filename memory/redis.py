"""Redis chat memory, in the layout n8n's Redis Chat Memory (LangChain RedisChatMessageHistory) uses.

Keys (built by `Keys`, see core/keys.py):

| key                              | type | holds                                                  |
|----------------------------------|------|--------------------------------------------------------|
| <memoryPrefix><sessionKey>       | LIST | a public chat's session (memoryPrefix: "chat:" by      |
|                                  |      | default, "" for n8n's bare session keys)               |
| memory:<workflowId>:<sessionKey> | LIST | a protected chat's session, private to its workflow    |

Each element is `{"type": ..., "data": {...}}` JSON, newest first. One RedisMemory reads and
writes one namespace: the public one, or one workflow's (`workflow_id`).

- write: one MULTI/EXEC with `LPUSH` of the turn's messages (oldest first, so the newest lands at
  index 0) and, when a TTL is set, `EXPIRE`. The TTL slides on writes only, as in n8n.
- read: `LRANGE`, reversed. A window of K turns reads only the newest 2K elements; the list itself
  is never trimmed.
- a session key that would name another of our keys (possible with an empty memory prefix) raises
  ReservedKeyError before anything is read, written or deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

import redis

from core.jsontext import dumps, loads
from core.keys import Keys
from core.memory_turns import TurnWrite
from core.redis_clients import Quick
from core.retention import RedisFull
from memory.base import ChatMemory
from memory.messages import ChatMessage

log = logging.getLogger(__name__)


class RedisMemory(ChatMemory):
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        ttl_seconds: int = 0,
        workflow_id: str | None = None,
    ) -> None:
        self._client = client
        # A turn's LRANGE and LPUSH, without redis-py's per-command layers where it can.
        quick = Quick.of(client)
        self._command = client.execute_command if quick is None else quick.call
        self._keys = keys
        self._ttl_seconds = ttl_seconds  # 0 = never expires (n8n's sessionTTL default)
        self._workflow_id = workflow_id  # set: the sessions of this protected workflow

    @property
    def client(self) -> redis.Redis:
        return self._client

    def key(self, session_key: str) -> str:
        """The Redis list holding the session (ReservedKeyError if it may not be one)."""
        return self._keys.chat(session_key, self._workflow_id)

    def place(self, session_key: str) -> Hashable:
        return (server_of(self._client), self.key(session_key))

    def turn(self, session_key: str, messages: list[ChatMessage]) -> TurnWrite:
        """What `add_turn` would write, for a caller that writes it in a script of its own."""
        encoded = [encode(m) for m in messages]
        return TurnWrite(self.key(session_key), encoded, self._ttl_seconds)

    def messages(self, session_key: str) -> list[ChatMessage]:
        return self._read(session_key, stop=-1)

    def load(self, session_key: str, window: int | None) -> list[ChatMessage]:
        if window is None:
            return self.messages(session_key)
        if window <= 0:
            return []  # never LRANGE 0 -1 by accident: stop=2*0-1 would mean "everything"
        return self._read(session_key, stop=2 * window - 1)

    def add_turn(self, session_key: str, messages: list[ChatMessage]) -> None:
        try:
            self._add_turn(session_key, messages)
        except redis.OutOfMemoryError as err:  # said plainly: Redis' words name the key and turn
            raise RedisFull() from err

    def _add_turn(self, session_key: str, messages: list[ChatMessage]) -> None:
        if not messages:
            return  # LPUSH needs at least one element
        write = self.turn(session_key, messages)
        if write.ttl_seconds <= 0:
            self._command("LPUSH", write.key, *write.elements)  # one command: no transaction
            return
        pipe = self._client.pipeline(transaction=True)
        pipe.lpush(write.key, *write.elements)
        pipe.expire(write.key, write.ttl_seconds)
        pipe.execute()

    def clear(self, session_key: str) -> None:
        self._client.delete(self.key(session_key))

    def sessions(self) -> list[str]:
        keys, scope = self._keys, self._workflow_id
        # With an empty memory prefix the pattern matches every key: only lists can be sessions,
        # and session_from_chat_key drops our own.
        only_lists = "list" if scope is None and not keys.memory_prefix else None
        sessions = (
            keys.session_from_chat_key(_text(key), scope)
            for key in self._client.scan_iter(
                match=keys.chat_pattern(scope), count=500, _type=only_lists
            )
        )
        return sorted({s for s in sessions if s is not None})  # SCAN may return a key twice

    def _read(self, session_key: str, stop: int) -> list[ChatMessage]:
        raw = self._command("LRANGE", self.key(session_key), 0, stop)
        decoded = (decode(element) for element in reversed(raw))
        return [message for message in decoded if message is not None]


def protected_sessions(client: redis.Redis, keys: Keys) -> list[tuple[str, str]]:
    """(workflow id, session key) of every protected chat's session, for the operator."""
    found = (
        keys.protected_session_from_key(_text(key))
        for key in client.scan_iter(match=keys.protected_chat_pattern(), count=500)
    )
    return sorted({s for s in found if s is not None})  # SCAN may return a key twice


def encode(message: ChatMessage) -> str:
    """Compact JSON, byte-for-byte what JavaScript's JSON.stringify gives n8n."""
    return dumps(message.to_stored())


def decode(element: str | bytes) -> ChatMessage | None:
    """One list element as a message, or None (logged) when it is not one we can read.

    The list may hold elements written by other programs (n8n, LangChain, a person with
    redis-cli), including LangChain types we do not model ("function", "chat"): skip them rather
    than fail the whole conversation.
    """
    try:
        data: Any = loads(element)  # accepts bytes (UTF-8)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return ChatMessage.from_stored(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("skipping unreadable chat memory element %.200r: %s", element, exc)
        return None


def server_of(client: Any) -> Hashable:
    """Which server (and database) a client talks to."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if not kwargs:
        return id(client)
    return (kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), kwargs.get("db"))


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
