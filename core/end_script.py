"""The end of an execution in one script: finish, cancel, a failed start, an expired wait or a
reap (core/executions.py says what it guarantees), with the class that names its KEYS and ARGV
(core/script_call.py) and the events it may publish, each encoded here by core/events.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import events, liveness
from core.execution_scripts import LUA_RECORD_HEADER
from core.memory_turns import LUA_WRITE_TURNS
from core.redis_clients import IN_FLIGHT
from core.results import FinalResult
from core.script_call import ScriptCall, arg, key


@dataclass(slots=True, kw_only=True)
class EndCall(ScriptCall):
    """Its ARGV tail: the memory turns (core/memory_turns.py), whose keys follow its KEYS."""

    TAIL = "turn_args_at"
    record_key: str = key()
    lease_key: str = key()
    queued_key: str = key()
    suspect_key: str = key()
    resume_key: str = key()
    replies_key: str = key()
    channel: str = key()
    taken_key: str = key()
    next_key: str = key()  # the message the session's next execution starts with
    items_key: str = key()
    # One Redis only: the indexes and the session's line ('' = none)...
    running_index: str | None = key(optional=True)
    queued_index: str | None = key(optional=True)
    waiting_index: str | None = key(optional=True)
    line_key: str | None = key(optional=True)
    # ...and, when given one, the session's next execution's keys.
    successor_key: str | None = key(optional=True)
    successor_queued_key: str | None = key(optional=True)
    successor_replies_key: str | None = key(optional=True)
    workflow_index: str | None = key(optional=True)  # its workflow's executions
    history_index: str | None = key(optional=True)
    expected_rev: int = arg()
    allowed: str = arg()  # the statuses it may end from, comma separated
    final_record: Any = arg()
    ttl: int = arg()  # s
    final_event: str = arg()  # '' = none
    publish: str = arg()  # PUBLISH or SPUBLISH
    claim_token: str = arg()  # '' = none
    reap: int = arg()  # 1/0
    execution_id: str = arg()
    turn_key_head: str = arg()  # the halves around an id of a turn key
    turn_key_tail: str = arg()
    confirm_ms: int = arg()  # how long a loss is seen before a reap ends it
    successor_record: Any = arg()  # '' = none
    successor_id: str = arg()
    queue_timeout_ms: int = arg()
    now: int = arg()  # ms
    queue_deadline: int = arg()  # ms
    gone: str = arg()  # a reap's evidence: a worker connection that is gone ('' = none)
    successor_member: str = arg()  # its history member ('' = none)
    continued_event: str = arg()  # the final event saying the conversation continues
    next_event: str = arg()  # the `next` event naming the successor ('' = none)
    turns_at: Any = arg()  # where the memory turns' keys begin in KEYS ('' = none)


# Hands the session's turn on after an execution left its line (one Redis only).
# line: the session's line ('' = none), id: the execution, head/tail: of a turn key.
_LEAVE_LINE = """
local function leave_line(line, id, head, tail)
  if line == '' then return end
  redis.call('LREM', line, 1, id)
  local first = redis.call('LINDEX', line, 0)
  if first then
    local turn = head .. first .. tail
    redis.call('RPUSH', turn, '1')
    redis.call('EXPIRE', turn, 60)
  end
