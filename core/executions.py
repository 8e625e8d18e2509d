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

On one Redis a transition is one script: record, lease and the session's turn hand-over at once.
In a Redis Cluster a script may touch one slot only, so the same work is done in steps of one
slot each, ordered so that every state in between is one a reader already copes with: a lease is
taken before the record says `running` and dropped after it says otherwise (a running record
always has its lease), and a session's line is read head by head, a finished or lost head being
dropped only if it is still the head (a stale view drops nothing).
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
from core.redis_clients import is_cluster, publish


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


# KEYS: running zset. ARGV: execution id, now ms
_DROP_LEASE_IF_EXPIRED = """
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
"""

# Cluster steps, one slot each.
# KEYS: record. ARGV: allowed statuses (comma separated), new record, ttl s
_SET_IF = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local status = cjson.decode(raw)['status']
for s in string.gmatch(ARGV[1], '[^,]+') do
  if s == status then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
    return 1
  end
end
return 0
"""

# Leave the session's line; the new head, if any, is whose turn it is now.
# KEYS: session queue. ARGV: execution id
_LEAVE = """
redis.call('LREM', KEYS[1], 1, ARGV[1])
return redis.call('LINDEX', KEYS[1], 0)
"""

# Drop the head of a session's line if it is still the one found finished or lost.
# KEYS: session queue. ARGV: that head
_DROP_HEAD = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
return 1
"""


class ExecutionStore:
    def __init__(self, client, keys: Keys, ttl_seconds: int = 7 * 24 * 3600):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds
        self.cluster = is_cluster(client)
        self._transition = client.register_script(_TRANSITION)
        self._turn = client.register_script(_TURN)
        self._set_if = client.register_script(_SET_IF)
        self._leave = client.register_script(_LEAVE)
        self._drop_head = client.register_script(_DROP_HEAD)
        self._drop_lease_if_expired = client.register_script(_DROP_LEASE_IF_EXPIRED)

    def load_scripts(self) -> None:
        """Have Redis hold the Lua scripts now, so no execution pays for a NOSCRIPT round trip
        (in a cluster, SCRIPT LOAD goes to every primary)."""
        scripts = (
            (self._set_if, self._leave, self._drop_head)
            if self.cluster
            else (self._transition, self._turn)
        )
        for script in scripts:
            self.client.script_load(script.script)

    # --- api side -------------------------------------------------------------------------
    def create(self, record: dict[str, Any]) -> None:
        """Store a `new` record and take a place in the session's line, in one round trip."""
        session_queue = self.session_queue(record)
        if self.cluster:
            # The record first: a line's head with no record would be dropped as lost.
            self.client.set(self.keys.execution(record["id"]), _dump(record), ex=self.ttl)
        pipe = self.client.pipeline(transaction=not self.cluster)
        if not self.cluster:
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
        keys = [self.keys.execution(i) for i in ids]
        raws = self.client.mget_nonatomic(keys) if self.cluster else self.client.mget(keys)
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
        if self.cluster:
            return self._transition_in_steps(record, allowed_from, lease_ms, keep_turn)
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

    def _transition_in_steps(
        self, record: dict[str, Any], allowed_from: set[Status], lease_ms: int, keep_turn: bool
    ) -> bool:
        """`transition` in a cluster: lease, record, then the turn hand-over, a slot at a time."""
        execution_id = record["id"]
        if lease_ms:  # before the record says running: a running record always has its lease
            self.client.zadd(self.keys.running(), {execution_id: now_ms() + lease_ms})
        written = self._set_if(
            keys=[self.keys.execution(execution_id)],
            args=[",".join(sorted(allowed_from)), _dump(record), self.ttl],
        )
        if not written or lease_ms:
            return bool(written)  # a refused claim leaves the lease to whoever holds it
        self.client.zrem(self.keys.running(), execution_id)
        session_queue = self.session_queue(record)
        if session_queue and not keep_turn:
            head = self._leave(keys=[session_queue], args=[execution_id])
            if head:
                pipe = self.client.pipeline(transaction=True)  # one slot: the head's turn key
                pipe.rpush(self.keys.execution_turn(head), "1")
                pipe.expire(self.keys.execution_turn(head), 60)
                pipe.execute()
        return True

    def my_turn(self, execution_id: str, session_queue: str) -> bool:
        if self.cluster:
            return self._my_turn_in_steps(execution_id, session_queue)
        prefix = self.keys.execution("\0").split("\0")[0]
        return bool(
            self._turn(
                keys=[session_queue, self.keys.running()], args=[execution_id, prefix, now_ms()]
            )
        )

    def _my_turn_in_steps(self, execution_id: str, session_queue: str) -> bool:
        """`my_turn` in a cluster: the line's head, its record and lease, one read each."""
        while True:
            head = self.client.lindex(session_queue, 0)
            if not head or head == execution_id:
                return True
            pipe = self.client.pipeline(transaction=False)
            pipe.get(self.keys.execution(head))
            pipe.zscore(self.keys.running(), head)
            raw, deadline = pipe.execute()
            if _alive(json.loads(raw) if raw else None, deadline):
                return False
            self._drop_head(keys=[session_queue], args=[head])

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
                publish(self.client, self.keys.execution_events(execution_id), events.encode(done))
                return canceled
            return self.request_stop(execution_id)
        # Two commands, not a pipeline: a cluster's pipeline refuses PUBLISH, which has no key
        # (a broadcast to every node, as the stop is meant for every worker).
        self.client.set(self.keys.execution_stop(execution_id), "1", ex=300)
        self.client.publish(self.keys.stop_channel(), execution_id)
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
            if record is not None and record["status"] == Status.CRASHED:
                count += 1
            elif record is None or record["status"] != Status.RUNNING:
                # A lease nobody holds (a worker lost before it released a finished execution's,
                # or a cluster's refused claim): dropped if not taken again meanwhile.
                self._drop_lease_if_expired(
                    keys=[self.keys.running()], args=[execution_id, now_ms()]
                )
        return count


def _alive(record: dict[str, Any] | None, deadline: float | None) -> bool:
    """Can the head of a session's line still run (as `_TURN` judges it)?"""
    if record is None:
        return False
    if record["status"] in (Status.NEW, Status.WAITING):
        return True
    return record["status"] == Status.RUNNING and deadline is not None and deadline >= now_ms()


def _dump(record: dict[str, Any]) -> str:
    return dumps(record, default=str)
