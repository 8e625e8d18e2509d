"""The Lua scripts of an execution's transitions but its end (core/end_script.py), each beside
the class that names its KEYS and ARGV (core/script_call.py). core/executions.py says what the
steps guarantee; core/execution_transitions.py runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.execution_record import LUA_HEADER
from core.keys import Keys
from core.memory_turns import LUA_WRITE_TURNS
from core.redis_clients import IN_FLIGHT
from core.script_call import ScriptCall, arg, key, names_of
from core.session_line import LUA_TURN

# An execution's own keys, by the names the scripts give them: a script's class names those it
# takes, and `own_keys` builds them (core/keys.py).
_OWN_KEYS: dict[str, Callable[[Keys, str], str]] = {
    "record_key": Keys.execution,
    "lease_key": Keys.execution_lease,
    "queued_key": Keys.execution_queued,
    "stop_key": Keys.execution_stop,
    "replies_key": Keys.execution_replies,
    "resume_key": Keys.execution_resume,
    "taken_key": Keys.execution_taken,
    "suspect_key": Keys.execution_suspect,
    "channel": Keys.execution_events,
    "next_key": Keys.execution_next,
    "items_key": Keys.execution_items,
}


def own_keys(keys: Keys, call: type[ScriptCall], execution_id: str) -> dict[str, Any]:
    """The keys of the execution that the script of `call` takes, by their names."""
    return {name: build(keys, execution_id) for name, build in _own_builders(call)}


_BUILDERS: dict[type, list[tuple[str, Callable[[Keys, str], str]]]] = {}


def _own_builders(call: type[ScriptCall]) -> list[tuple[str, Callable[[Keys, str], str]]]:
    found = _BUILDERS.get(call)
    if found is None:
        names = names_of(call, "KEYS")
        found = _BUILDERS[call] = [(n, _OWN_KEYS[n]) for n in names if n in _OWN_KEYS]
    return found


# Reads a record's header: status (false when there is no readable record), revision, claim.
LUA_RECORD_HEADER = f"""
local function header(raw)
  if not raw then return false, -1, '' end
  local status, rev, claim = string.match(raw, '{LUA_HEADER}')
  if not status then return false, -1, '' end
  return status, tonumber(rev), claim
end
"""


@dataclass(slots=True, kw_only=True)
class CreateCall(ScriptCall):
    record_key: str = key()
    queued_key: str = key()
    items_key: str = key()
    queued_index: str = key()
    workflow_index: str = key()  # the workflow's executions
    line_key: str = key()  # the session's line (only touched `in_line`)
    task_queue: str = key()  # (only touched with a `task`)
    history_index: str = key()
    webhooks_key: str | None = key(optional=True)  # with a route to check
    workflow_key: str | None = key(optional=True)
    record: Any = arg()
    ttl: int = arg()  # s
    queue_timeout_ms: int = arg()
    execution_id: str = arg()
    queue_deadline: int = arg()  # ms
    now: int = arg()  # ms
    items: Any = arg()  # '' = none
    in_line: int = arg()  # 1/0
    task: Any = arg()  # the task's message ('' = none)
    join: int = arg()  # 1/0
    record_key_head: str = arg()  # the halves around an id of a record's key
    record_key_tail: str = arg()
    channel: str = arg()  # the events' channel ('' = none)
    history_member: str = arg()
    route_field: str | None = arg(optional=True)  # the webhook's field, with a route to check
    route_workflow_id: str | None = arg(optional=True)
    route_digest: str | None = arg(optional=True)  # the SHA-1 of the workflow's stored text


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
CREATE = (
    CreateCall.prologue()
    + f"""
if route_field and (redis.call('HGET', webhooks_key, route_field) ~= route_workflow_id
    or redis.sha1hex(redis.call('GET', workflow_key) or '') ~= route_digest) then
  return 0
end
if join == '1' and in_line == '1' then
  for _, other in ipairs(redis.call('LRANGE', line_key, 0, -1)) do
    local raw = redis.call('GET', record_key_head .. other .. record_key_tail)
    local status = raw and string.match(raw, '{LUA_HEADER}')
    if (status == 'new' or status == 'running' or status == 'waiting')
        and string.find(raw, '"responseMode":"responseNodes"', 1, true) then
      return other
    end
  end