end
"""

# A reap's verdict: 'lost' (end it now), or an answer to return. A loss is confirmed: seen
# (the suspect key) and seen again `confirm_ms` later.
_JUDGE_LOSS = """
local function judge_loss(status, rev)
  if rev ~= tonumber(expected_rev) then return {'refused', ''} end
  local lease = redis.call('GET', lease_key)
  -- A lease that still names a connection the reaper saw gone holds nothing: its process died.
  if lease and gone ~= '' and string.sub(lease, -#gone - 1) == '@' .. gone then
    lease = false
  end
  local verdict = judge(status, lease ~= false, redis.call('EXISTS', queued_key) == 1)
  if verdict == 'alive' then
    redis.call('DEL', suspect_key)
    return {'alive', ''}
  end
  if verdict ~= 'lost' then return {'refused', ''} end
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local since = redis.call('GET', suspect_key)
  if not since then
    redis.call('SET', suspect_key, now_ms, 'PX', 60000)
    return {'suspect', ''}
  end
  if now_ms - tonumber(since) < tonumber(confirm_ms) then return {'suspect', ''} end
  return 'lost'
end
"""

# On one Redis the next execution is put in its place in this same step, so that a message
# coming now finds it unfinished and is its reply, never a third execution. The successor's
# keys are read only with its record: memory turns' keys may follow the KEYS given.
_START_SUCCESSOR = """
local function start_successor(leftovers)
  redis.call('SET', successor_key, successor_record, 'EX', ttl)
  redis.call('SET', successor_queued_key, '1', 'PX', queue_timeout_ms)
  for i = 2, #leftovers do redis.call('RPUSH', successor_replies_key, leftovers[i]) end
  redis.call('EXPIRE', successor_replies_key, ttl)
  redis.call('ZADD', workflow_index, now, successor_id)
  redis.call('EXPIRE', workflow_index, ttl)
  redis.call('ZADD', history_index, now, successor_member)
  redis.call('ZADD', queued_index, queue_deadline, successor_id)
  if line_key ~= '' then redis.call('LINSERT', line_key, 'AFTER', execution_id, successor_id) end
  redis.call('SET', next_key, leftovers[1], 'EX', ttl)
end
"""

# Returns {outcome, successor, leftover replies...}: outcome ok, already, refused, alive,
# suspect; successor its id when this step started it with the leftovers (then the first
# leftover is the message it starts with, the others are its replies already).
END = (
    IN_FLIGHT
    + EndCall.prologue()
    + LUA_RECORD_HEADER
    + liveness.LUA_JUDGE
    + _LEAVE_LINE
    + LUA_WRITE_TURNS
    + _JUDGE_LOSS
    + _START_SUCCESSOR
    + """
local raw = redis.call('GET', record_key)
local status, rev, claim = header(raw)
local mine = claim_token ~= '' and claim == claim_token
if mine and rev == tonumber(expected_rev) + 1 and raw == final_record then
  local first = redis.call('GET', next_key)
  if first then return {'already', successor_id, first} end
  return {'already', ''}
end
if reap == '1' then
  local verdict = judge_loss(status, rev)
  if verdict ~= 'lost' then return verdict end
else
  local allowed_now = false
  if rev == tonumber(expected_rev) then
    for s in string.gmatch(allowed, '[^,]+') do if s == status then allowed_now = true end end
  end
  -- An execution declared lost stays lost: its stream was told so, and its worker, should it
  -- still be alive, writes nothing more (its memory turns included).
  if not allowed_now then return {'refused', ''} end
end
redis.call('SET', record_key, final_record, 'EX', ttl)
redis.call('DEL', lease_key, queued_key, suspect_key, resume_key, taken_key, items_key)
if turns_at ~= '' then write_turns(tonumber(turns_at), turn_args_at) end
-- Replies it never took go to whoever finishes it: the session's next execution starts with
-- them. A reap leaves them for its worker, should that worker finish it after all.
local leftovers = {}
if reap ~= '1' then
  leftovers = redis.call('LRANGE', replies_key, 0, -1)
  redis.call('DEL', replies_key)
end
local successor = ''
if #leftovers > 0 and successor_record ~= '' and successor_key then
  successor = successor_id
  start_successor(leftovers)
end
if final_event ~= '' then
  -- Replies it never took start the session's next execution: its chat socket will follow.
  if #leftovers > 0 then redis.call(publish, channel, continued_event)
  else redis.call(publish, channel, final_event) end
  if successor ~= '' then redis.call(publish, channel, next_event) end
end
if running_index then
  redis.call('ZREM', running_index, execution_id)
  redis.call('ZREM', queued_index, execution_id)
  redis.call('ZREM', waiting_index, execution_id)
  leave_line(line_key, execution_id, turn_key_head, turn_key_tail)
end
local reply = {'ok', successor}
for i, r in ipairs(leftovers) do reply[i + 2] = r end
return reply
"""
)


def final_events(result: FinalResult | None, event: str, reap: bool) -> tuple[str, str]:
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
