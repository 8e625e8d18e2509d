"""Execution records in Redis and every transition between their statuses.

    new ──claim──▶ running ──finish──▶ success | error | canceled
     │   ▲            │  ▲
     │   └──resume────┤  └─ a reply already queued: stays running
     │    (a reply,   ▼
     │   or its time) waiting ──cancel──▶ canceled
     ├──cancel──▶ canceled
     └──reap (no worker started it in time) ──▶ crashed;  running ──reap (worker lost)──▶ crashed

Delivery is at most once: the api writes the record `new` before it enqueues the task, and a
worker runs an execution only after its claim moved it `new -> running`; a redelivered or
duplicated task finds it claimed and is dropped. Every transition is one script that
compares-and-sets on the record's revision (core/execution_record.py) and does the rest of the
step with it: the lease, the queue marker, the session's line, the final event. So:

- **One write for the end.** The record's final status and the channel's final event are one
  step: a stream that sees the record finished has been sent its final event, or will never be.
- **Retried steps are idempotent.** A claim or an end retried after a timeout finds its own claim
  token in the record and does nothing twice.
- **Nothing is left unfinished.** What keeps an unfinished execution alive is a key with a time
  to live (core/liveness.py); whoever looks (an api stream, a chat socket, a worker's reaper, an
  execution waiting for its turn) can `reap` one that is lost, which ends it `crashed`, publishes
  its final event and hands its session's turn on.

On one Redis each step is one script. In a Redis Cluster a script touches one slot: the
execution's own keys (record, lease, queue marker, channel...) share its hash tag, and the rest
(the indexes reapers look at, the session's line) follows in separate steps, each safe on its
own: the indexes are only where reapers look (the keys are the truth), and a line's head that
ended is dropped by whoever walks the line (core/session_line.py).
"""

from __future__ import annotations

import builtins  # `list` below is a method name: annotations past it say builtins.list
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Any

from core import events, liveness
from core.clock import now_ms
from core.execution_record import LUA_HEADER, ExecutionRecord, RecordError, Status
from core.jsontext import dumps
from core.keys import Keys, history_member
from core.liveness import Verdict
from core.memory_turns import LUA_WRITE_TURNS, TurnWrite, append_turns
from core.redis_clients import IN_FLIGHT, is_cluster, publish_command, script
from core.results import FinalResult
from core.session_line import LUA_TURN, SessionLine, Turn

if TYPE_CHECKING:
    from core.workflow_store import RouteCheck

# Reads a record's header: status (false when there is no readable record), revision, claim.
_HEADER = f"""
local function header(raw)
  if not raw then return false, -1, '' end
  local status, rev, claim = string.match(raw, '{LUA_HEADER}')
  if not status then return false, -1, '' end
  return status, tonumber(rev), claim
end
"""

# Hands the session's turn on after an execution left its line (one Redis only).
# line: the session's line ('' = none), id: the execution, prefix/suffix: of a turn key.
_LEAVE_LINE = """
local function leave_line(line, id, prefix, suffix)
  if line == '' then return end
  redis.call('LREM', line, 1, id)
  local head = redis.call('LINDEX', line, 0)
  if head then
    local turn = prefix .. head .. suffix
    redis.call('RPUSH', turn, '1')
    redis.call('EXPIRE', turn, 60)
  end
end
"""

# A new execution, on one Redis: its record, queue deadline and first items (if large), its place
# in the indexes and in its session's line, and its task when the broker is this Redis. One
# command: the pipeline it replaces cost the api a command and a reply to parse for each of ten.
# With `join` ('1'), a conversation (responseNodes) whose session already has one unfinished is
# not started: its id is answered instead (the message is that one's next reply), decided in the
# same step as the create, so two messages at once never start two conversations.
# With a route the api remembered (core/workflow_store.py RouteCheck), nothing is created (0) if
# the webhook no longer leads to that version of the workflow: the api routes it again.
# With a channel, nothing is created (-1) while nobody is subscribed to it: the api sends its
# SUBSCRIBE and this script without waiting for the confirmation in between, and its task is
# enqueued only once Redis holds the subscription (no event can be missed); when the script
# ran first, the api waits for the confirmation and runs it again.
# KEYS: record, queued, items, queued index, workflow's executions, line, task queue
#       (line and task queue are only touched when ARGV says so), history, [webhooks, workflow]
# ARGV: record, ttl s, queue timeout ms, execution id, queue deadline ms, now ms,
#       items ('' = none), in a line ('1'/'0'), task message ('' = none), join ('1'/'0'),
#       the halves around an id of a record's key, the events' channel ('' = none),
#       its history member, [webhook field, workflow id, its SHA-1]
_CREATE = f"""
if ARGV[15] and (redis.call('HGET', KEYS[9], ARGV[15]) ~= ARGV[16]
    or redis.sha1hex(redis.call('GET', KEYS[10]) or '') ~= ARGV[17]) then
  return 0
end
if ARGV[10] == '1' and ARGV[8] == '1' then
  for _, other in ipairs(redis.call('LRANGE', KEYS[6], 0, -1)) do
    local raw = redis.call('GET', ARGV[11] .. other .. ARGV[12])
    local status = raw and string.match(raw, '{LUA_HEADER}')
    if (status == 'new' or status == 'running' or status == 'waiting')
        and string.find(raw, '"responseMode":"responseNodes"', 1, true) then
      return other
    end
  end
end
if ARGV[13] ~= '' and redis.call('PUBSUB', 'NUMSUB', ARGV[13])[2] == 0 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
if ARGV[7] ~= '' then redis.call('SET', KEYS[3], ARGV[7], 'EX', ARGV[2]) end
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[6], ARGV[4])
redis.call('EXPIRE', KEYS[5], ARGV[2])
redis.call('ZADD', KEYS[8], ARGV[6], ARGV[14])
if ARGV[8] == '1' then
  redis.call('RPUSH', KEYS[6], ARGV[4])
  redis.call('EXPIRE', KEYS[6], ARGV[2])
end
if ARGV[9] ~= '' then redis.call('LPUSH', KEYS[7], ARGV[9]) end
return 1
"""