end
if channel ~= '' and redis.call('PUBSUB', 'NUMSUB', channel)[2] == 0 then
  return -1
end
redis.call('SET', record_key, record, 'EX', ttl)
redis.call('SET', queued_key, '1', 'PX', queue_timeout_ms)
if items ~= '' then redis.call('SET', items_key, items, 'EX', ttl) end
redis.call('ZADD', queued_index, queue_deadline, execution_id)
redis.call('ZADD', workflow_index, now, execution_id)
redis.call('EXPIRE', workflow_index, ttl)
redis.call('ZADD', history_index, now, history_member)
if in_line == '1' then
  redis.call('RPUSH', line_key, execution_id)
  redis.call('EXPIRE', line_key, ttl)
end
if task ~= '' then redis.call('LPUSH', task_queue, task) end
return 1
"""
)


@dataclass(slots=True, kw_only=True)
class ClaimCall(ScriptCall):
    record_key: str = key()
    lease_key: str = key()
    queued_key: str = key()
    stop_key: str = key()
    running_index: str | None = key(optional=True)  # the indexes: one Redis only
    queued_index: str | None = key(optional=True)
    expected_rev: int = arg()
    running_record: Any = arg()
    ttl: int = arg()  # s
    lease_ms: int = arg()
    claim_token: str = arg()
    execution_id: str = arg()
    lease_deadline: int = arg()  # ms
    lease_value: str = arg()  # core/presence.py Owner


# Answers 0 (not claimed), 1 (claimed), or 2 (claimed, and a stop was asked for already).
_CLAIM_IT = """
local function claim_it()
  local status, rev, claim = header(redis.call('GET', record_key))
  if status == 'running' and claim == claim_token then
    redis.call('SET', lease_key, lease_value, 'PX', lease_ms)
    return 1 + redis.call('EXISTS', stop_key)
  end
  if status ~= 'new' or rev ~= tonumber(expected_rev) then return 0 end
  redis.call('SET', record_key, running_record, 'EX', ttl)
  redis.call('SET', lease_key, lease_value, 'PX', lease_ms)
  redis.call('DEL', queued_key)
  if running_index then
    redis.call('ZADD', running_index, lease_deadline, execution_id)
    redis.call('ZREM', queued_index, execution_id)
  end
  return 1 + redis.call('EXISTS', stop_key)
end
"""
CLAIM = IN_FLIGHT + ClaimCall.prologue() + LUA_RECORD_HEADER + _CLAIM_IT + "return claim_it()\n"


@dataclass(slots=True, kw_only=True)
class ClaimAtTurnCall(ClaimCall):
    """The claim's (indexes included), then the session's line; its ARGV tail: the halves
    around an id of the keys the turn reads (core/session_line.py `key_halves`)."""

    TAIL = "halves_at"
    line_key: str = key()
    halves: tuple[str, ...] = ()

    def tail(self) -> tuple[str, ...]:
        return self.halves


# The claim, if it is the execution's turn in its session's line (one Redis): {1, what the
# claim answered}, else {0, the lost head ahead or ''}. What a worker did in two steps.
CLAIM_AT_TURN = (
    IN_FLIGHT
    + ClaimAtTurnCall.prologue()
    + LUA_RECORD_HEADER
    + LUA_TURN
    + _CLAIM_IT
    + """
local turn = turn_of(line_key, execution_id, halves_at)
if turn[1] == 0 then return {0, turn[2] or ''} end
return {1, claim_it()}
"""
)


@dataclass(slots=True, kw_only=True)
class PauseCall(ScriptCall):
    """Its ARGV tail: the memory turns (core/memory_turns.py), whose keys follow its KEYS."""

    TAIL = "turn_args_at"
    record_key: str = key()
    lease_key: str = key()
    replies_key: str = key()
    resume_key: str = key()
    taken_key: str = key()
    stop_key: str = key()
    running_index: str | None = key(optional=True)  # the indexes: one Redis only
    waiting_index: str | None = key(optional=True)
    claim_token: str = arg()
    waiting_record: Any = arg()
    ttl: int = arg()  # s
    resume_state: str = arg()
    wait_deadline: Any = arg()  # ms ('' = none)
    execution_id: str = arg()
    expected_rev: int = arg()
    attempt: str = arg()
    take_reply: int = arg()  # 1: a reply already queued ends the wait (a Chat node's); 0: never
    turns_at: Any = arg()  # where the memory turns' keys begin in KEYS ('' = none)


# A node waits: take the next reply already queued, if its wait takes one (a Chat node's: the
# execution goes on running), or
# record the wait (`running -> waiting`), keeping the session's turn, dropping the lease. A
# retry (same attempt) gets the answer its first try got: a reply taken is never lost.
# A stop asked for meanwhile wins: it does not wait ('stopped'). The memory turns are written
# with the reply taken or the wait recorded, once (a retry answers from the taken mark or the
# waiting record).
PAUSE = (
    IN_FLIGHT
    + PauseCall.prologue()
    + LUA_RECORD_HEADER
    + LUA_WRITE_TURNS
    + """
