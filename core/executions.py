"""Execution records in Redis (`execution:<id>`), their leases, and per-session turns.

Delivery semantics (documented in the README): at most once. The api writes the record as
`new` before enqueueing; a worker runs an execution only after moving it `new -> running`
atomically, so a redelivered or duplicated task is dropped and no chat message is ever answered
twice. A running execution holds a lease (`executions:running`, score = deadline) that its worker
renews every second; when a lease expires the execution is marked `crashed`, by whoever looks
first: the api relay streaming it or any worker's reaper. So a lost worker shows up as a failed
execution and its stream ends with an error line within the lease time.

Status changes are compare-and-set Lua scripts: the caller builds the new record, the script
checks the stored status and writes it. Records expire after MINI_N8N_EXECUTIONS_TTL.
"""

from __future__ import annotations

import builtins  # `list` below is a method name: annotations past it say builtins.list
import json
from enum import StrEnum
from typing import Any

from core import events
from core.clock import now_ms
from core.jsontext import dumps
from core.keys import Keys


class Status(StrEnum):
    NEW = "new"  # enqueued, not yet taken by a worker (or waiting for its session's turn)
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    CANCELED = "canceled"
    CRASHED = "crashed"  # its worker was lost, or it never got one in time
    # A Chat node waits for the user's reply: no worker holds it, its state is in Redis
    # (core/waiting.py), and it keeps its place at the head of its session's line.
    WAITING = "waiting"


FINISHED = {Status.SUCCESS, Status.ERROR, Status.CANCELED, Status.CRASHED}

# KEYS: record, running zset, workflow index, session queue ('' = none)
# ARGV: allowed statuses (comma separated), new record, ttl s, lease deadline ms (0 = drop lease),
#       execution id, turn key prefix, turn key suffix, score for the workflow index
_TRANSITION = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local status = cjson.decode(raw)['status']
local allowed = false
for s in string.gmatch(ARGV[1], '[^,]+') do if s == status then allowed = true end end
if not allowed then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
if tonumber(ARGV[4]) > 0 then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
else
  redis.call('ZREM', KEYS[2], ARGV[5])
  if KEYS[4] ~= '' then
    redis.call('LREM', KEYS[4], 1, ARGV[5])
    local head = redis.call('LINDEX', KEYS[4], 0)
    if head then
      local turn = ARGV[6] .. head .. ARGV[7]
      redis.call('RPUSH', turn, '1')
      redis.call('EXPIRE', turn, 60)
    end
  end
end
return 1
"""

# Is it this execution's turn in its session? Heads that can no longer run (finished, missing,
# or whose lease expired) are dropped on the way.
# KEYS: session queue, running zset. ARGV: execution id, record key prefix, now ms
_TURN = """
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head or head == ARGV[1] then return 1 end
  local raw = redis.call('GET', ARGV[2] .. head)
  local alive = false
  if raw then
    local status = cjson.decode(raw)['status']
    if status == 'new' or status == 'waiting' then alive = true end
    if status == 'running' then
      local deadline = redis.call('ZSCORE', KEYS[2], head)
      alive = deadline ~= false and tonumber(deadline) >= tonumber(ARGV[3])
    end
  end
  if alive then return 0 end
  redis.call('LPOP', KEYS[1])