# Answers 0 (not claimed), 1 (claimed), or 2 (claimed, and a stop was asked for already).
# KEYS: record, lease, queued, stop, [running index, queued index]
# ARGV: expected rev, running record, ttl s, lease ms, claim token, execution id, lease deadline,
#       the lease's value (core/presence.py Owner)
_CLAIM_IT = """
local function claim_it()
  local status, rev, claim = header(redis.call('GET', KEYS[1]))
  if status == 'running' and claim == ARGV[5] then
    redis.call('SET', KEYS[2], ARGV[8], 'PX', ARGV[4])
    return 1 + redis.call('EXISTS', KEYS[4])
  end
  if status ~= 'new' or rev ~= tonumber(ARGV[1]) then return 0 end
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  redis.call('SET', KEYS[2], ARGV[8], 'PX', ARGV[4])
  redis.call('DEL', KEYS[3])
  if KEYS[5] then
    redis.call('ZADD', KEYS[5], ARGV[7], ARGV[6])
    redis.call('ZREM', KEYS[6], ARGV[6])
  end
  return 1 + redis.call('EXISTS', KEYS[4])
end
"""
_CLAIM = IN_FLIGHT + _HEADER + _CLAIM_IT + "return claim_it()\n"

# The claim, if it is the execution's turn in its session's line (one Redis): {1, what the
# claim answered}, else {0, the lost head ahead or ''}. What a worker did in two steps.
# KEYS: as the claim's (indexes included), then the line
# ARGV: as the claim's, then the halves around an id of the keys the turn reads
_CLAIM_AT_TURN = (
    IN_FLIGHT
    + _HEADER
    + LUA_TURN
    + _CLAIM_IT
    + """
local turn = turn_of(KEYS[7], ARGV[6], 9)
if turn[1] == 0 then return {0, turn[2] or ''} end
return {1, claim_it()}
"""
)

