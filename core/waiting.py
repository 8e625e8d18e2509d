"""Waiting executions (a Chat node waits for its user's reply) and the Chat-node messages of an
execution, in Redis: what the workers and the api processes share about a conversation inside
one execution (responseNodes mode).

Keys (core/keys.py): `execution:<id>:resume` (where it resumes), `execution:<id>:messages` (the
messages sent, in order), `execution:<id>:delivered` (how many of them a chat socket wrote),
`executions:waiting` (deadlines of waits with a time limit).

- **A message** is appended to the execution's list and published on its event channel by one
  script, so its index `n` in the list is its identity. A chat socket subscribes (confirmed),
  replays the list from what was already delivered, then takes live events and skips any `n` it
  has written: a message is never missed and never written twice, whichever api process holds
  the socket, before or after a reconnect.
- **Pausing** (a worker): the resume state is written, then the record moves `running ->
  waiting`, keeping the session's turn (the reply belongs to this execution, no other message of
  the session runs in between) and giving up the lease: no worker holds it any more.
- **Resuming** (the api, on the reply): `waiting -> new` by compare-and-set, so one reply wins,
  then a task is enqueued; any worker claims it `new -> running` as usual (core/executions.py).
- **Expiry**: the workers' lease thread, which ticks every second anyway, sweeps
  `executions:waiting` (ZRANGEBYSCORE up to now): a due wait moves `waiting -> error` and its
  channel gets the `done` event. A sorted set rather than a Celery ETA task: with the Redis
  transport an ETA task sits in the memory of the worker that reserved it and comes back only
  after the visibility timeout (an hour) if that worker dies, while the set survives every
  restart and costs one ZRANGEBYSCORE a second per worker, on a thread that already runs.
"""

from __future__ import annotations

import json
from typing import Any

from core import events
from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.jsontext import dumps
from core.redis_clients import publish, publish_command

# KEYS: message list, event channel (one slot in a cluster). ARGV: message JSON, ttl s, the
# publish command (SPUBLISH in a cluster). Returns the message's index.
_SEND = """
local n = redis.call('RPUSH', KEYS[1], ARGV[1]) - 1
redis.call('EXPIRE', KEYS[1], ARGV[2])
local body = cjson.decode(ARGV[1])
body['n'] = n
redis.call(ARGV[3], KEYS[2], cjson.encode({message = body}))
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
    def send_message(self, execution_id: str, message: dict[str, Any]) -> int:
        """Append a Chat node's message ({"text", "wait", "node", ...}) and publish it."""
        keys = [
            self.keys.execution_messages(execution_id),
            self.keys.execution_events(execution_id),
        ]
        args = [dumps(message), self.store.ttl, publish_command(self.client)]
        return int(self._send(keys=keys, args=args))

    def messages(self, execution_id: str, start: int = 0) -> list[dict[str, Any]]:
        """The messages from index `start` on, each with its index `n`."""
        raws = self.client.lrange(self.keys.execution_messages(execution_id), start, -1)
        return [{**json.loads(raw), "n": start + i} for i, raw in enumerate(raws)]

    def delivered(self, execution_id: str) -> int:
        return int(self.client.get(self.keys.execution_delivered(execution_id)) or 0)

    def mark_delivered(self, execution_id: str, count: int) -> None:
        key = self.keys.execution_delivered(execution_id)
        self._delivered(keys=[key], args=[count, self.store.ttl])

    # --- pause and resume -----------------------------------------------------------------
    def pause(self, waiting: dict[str, Any], saved: dict[str, Any]) -> bool:
        """Save what a resume needs, then `running -> waiting` (lease dropped, session turn
        kept), with the record's `waitTill` as deadline if it has one. False if the record was
        no longer running (stopped, or marked lost)."""
        execution_id = waiting["id"]
        self.client.set(self.keys.execution_resume(execution_id), dumps(saved), ex=self.store.ttl)
        if not self.store.transition(waiting, {Status.RUNNING}, keep_turn=True):
            return False
        if waiting.get("waitTill"):
            self.client.zadd(self.keys.waiting(), {execution_id: int(waiting["waitTill"])})
        return True

    def resume_state(self, execution_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.execution_resume(execution_id))
        return json.loads(raw) if raw else None

    def claim_reply(self, execution_id: str) -> dict[str, Any] | None:
        """Take the reply for a waiting execution: `waiting -> new`, the record to enqueue, or
        None when it is not waiting (unknown, finished, or another reply won)."""
        record = self.store.get(execution_id)
        if record is None or record["status"] != Status.WAITING:
            return None
        queued = {**record, "status": Status.NEW, "queuedAt": now_ms(), "waitTill": None}
        if not self.store.transition(queued, {Status.WAITING}, keep_turn=True):
            return None
        self.client.zrem(self.keys.waiting(), execution_id)
        return queued

    def forget(self, execution_id: str) -> None:
        """The execution ended: its resume state is of no use any more."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.keys.execution_resume(execution_id))
        pipe.zrem(self.keys.waiting(), execution_id)
        pipe.execute()

    # --- expiry ---------------------------------------------------------------------------
    def expire_due(self, limit: int = 100) -> int:
        """End every wait whose limit has passed; returns how many ended here."""
        now = now_ms()
        due = self.client.zrangebyscore(self.keys.waiting(), "-inf", now, start=0, num=limit)
        ended = 0
        for execution_id in due:
            record = self.store.get(execution_id)
            if record is not None and record["status"] == Status.WAITING:
                if int(record.get("waitTill") or 0) > now:
                    continue  # it waits again, with a later deadline
                if self._expire(record, now):
                    ended += 1
            self.client.zrem(self.keys.waiting(), execution_id)
        return ended

    def _expire(self, record: dict[str, Any], now: int) -> bool:
        expired = {**record, "status": Status.ERROR, "error": EXPIRED, "stoppedAt": now}
        if not self.store.transition(expired, {Status.WAITING}):
            return False
        execution_id = record["id"]
        saved = self.resume_state(execution_id) or {}
        done = events.done({"status": Status.ERROR, "error": EXPIRED, "expired": True})
        pipe = self.client.pipeline(transaction=False)
        publish(pipe, self.keys.execution_events(execution_id), events.encode(done))
        if saved.get("pushRef"):  # a run from the editor: its chat panel hears the end too
            finished = {"executionId": execution_id, "status": Status.ERROR, "error": EXPIRED}
            push = events.push("executionFinished", finished)
            publish(pipe, self.keys.push(saved["pushRef"]), events.encode(push))
        pipe.delete(self.keys.execution_resume(execution_id))
        pipe.execute()
        return True