end
"""


class ExecutionStore:
    def __init__(self, client, keys: Keys, ttl_seconds: int = 7 * 24 * 3600):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds
        self._transition = client.register_script(_TRANSITION)
        self._turn = client.register_script(_TURN)

    def load_scripts(self) -> None:
        """Have Redis hold the Lua scripts now, so no execution pays for a NOSCRIPT round trip."""
        for script in (self._transition, self._turn):
            self.client.script_load(script.script)

    # --- api side -------------------------------------------------------------------------
    def create(self, record: dict[str, Any]) -> None:
        """Store a `new` record and take a place in the session's line, in one round trip."""
        session_queue = self.session_queue(record)
        pipe = self.client.pipeline(transaction=True)
        pipe.set(self.keys.execution(record["id"]), _dump(record), ex=self.ttl)
        pipe.zadd(self.keys.workflow_executions(record["workflowId"]), {record["id"]: now_ms()})
        pipe.expire(self.keys.workflow_executions(record["workflowId"]), self.ttl)
        if session_queue:
            pipe.rpush(session_queue, record["id"])
            pipe.expire(session_queue, self.ttl)
        pipe.execute()

    def session_queue(self, record: dict[str, Any]) -> str | None:
        """The line of the record's chat session, if it belongs to one."""
        session_id = record.get("sessionId")
        if not session_id:
            return None
        return self.keys.session_queue(record["workflowId"], session_id)

    def get(self, execution_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self.keys.execution(execution_id))
        return json.loads(raw) if raw else None

    def list(self, workflow_id: str, limit: int = 50) -> list[dict[str, Any]]:
        ids = self.client.zrevrange(self.keys.workflow_executions(workflow_id), 0, limit - 1)
        if not ids:
            return []
        raws = self.client.mget([self.keys.execution(i) for i in ids])
        return [json.loads(r) for r in raws if r]

    # --- transitions ----------------------------------------------------------------------
    def transition(
        self,
        record: dict[str, Any],
        allowed_from: set[Status],
        *,
        lease_ms: int = 0,
        keep_turn: bool = False,
    ) -> bool:
        """Write `record` if the stored status is one of `allowed_from`. A lease > 0 (re)takes
        the running lease; 0 drops it and hands the session's turn to the next message, unless
        `keep_turn` (an execution that waits for its user's reply, or resumes, keeps its place)."""
        execution_id = record["id"]
        # The script builds the next execution's turn key from these two halves.
        turn = self.keys.execution_turn("\0").split("\0")
        return bool(
            self._transition(
                keys=[
                    self.keys.execution(execution_id),
                    self.keys.running(),
                    self.keys.workflow_executions(record.get("workflowId", "")),
                    "" if keep_turn else self.session_queue(record) or "",
                ],
                args=[
                    ",".join(sorted(allowed_from)),
                    _dump(record),
                    self.ttl,
                    now_ms() + lease_ms if lease_ms else 0,
                    execution_id,
                    turn[0],
                    turn[1],
                    now_ms(),
                ],
            )
        )

    def my_turn(self, execution_id: str, session_queue: str) -> bool:
        prefix = self.keys.execution("\0").split("\0")[0]
        return bool(
            self._turn(
                keys=[session_queue, self.keys.running()], args=[execution_id, prefix, now_ms()]
            )
        )

    def wait_turn(self, execution_id: str, timeout: float) -> None:
        """Block until woken by the execution ahead in the session, or `timeout` passes."""
        self.client.blpop([self.keys.execution_turn(execution_id)], timeout=max(timeout, 0.01))

    def hold_lease(self, execution_id: str, lease_ms: int) -> None:
        """Take an execution's lease whatever its status: a finished execution's worker holds
        it until its final event is published (worker/execution_run.py)."""
        self.client.zadd(self.keys.running(), {execution_id: now_ms() + lease_ms})

    def drop_lease(self, execution_id: str) -> None:
        self.client.zrem(self.keys.running(), execution_id)

    def renew_leases(self, execution_ids: builtins.list[str], lease_ms: int) -> None:
        if execution_ids:
            deadline = now_ms() + lease_ms
            self.client.zadd(self.keys.running(), {i: deadline for i in execution_ids}, xx=True)

    # --- stop -----------------------------------------------------------------------------
    def request_stop(self, execution_id: str) -> dict[str, Any] | None:
        """Stop an execution: a queued one is canceled here; a running one is told to stop
        (the marker covers a worker that claims it just after the broadcast)."""
        record = self.get(execution_id)
        if record is None or record["status"] in FINISHED:
            return record
        if record["status"] in (Status.NEW, Status.WAITING):
            why = ("The execution was stopped while it waited for a reply."
                   if record["status"] == Status.WAITING
                   else "The execution was stopped before it started.")  # fmt: skip
            canceled = {**record, "status": Status.CANCELED, "stoppedAt": now_ms(), "error": why}
            if self.transition(canceled, {Status(record["status"])}):
                # Unnumbered: a control message a waiting stream takes as the end.
                done = events.done({"status": Status.CANCELED, "error": canceled["error"]})
                self.client.publish(self.keys.execution_events(execution_id), events.encode(done))
                return canceled
            return self.request_stop(execution_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.keys.execution_stop(execution_id), "1", ex=300)
        pipe.publish(self.keys.stop_channel(), execution_id)
        pipe.execute()
        return record

    def stop_requested(self, execution_id: str) -> bool:
        return bool(self.client.exists(self.keys.execution_stop(execution_id)))

    # --- lost executions ------------------------------------------------------------------
    def mark_crashed_if_lost(self, execution_id: str, queue_timeout_s: float) -> dict | None:
        """If the execution's worker is gone (lease expired) or no worker took it in time,
        mark it crashed. Returns the record as it now stands."""
        record = self.get(execution_id)
        if record is None or record["status"] in FINISHED or record["status"] == Status.WAITING:
            return record  # a waiting execution ends by its reply or its time limit
        if record["status"] == Status.RUNNING:
            deadline = self.client.zscore(self.keys.running(), execution_id)
            if deadline is not None and deadline >= now_ms():
                return record
            reason = "The worker running this execution was lost (it stopped renewing its lease)."
        else:
            # A resumed execution is queued again: its wait counts from then (`queuedAt`).
            queued = record.get("queuedAt") or record.get("createdAt") or now_ms()
            waited = (now_ms() - int(queued)) / 1000
            if waited < queue_timeout_s:
                return record
            reason = f"No worker started this execution within {queue_timeout_s:g} s."
        crashed = {**record, "status": Status.CRASHED, "error": reason, "stoppedAt": now_ms()}
        if self.transition(crashed, {Status(record["status"])}):
            return crashed
        return self.get(execution_id)

    def reap_lost(self, queue_timeout_s: float, limit: int = 100) -> int:
        """Mark every running execution whose lease expired as crashed."""
        lost = self.client.zrangebyscore(self.keys.running(), "-inf", now_ms(), start=0, num=limit)
        count = 0
        for execution_id in lost:
            record = self.mark_crashed_if_lost(execution_id, queue_timeout_s)
            if record is None or record["status"] in FINISHED:
                # Gone, or finished by a worker lost before it released the lease (it keeps
                # it until the final event is published: worker/execution_run.py).
                self.client.zrem(self.keys.running(), execution_id)
            if record is not None and record["status"] == Status.CRASHED:
                count += 1
        return count


def _dump(record: dict[str, Any]) -> str:
    return dumps(record, default=str)