# The end of an execution: finish, cancel, a failed start, or a reap.
# KEYS: record, lease, queued, suspect, resume, replies, channel, taken, next, items,
#       [running index, queued index, waiting index, session line,
#        successor's record, queued, replies; the workflow's index; history]
# ARGV: 1 expected rev, 2 allowed statuses (comma separated), 3 final record, 4 ttl s,
#       5 final event ('' = none), 6 publish command, 7 claim token ('' = none), 8 reap (0/1),
#       9 execution id, 10/11 turn key prefix/suffix, 12 confirm ms,
#       13 successor record ('' = none), 14 its id, 15 queue timeout ms, 16 now ms,
#       17 queue deadline ms, 18 a reap's evidence: a worker connection that is gone
#       (core/presence.py; '' = none), 19 the successor's history member ('' = none), 20 the
#       final event as sent when replies it never took start the session's next execution
#       ('' = none), 21 the `next` event naming the successor ('' = none), 22 where the memory
#       turns' keys begin in KEYS ('' = none: they are the last KEYS), 23... the turns
#       (core/memory_turns.py). Every event comes encoded (core/events.py): the script only
#       chooses which to publish.
# Returns {outcome, successor, leftover replies...}: outcome ok, already, refused, alive,
# suspect; successor its id when this step started it with the leftovers (then the first
# leftover is the message it starts with, the others are its replies already).
_END = (
    IN_FLIGHT
    + _HEADER
    + liveness.LUA_JUDGE
    + _LEAVE_LINE
    + LUA_WRITE_TURNS
    + """
local raw = redis.call('GET', KEYS[1])
local status, rev, claim = header(raw)
local mine = ARGV[7] ~= '' and claim == ARGV[7]
if mine and rev == tonumber(ARGV[1]) + 1 and raw == ARGV[3] then
  local next = redis.call('GET', KEYS[9])
  if next then return {'already', ARGV[14], next} end
  return {'already', ''}
end
if ARGV[8] == '1' then
  if rev ~= tonumber(ARGV[1]) then return {'refused', ''} end
  local lease = redis.call('GET', KEYS[2])
  -- A lease that still names a connection the reaper saw gone holds nothing: its process died.
  if lease and ARGV[18] ~= '' and string.sub(lease, -#ARGV[18] - 1) == '@' .. ARGV[18] then
    lease = false
  end
  local verdict = judge(status, lease ~= false, redis.call('EXISTS', KEYS[3]) == 1)
  if verdict == 'alive' then
    redis.call('DEL', KEYS[4])
    return {'alive', ''}
  end
  if verdict ~= 'lost' then return {'refused', ''} end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local since = redis.call('GET', KEYS[4])
  if not since then
    redis.call('SET', KEYS[4], now, 'PX', 60000)
    return {'suspect', ''}
  end
  if now - tonumber(since) < tonumber(ARGV[12]) then return {'suspect', ''} end
else
  local allowed = false
  if rev == tonumber(ARGV[1]) then
    for s in string.gmatch(ARGV[2], '[^,]+') do if s == status then allowed = true end end
  end
  -- An execution declared lost stays lost: its stream was told so, and its worker, should it
  -- still be alive, writes nothing more (its memory turns included).
  if not allowed then return {'refused', ''} end
end
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8], KEYS[10])
if ARGV[22] ~= '' then write_turns(tonumber(ARGV[22]), 23) end
-- Replies it never took go to whoever finishes it: the session's next execution starts with
-- them. A reap leaves them for its worker, should that worker finish it after all.
local leftovers = {}
if ARGV[8] ~= '1' then
  leftovers = redis.call('LRANGE', KEYS[6], 0, -1)
  redis.call('DEL', KEYS[6])
end
-- On one Redis the next execution is put in its place in this same step, so that a message
-- coming now finds it unfinished and is its reply, never a third execution.
local successor = ''
if #leftovers > 0 and ARGV[13] ~= '' and KEYS[15] then
  successor = ARGV[14]
  redis.call('SET', KEYS[15], ARGV[13], 'EX', ARGV[4])
  redis.call('SET', KEYS[16], '1', 'PX', ARGV[15])
  for i = 2, #leftovers do redis.call('RPUSH', KEYS[17], leftovers[i]) end
  redis.call('EXPIRE', KEYS[17], ARGV[4])
  redis.call('ZADD', KEYS[18], ARGV[16], successor)
  redis.call('EXPIRE', KEYS[18], ARGV[4])
  redis.call('ZADD', KEYS[19], ARGV[16], ARGV[19])
  redis.call('ZADD', KEYS[12], ARGV[17], successor)
  if KEYS[14] ~= '' then redis.call('LINSERT', KEYS[14], 'AFTER', ARGV[9], successor) end
  redis.call('SET', KEYS[9], leftovers[1], 'EX', ARGV[4])
end
if ARGV[5] ~= '' then
  local event = ARGV[5]
  -- Replies it never took start the session's next execution: its chat socket will follow.
  if #leftovers > 0 then event = ARGV[20] end
  redis.call(ARGV[6], KEYS[7], event)
  if successor ~= '' then redis.call(ARGV[6], KEYS[7], ARGV[21]) end
end
if KEYS[11] then
  redis.call('ZREM', KEYS[11], ARGV[9])
  redis.call('ZREM', KEYS[12], ARGV[9])
  redis.call('ZREM', KEYS[13], ARGV[9])
  leave_line(KEYS[14], ARGV[9], ARGV[10], ARGV[11])
end
local reply = {'ok', successor}
for i, r in ipairs(leftovers) do reply[i + 2] = r end
return reply
"""
)

