"""Conversations inside one execution (responseNodes mode, Chat node), in Redis: what the
workers and the api processes share of them. The transitions themselves (a Chat node waits, a
reply resumes it) are in core/execution_transitions.py.

Keys (core/keys.py): `execution:<id>:resume` (where it resumes), `execution:<id>:messages` (the
messages sent, in order), `execution:<id>:delivered` (how many of them a chat socket wrote),
`execution:<id>:replies` (messages that came before it waited), `executions:waiting`
(deadlines of waits with a time limit).

- **A message** is appended to the execution's list and published on its event channel by one
  script, so its index `n` in the list is its identity. A chat socket subscribes (confirmed),
  replays the list from what was already delivered, then takes live events and skips any `n` it
  has written: a message is never missed and never written twice, whichever api process holds
  the socket, before or after a reconnect.
- **Expiry**: the workers' watch sweeps `executions:waiting` (ZRANGEBYSCORE up to now) every
  second; a wait whose time ran out goes on without a reply, as n8n's does (its node passes its
  input on), or ends with EXPIRED when its saved state is gone. A sorted set rather than a Celery ETA task: with the Redis transport an ETA task
  sits in the memory of the worker that reserved it and comes back only after the visibility
  timeout (an hour) if that worker dies, while the set survives every restart.
"""

from __future__ import annotations

import json
from typing import Any

from core import events
from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.redis_clients import publish_command
from core.results import FinalResult

# KEYS: message list, event channel (one slot in a cluster). ARGV: message JSON (an object),
# ttl s, the publish command (SPUBLISH in a cluster), the encoded event before and after its
# index (core/events.py `message_around_n`). Returns the message's index, which the script
# learns as it appends the message and writes between the event's halves.
_SEND = """
local n = redis.call('RPUSH', KEYS[1], ARGV[1]) - 1
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[4] .. n .. ARGV[5])
return n
"""

# KEYS: delivered count. ARGV: count, ttl s. Only ever grows.
_DELIVERED = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
return 1
"""

EXPIRED = (
    "Nobody replied within the Chat node's time limit (Limit Wait Time), so the conversation ended."
)


class WaitingStore:
    def __init__(self, store: ExecutionStore):
        self.store = store
        self.client = store.client
        self.keys = store.keys
        self._send = self.client.register_script(_SEND)
        self._delivered = self.client.register_script(_DELIVERED)

    # --- messages -------------------------------------------------------------------------
    def send_message(self, execution_id: str, message: ChatNodeMessage) -> int:
        """Append a Chat node's message and publish it; its index in the list."""
        keys = [
            self.keys.execution_messages(execution_id),
            self.keys.execution_events(execution_id),
        ]
        head, tail = events.message_around_n(message.to_json())
        args = [message.encode(), self.store.ttl, publish_command(self.client), head, tail]
        return int(self._send(keys=keys, args=args))

    def messages(self, execution_id: str, start: int = 0) -> list[ChatNodeMessage]:
        """The messages from index `start` on, each with its index `n`."""
        raws = self.client.lrange(self.keys.execution_messages(execution_id), start, -1)
        return [ChatNodeMessage.decode(raw, start + i) for i, raw in enumerate(raws)]

    def delivered(self, execution_id: str) -> int:
        return int(self.client.get(self.keys.execution_delivered(execution_id)) or 0)

    def mark_delivered(self, execution_id: str, count: int) -> None:
        key = self.keys.execution_delivered(execution_id)
        self._delivered(keys=[key], args=[count, self.store.ttl])

    # --- resume state ---------------------------------------------------------------------
    def resume_state(self, execution_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.execution_resume(execution_id))
        return json.loads(raw) if raw else None

    # --- expiry ---------------------------------------------------------------------------
    def due(self, limit: int = 100) -> list[ExecutionRecord]:
        """Waiting executions whose time limit has passed."""
        now = now_ms()
        ids = self.client.zrangebyscore(self.keys.waiting(), "-inf", now, start=0, num=limit)
        due = []
        for execution_id in ids:
            record = self.store.get(execution_id)
            if record is not None and record.status == Status.WAITING:
                if (record.wait_till or 0) > now:
                    continue  # it waits again, with a later deadline
                due.append(record)
            else:
                self.client.zrem(self.keys.waiting(), execution_id)
        return due

    def expire(self, record: ExecutionRecord) -> bool:
        """End a wait whose time limit passed and that cannot go on: `waiting -> error`, its
        channel told."""
        expired = record.next(status=Status.ERROR, error=EXPIRED, stopped_at=now_ms())
        result = FinalResult(Status.ERROR, EXPIRED, expired=True)
        return self.store.end_wait(record, expired, result)