local raw = redis.call('GET', record_key)
local status, rev, claim = header(raw)
if claim ~= claim_token then return {'refused'} end
if status == 'waiting' and raw == waiting_record then return {'paused'} end
local taken = redis.call('GET', taken_key)
local mark = attempt .. ':'
if taken and string.sub(taken, 1, #mark) == mark then
  return {'reply', string.sub(taken, #mark + 1)}
end
if status ~= 'running' then return {'refused'} end
if redis.call('EXISTS', stop_key) == 1 then return {'stopped'} end
local reply = take_reply == '1' and redis.call('LPOP', replies_key)
if reply then
  redis.call('SET', taken_key, mark .. reply, 'EX', ttl)
  if turns_at ~= '' then write_turns(tonumber(turns_at), turn_args_at) end
  return {'reply', reply}
end
if rev ~= tonumber(expected_rev) then return {'refused'} end
if turns_at ~= '' then write_turns(tonumber(turns_at), turn_args_at) end
redis.call('SET', record_key, waiting_record, 'EX', ttl)
redis.call('SET', resume_key, resume_state, 'EX', ttl)
redis.call('DEL', lease_key)
if running_index then
  redis.call('ZREM', running_index, execution_id)
  if wait_deadline ~= '' then redis.call('ZADD', waiting_index, wait_deadline, execution_id) end
end
return {'paused'}
"""
)


@dataclass(slots=True, kw_only=True)
class ReplyCall(ScriptCall):
    record_key: str = key()
    replies_key: str = key()
    queued_key: str = key()
    queued_index: str | None = key(optional=True)  # the indexes: one Redis only
    waiting_index: str | None = key(optional=True)
    reply: str = arg()  # JSON
    expected_rev: int = arg()
    queued_record: Any = arg()
    ttl: int = arg()  # s
    queue_timeout_ms: int = arg()
    execution_id: str = arg()
    queue_deadline: int = arg()  # ms
    may_queue: int = arg()  # 1: queued when it does not wait; 0: refused then
    may_resume: int = arg()  # 0: a chat message for a wait it does not end (a Wait node's)


# A chat message for an unfinished execution of its session (responseNodes): the reply a
# waiting one resumes with (`waiting -> new`), or the next reply of one that is not waiting yet
# or waits for something else (a Wait node: `may_resume` 0), which its next Chat node takes.
REPLY = (
    ReplyCall.prologue()
    + LUA_RECORD_HEADER
    + """
local status, rev = header(redis.call('GET', record_key))
if (status == 'new' or status == 'running') and may_queue == '0' then return 'not waiting' end
if status == 'new' or status == 'running' then
  redis.call('RPUSH', replies_key, reply)
  redis.call('EXPIRE', replies_key, ttl)
  return 'queued'
end
if status ~= 'waiting' then return 'ended' end
if rev ~= tonumber(expected_rev) then return 'stale' end
if may_resume == '0' then
  redis.call('RPUSH', replies_key, reply)
  redis.call('EXPIRE', replies_key, ttl)
  return 'queued'
end
redis.call('SET', record_key, queued_record, 'EX', ttl)
redis.call('SET', queued_key, '1', 'PX', queue_timeout_ms)
if queued_index then
  redis.call('ZADD', queued_index, queue_deadline, execution_id)
  redis.call('ZREM', waiting_index, execution_id)
end
return 'resumed'
"""
)