# A Chat node waits: take the next reply already queued (the execution goes on running), or
# record the wait (`running -> waiting`), keeping the session's turn, dropping the lease. A
# retry (same attempt) gets the answer its first try got: a reply taken is never lost.
# A stop asked for meanwhile wins: it does not wait ('stopped').
# KEYS: record, lease, replies, resume, taken, stop, [running index, waiting index]
# ARGV: claim token, waiting record, ttl s, resume state, deadline ms ('' = none), execution id,
#       expected rev, attempt, where the memory turns' keys begin in KEYS ('' = none: they are
#       the last KEYS), the turns (core/memory_turns.py): written with the reply taken or the
#       wait recorded, once (a retry answers from the taken mark or the waiting record)
_PAUSE = (
    IN_FLIGHT
    + _HEADER
    + LUA_WRITE_TURNS
    + """
local raw = redis.call('GET', KEYS[1])
local status, rev, claim = header(raw)
if claim ~= ARGV[1] then return {'refused'} end
if status == 'waiting' and raw == ARGV[2] then return {'paused'} end
local taken = redis.call('GET', KEYS[5])
local mark = ARGV[8] .. ':'
if taken and string.sub(taken, 1, #mark) == mark then
  return {'reply', string.sub(taken, #mark + 1)}
end
if status ~= 'running' then return {'refused'} end
if redis.call('EXISTS', KEYS[6]) == 1 then return {'stopped'} end
local reply = redis.call('LPOP', KEYS[3])
if reply then
  redis.call('SET', KEYS[5], mark .. reply, 'EX', ARGV[3])
  if ARGV[9] ~= '' then write_turns(tonumber(ARGV[9]), 10) end
  return {'reply', reply}
end
if rev ~= tonumber(ARGV[7]) then return {'refused'} end
if ARGV[9] ~= '' then write_turns(tonumber(ARGV[9]), 10) end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
redis.call('SET', KEYS[4], ARGV[4], 'EX', ARGV[3])
redis.call('DEL', KEYS[2])
if KEYS[7] then
  redis.call('ZREM', KEYS[7], ARGV[6])
  if ARGV[5] ~= '' then redis.call('ZADD', KEYS[8], ARGV[5], ARGV[6]) end
end
return {'paused'}
"""
)

# A chat message for an unfinished execution of its session (responseNodes): the reply a
# waiting one resumes with (`waiting -> new`), or the next reply of one that is not waiting yet.
# KEYS: record, replies, queued, [queued index, waiting index]
# ARGV: reply JSON, expected rev, queued record, ttl s, queue timeout ms, execution id,
#       queue deadline ms, queue it when not waiting (1) or refuse it (0)
_REPLY = (
    _HEADER
    + """
local status, rev = header(redis.call('GET', KEYS[1]))
if (status == 'new' or status == 'running') and ARGV[8] == '0' then return 'not waiting' end
if status == 'new' or status == 'running' then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  return 'queued'
end
if status ~= 'waiting' then return 'ended' end
if rev ~= tonumber(ARGV[2]) then return 'stale' end
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
if KEYS[4] then
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[6])
  redis.call('ZREM', KEYS[5], ARGV[6])
end
return 'resumed'
"""
)


class RouteChanged(Exception):
    """The route the api remembered no longer holds: the webhook was moved, or its workflow
    changed. Nothing was created; the request is routed again."""


class NotSubscribed(Exception):
    """The create found nobody subscribed to the execution's channel yet (the api's SUBSCRIBE
    is still on its way): nothing was created; the api waits for the confirmation and runs it
    again."""


class Claimed(IntEnum):
    """What a claim found; falsy when the execution was not claimed."""

    NOT = 0
    CLAIMED = 1
    STOP_ASKED = 2  # claimed, and a stop was asked for before: it is to end canceled at once


class Reply(StrEnum):
    QUEUED = "queued"  # the execution is not waiting yet: the message is its next reply
    NOT_WAITING = "not waiting"  # ...refused, when only a waiting execution may take it
    RESUMED = "resumed"  # it waited: now `new` again, to be enqueued with this reply
    ENDED = "ended"  # it finished (or is gone) meanwhile


@dataclass(slots=True)
class Ended:
    """What an end step did: `ok` (written now), `already` (a retry of one written before)."""

    outcome: str
    leftovers: builtins.list[str] = field(default_factory=list)  # replies it never took
    # The session's next execution, when the step itself started it with the leftovers (its
    # first message is leftovers[0], the rest are its replies already): its task is to send.
    successor: ExecutionRecord | None = None

    @property
    def written(self) -> bool:
        return self.outcome in ("ok", "already")


class ExecutionStore:
    def __init__(
        self,
        client,
        keys: Keys,
        ttl_seconds: int = 7 * 24 * 3600,
        *,
        queue_timeout_seconds: float = 300.0,
        lease_seconds: float = 5.0,
    ):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds
        self.queue_timeout_ms = int(queue_timeout_seconds * 1000)
        self.lease_ms = int(lease_seconds * 1000)
        self.cluster = is_cluster(client)
        self.lines = SessionLine(client, keys)
        self._create = script(client, _CREATE)
        self._claim = script(client, _CLAIM)
        self._claim_at_turn = script(client, _CLAIM_AT_TURN)
        self._end = script(client, _END)
        self._pause = client.register_script(_PAUSE)
        self._reply = client.register_script(_REPLY)

    @classmethod
    def from_settings(cls, client, keys: Keys, settings) -> ExecutionStore:
        return cls(
            client,
            keys,
            settings.executions_ttl,
            queue_timeout_seconds=settings.queue_timeout_seconds,
            lease_seconds=settings.lease_seconds,
        )

    def stored_items(self, execution_id: str) -> list[dict[str, Any]] | None:
        """The first items stored beside the record (core/task.py), None if they are gone."""
        raw = self.client.get(self.keys.execution_items(execution_id))
        return None if raw is None else json.loads(raw)

    def load_scripts(self) -> None:
        """Have Redis hold the Lua scripts now, so no execution pays for a NOSCRIPT round trip
        (in a cluster, SCRIPT LOAD goes to every primary)."""
        scripts = (self._create, self._claim, self._claim_at_turn, self._end, self._pause,
                   self._reply)  # fmt: skip
        for each in scripts:
            self.client.script_load(each.script)
        self.lines.load_scripts()

    # --- reading --------------------------------------------------------------------------
    def get(self, execution_id: str) -> ExecutionRecord | None:
        return _decoded(self.client.get(self.keys.execution(execution_id)))

    def list(self, workflow_id: str, limit: int = 50) -> builtins.list[ExecutionRecord]:
        ids = self.client.zrevrange(self.keys.workflow_executions(workflow_id), 0, limit - 1)
        if not ids:
            return []
        keys = [self.keys.execution(i) for i in ids]
        raws = self.client.mget_nonatomic(keys) if self.cluster else self.client.mget(keys)
        return [r for r in map(_decoded, raws) if r is not None]

    # --- the api's steps ------------------------------------------------------------------
    def create(
        self,
        record: ExecutionRecord,
        items: bytes | None = None,
        task: tuple[str, bytes] | None = None,
        join: bool = False,
        route: RouteCheck | None = None,
        channel: str = "",
    ) -> str | None:
        """Store a `new` record, waiting in the broker's queue for at most the queue timeout,
        and take a place in its session's line; `items`: its first items as JSON, when too large
        for the task's message (core/task.py). `task`: (queue, message) when the broker is this
        Redis (worker/celery_app.py `redis_message`): the task is enqueued in the same
        transaction, so no execution is ever recorded without its task, nor the reverse.
        `join` (a conversation, responseNodes): if its session has an unfinished conversation
        already, nothing is created and that one's id is answered (in a cluster, decided in the
        step in the session's slot: core/session_line.py `enter`). `route`: the route the
        api remembered, checked in the same step; RouteChanged (nothing created) if stale.
        `channel`: the execution's events' channel, which must have a subscriber before the
        task is enqueued; NotSubscribed (nothing created) if it has none yet."""
        if self.cluster:
            if task is not None:
                raise ValueError("a cluster cannot be the broker: its tasks go through Celery")
            return self._create_in_steps(record, items, join)
        execution_id = record.id
        line = self.lines.key(record)
        queue, message = task if task is not None else (self.keys.queued(), b"")
        keys = [
            self.keys.execution(execution_id),
            self.keys.execution_queued(execution_id),
            self.keys.execution_items(execution_id),
            self.keys.queued(),
            self.keys.workflow_executions(record.workflow_id),
            line or self.keys.queued(),  # not touched without a line
            queue,
            self.keys.executions_history(),
        ]
        now = now_ms()
        args = [record.encode(), self.ttl, self.queue_timeout_ms, execution_id,
                now + self.queue_timeout_ms, now, items or b"", int(bool(line)), message,
                int(join), *self.keys.execution("\0").split("\0"), channel,
                history_member(execution_id, record.workflow_id)]  # fmt: skip
        if route is not None:
            keys += [self.keys.webhooks(), self.keys.workflow(route.workflow_id)]
            args += [route.field, route.workflow_id, route.digest]
        created = self._create(keys=keys, args=args)
        if created == 0:
            raise RouteChanged(route.field if route is not None else "")
        if created == -1:
            raise NotSubscribed(channel)
        return None if created == 1 else _text(created)

    def _create_in_steps(
        self, record: ExecutionRecord, items: bytes | None, join: bool
    ) -> str | None:
        """`create` on a cluster: the record's slot first (a line's head with no record is
        dropped as gone), then its place in the session's line, in the line's slot, where a
        conversation may find it is to join the session's unfinished one instead (then the
        record goes again, and that one's id is answered), then the indexes."""
        execution_id = record.id
        own_keys = [self.keys.execution(execution_id), self.keys.execution_queued(execution_id),
                    self.keys.execution_items(execution_id)]  # fmt: skip
        own = self.client.pipeline(transaction=False)
        own.set(own_keys[0], record.encode(), ex=self.ttl)
        own.set(own_keys[1], "1", px=self.queue_timeout_ms)
        if items is not None:
            own.set(own_keys[2], items, ex=self.ttl)
        own.execute()
        line = self.lines.key(record)
        if line:
            joined = self.lines.enter(line, record, self.ttl, join, self._finished)
            if joined is not None:
                self.client.delete(*own_keys)  # one slot: the record never started
                return joined
        own = self.client.pipeline(transaction=False)
        own.zadd(self.keys.queued(), {execution_id: now_ms() + self.queue_timeout_ms})
        own.zadd(self.keys.workflow_executions(record.workflow_id), {execution_id: now_ms()})
        own.expire(self.keys.workflow_executions(record.workflow_id), self.ttl)
        member = history_member(execution_id, record.workflow_id)
        own.zadd(self.keys.executions_history(), {member: now_ms()})
        own.execute()
        return None

    def _finished(self, execution_id: str) -> bool:
        record = self.get(execution_id)
        return record is None or record.finished

    def fail_start(self, record: ExecutionRecord, error: str) -> bool:
        """A `new` execution whose task could not be sent: failed at once (it would otherwise
        hold its session's line until the queue timeout)."""
        failed = record.next(status=Status.ERROR, error=error, stopped_at=now_ms())
        final = FinalResult(Status.ERROR, error)
        return self._end_step(record, failed, {Status.NEW}, result=final).written

    def reply(
        self, record: ExecutionRecord, reply: dict[str, Any], *, queue: bool = True
    ) -> tuple[Reply, ExecutionRecord | None]:
        """Hand a chat message to an unfinished execution of its session: queued as its next
        reply, or, when it waits, the reply it resumes with (then the `new` record to enqueue).
        Without `queue`, only a waiting execution takes it (an approval button's click)."""
        while True:
            queued = record.next(status=Status.NEW, queued_at=now_ms(), wait_till=None)
            execution_id = record.id
            keys = [
                self.keys.execution(execution_id),
                self.keys.execution_replies(execution_id),
                self.keys.execution_queued(execution_id),
            ]
            if not self.cluster:
                keys += [self.keys.queued(), self.keys.waiting()]
            deadline = now_ms() + self.queue_timeout_ms
            args = [dumps(reply), record.rev, queued.encode(), self.ttl, self.queue_timeout_ms,
                    execution_id, deadline, int(queue)]  # fmt: skip
            outcome = self._reply(keys=keys, args=args)
            if outcome == "stale":  # it waited again meanwhile (a later Chat node)
                current = self.get(execution_id)
                if current is None:
                    return Reply.ENDED, None
                record = current
                continue
            if outcome == Reply.RESUMED and self.cluster:
                pipe = self.client.pipeline(transaction=False)
                pipe.zadd(self.keys.queued(), {execution_id: deadline})
                pipe.zrem(self.keys.waiting(), execution_id)
                pipe.execute()
            return Reply(outcome), queued if outcome == Reply.RESUMED else None

    def resume_expired(self, record: ExecutionRecord) -> ExecutionRecord | None:
        """A wait whose time limit passed goes on without a reply, as n8n's does: `waiting ->
        new`, the record to enqueue; None if it stopped waiting meanwhile."""
        outcome, queued = self.reply(record, {}, queue=False)
        return queued if outcome == Reply.RESUMED else None

    def cancel(self, record: ExecutionRecord, why: str) -> bool:
        """Stop an execution that is not running (`new` or `waiting`): canceled, and its
        stream told at once."""
        canceled = record.next(status=Status.CANCELED, error=why, stopped_at=now_ms())
        final = FinalResult(Status.CANCELED, why)
        return self._end_step(record, canceled, {Status.NEW, Status.WAITING}, result=final).written

    # --- a worker's steps -----------------------------------------------------------------
    def claim(self, record: ExecutionRecord, running: ExecutionRecord, lease: str = "") -> Claimed:
        """`new -> running` with this worker's lease (its value `lease`, by default the claim
        token), if the record is still the `record` the task carried (same revision); claimed
        again for a retry of this very claim. Whether a stop was asked for already comes with
        it (falsy: not claimed)."""
        execution_id = record.id
        deadline = now_ms() + self.lease_ms
        keys, args = self._claim_keys_args(record, running, deadline, lease)
        claimed = Claimed(self._claim(keys=keys, args=args))
        if claimed and self.cluster:
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(self.keys.running(), {execution_id: deadline})
            pipe.zrem(self.keys.queued(), execution_id)
            pipe.execute()
        return claimed

    def _claim_keys_args(
        self, record: ExecutionRecord, running: ExecutionRecord, deadline: int, lease: str
    ) -> tuple[builtins.list[str], builtins.list[Any]]:
        """The claim script's KEYS and ARGV (the indexes too, on one Redis)."""
        execution_id = record.id
        keys = [
            self.keys.execution(execution_id),
            self.keys.execution_lease(execution_id),
            self.keys.execution_queued(execution_id),
            self.keys.execution_stop(execution_id),
        ]
        if not self.cluster:
            keys += [self.keys.running(), self.keys.queued()]
        args = [record.rev, running.encode(), self.ttl, self.lease_ms, running.claim,
                execution_id, deadline, lease or running.claim]  # fmt: skip
        return keys, args

    def claim_at_turn(
        self, record: ExecutionRecord, running: ExecutionRecord, line: str, lease: str = ""
    ) -> tuple[Claimed, Turn]:
        """`claim`, if it is the execution's turn in its session's `line`: one step for the
        common case, where nothing is ahead of it (one Redis only; a cluster turns, then
        claims)."""
        keys, args = self._claim_keys_args(record, running, now_ms() + self.lease_ms, lease)
        keys.append(line)
        args += self.lines.key_halves()
        mine, answer = self._claim_at_turn(keys=keys, args=args)
        if not mine:
            return Claimed.NOT, Turn(False, _text(answer) or None)
        return Claimed(answer), Turn(True)

    def pause(
        self,
        running: ExecutionRecord,
        waiting: ExecutionRecord,
        resume_state: str,
        attempt: str,
        turns: Sequence[TurnWrite] = (),
    ) -> tuple[str, str | None]:
        """A Chat node waits: ("reply", the reply JSON) when one is already queued (the run goes
        on), ("paused", None) once recorded `waiting`, ("stopped", None) when a stop was asked
        for (it is to end canceled), ("refused", None) if it stopped being this worker's
        (reaped). `attempt` names this pause (letters and digits): a
        retry with the same one gets the same answer."""
        execution_id = running.id
        keys = [
            self.keys.execution(execution_id),
            self.keys.execution_lease(execution_id),
            self.keys.execution_replies(execution_id),
            self.keys.execution_resume(execution_id),
            self.keys.execution_taken(execution_id),
            self.keys.execution_stop(execution_id),
        ]
        if not self.cluster:
            keys += [self.keys.running(), self.keys.waiting()]
        deadline = "" if waiting.wait_till is None else waiting.wait_till
        args = [running.claim, waiting.encode(), self.ttl, resume_state, deadline, execution_id,
                running.rev, attempt, ""]  # fmt: skip
        append_turns(keys, args, turns, self.cluster)
        if self.cluster and waiting.wait_till is not None:
            # Before the wait is recorded: a wait whose deadline nobody knows would last forever.
            self.client.zadd(self.keys.waiting(), {execution_id: waiting.wait_till})
        outcome, *rest = self._pause(keys=keys, args=args)
        if outcome == "paused" and self.cluster:
            self.client.zrem(self.keys.running(), execution_id)
        return outcome, (rest[0] if rest else None)

    def end_wait(
        self, waiting: ExecutionRecord, final: ExecutionRecord, result: FinalResult
    ) -> bool:
        """End a waiting execution (its time limit passed), its stream told."""
        return self._end_step(waiting, final, {Status.WAITING}, result=result).written

    def finish(
        self,
        running: ExecutionRecord,
        final: ExecutionRecord,
        event: str,
        successor: ExecutionRecord | None = None,
        turns: Sequence[TurnWrite] = (),
    ) -> Ended:
        """Record the outcome and publish the final event (`event`, '' when the outbox delivers
        it itself) in one step, with the run's memory `turns` (one Redis only: in a cluster
        they are other slots'). Refused once a reaper declared it lost: its stream was told
        so. `successor`: the session's next execution, started in the same step if replies
        were left over (one Redis only)."""
        return self._end_step(running, final, {Status.RUNNING}, event=event,
                              claim=running.claim, successor=successor, turns=turns)  # fmt: skip

    # --- anyone ---------------------------------------------------------------------------
    def reap(self, execution_id: str, gone: str = "") -> ExecutionRecord | None:
        """End the execution `crashed` if it is lost (core/liveness.py), once the loss is
        confirmed; the record as it now stands (None if gone). `gone`: a worker connection
        that no longer exists (core/presence.py): a lease that names it holds nothing."""
        record = self.get(execution_id)
        if record is None or record.finished:
            return record
        reason = self.lost_reason(record, died=bool(gone))
        crashed = record.next(status=Status.CRASHED, error=reason, stopped_at=now_ms())
        final = FinalResult(Status.CRASHED, crashed.error)
        ended = self._end_step(record, crashed, set(), result=final, reap=True, gone=gone)
        if ended.outcome == "ok":
            return crashed
        if ended.outcome == "refused":  # written meanwhile by someone else: as it stands
            return self.get(execution_id)
        return record

    def lost_reason(self, record: ExecutionRecord, died: bool = False) -> str:
        if record.status == Status.RUNNING and died:
            return "The worker running this execution died (its process is gone)."
        if record.status == Status.RUNNING:
            return "The worker running this execution was lost (it stopped renewing its lease)."
        if died:
            return "The worker that took this execution died before it could start it."
        waited = now_ms() - (record.queued_at or record.created_at)
        if waited >= self.queue_timeout_ms:
            return f"No worker started this execution within {self.queue_timeout_ms / 1000:g} s."
        return "The worker that took this execution was lost before it could start it."

    def verdicts(
        self, execution_ids: builtins.list[str]
    ) -> dict[str, tuple[ExecutionRecord | None, Verdict]]:
        """Each execution's record and liveness, read in one round trip (the api's batched
        quiet-stream checks). A lost one is only judged here: `reap` ends it."""
        pipe = self.client.pipeline(transaction=False)
        for execution_id in execution_ids:
            pipe.get(self.keys.execution(execution_id))
            pipe.exists(self.keys.execution_lease(execution_id))
            pipe.exists(self.keys.execution_queued(execution_id))
        replies = pipe.execute()
        answers = {}
        for i, execution_id in enumerate(execution_ids):
            record = _decoded(replies[3 * i])
            status = record.status if record is not None else None
            verdict = liveness.judge(status, bool(replies[3 * i + 1]), bool(replies[3 * i + 2]))
            answers[execution_id] = record, verdict
        return answers

    # --- the end, in one step -------------------------------------------------------------
    def _end_step(
        self,
        current: ExecutionRecord,
        final: ExecutionRecord,
        allowed: set[Status],
        *,
        result: FinalResult | None = None,
        event: str = "",
        claim: str = "",
        reap: bool = False,
        gone: str = "",
        successor: ExecutionRecord | None = None,
        turns: Sequence[TurnWrite] = (),
    ) -> Ended:
        """Write `final` over `current` (same revision, status in `allowed`), publish the
        final event (`event`, or a control event of `result`), drop what kept it alive, and hand
        its session's turn on."""
        execution_id = current.id
        event, continued = _final_events(result, event, reap)
        keys = [
            self.keys.execution(execution_id),
            self.keys.execution_lease(execution_id),
            self.keys.execution_queued(execution_id),
            self.keys.execution_suspect(execution_id),
            self.keys.execution_resume(execution_id),
            self.keys.execution_replies(execution_id),
            self.keys.execution_events(execution_id),
            self.keys.execution_taken(execution_id),
            self.keys.execution_next(execution_id),
            self.keys.execution_items(execution_id),
        ]
        line = self.lines.key(current) or ""
        if self.cluster:
            successor = None  # its keys are in other slots: started in steps of its own
        else:
            keys += [self.keys.running(), self.keys.queued(), self.keys.waiting(), line]
            if successor is not None:
                keys += [
                    self.keys.execution(successor.id),
                    self.keys.execution_queued(successor.id),
                    self.keys.execution_replies(successor.id),
                    self.keys.workflow_executions(successor.workflow_id),
                    self.keys.executions_history(),
                ]
        turn = self.keys.execution_turn("\0").split("\0")
        now = now_ms()
        args = [
            current.rev,
            ",".join(sorted(allowed)),
            final.encode(),
            self.ttl,
            event,
            publish_command(self.client),
            claim,
            int(reap),
            execution_id,
            turn[0],
            turn[1],
            liveness.GONE_CONFIRM_MS if gone else liveness.CONFIRM_MS,
            "" if successor is None else successor.encode(),
            "" if successor is None else successor.id,
            self.queue_timeout_ms,
            now,
            now + self.queue_timeout_ms,
            gone,
            "" if successor is None else history_member(successor.id, successor.workflow_id),
            continued,
            "" if successor is None else events.encode(events.next_execution(successor.id)),
            "",
        ]
        append_turns(keys, args, turns, self.cluster)
        outcome, started, *leftovers = self._end(keys=keys, args=args)
        if outcome == "ok" and self.cluster:
            pipe = self.client.pipeline(transaction=False)
            for index in (self.keys.running(), self.keys.queued(), self.keys.waiting()):
                pipe.zrem(index, execution_id)
            pipe.execute()
            if line:
                self.lines.leave(line, execution_id)
        return Ended(outcome, leftovers, successor if started else None)


def _final_events(result: FinalResult | None, event: str, reap: bool) -> tuple[str, str]:
    """An end's final event (`event`, or the control event of `result`; '' = none) and the
    same event saying the conversation continues (`continues`), which the end publishes when
    replies it never took start the session's next execution (never after a reap)."""
    if result is not None:
        done = events.done(result.to_json())
        event = events.encode(done)
    elif event:
        done = events.decode(event)
    else:
        return "", ""
    return event, "" if reap else events.encode(events.continuing(done))


def _decoded(raw: str | bytes | None) -> ExecutionRecord | None:
    if not raw:
        return None
    try:
        return ExecutionRecord.decode(raw)
    except (RecordError, ValueError, KeyError, TypeError):
        return None  # not a record of ours (a version before this one): as if gone


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
