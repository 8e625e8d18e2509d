"""A chat session's line (`session:<workflowId>:<sessionId>`): its executions in arrival order,
so they run one at a time (DESIGN invariant 4).

An execution joins the line when it is created (core/execution_transitions.py `create`) and leaves it when
it ends, waking the new head (`execution:<id>:turn`). A worker holding an execution that is not
at the head waits for that wake-up, and looks again every second meanwhile: the line never keeps
a dead head. Walking the line drops heads that ended (or whose record is gone); a head that looks
lost (core/liveness.py) is reported, so the walker reaps it, which ends it and hands the turn on.
A waiting execution (a Chat node) keeps its place: the next message of its session is its
reply, never an execution that would run beside it. A Wait node's wait outside a conversation
leaves the line (worker/waiting.py), so the session's next message runs meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core import liveness
from core.execution_record import LUA_HEADER, ExecutionRecord, RecordError, header
from core.keys import Keys, conversation_of
from core.redis_clients import is_cluster

# Whose turn it is in a line (one Redis): {1} when it is `id`'s, {0} when a live execution is
# ahead, {0, head} when the one ahead looks lost; heads that ended are dropped on the way.
# `at` is the index in ARGV of the halves around an id of the record, lease and queued keys.
LUA_TURN = f"""
local function status_of(raw)
  if not raw then return false end
  local status = string.match(raw, '{LUA_HEADER}')
  return status or false
end
{liveness.LUA_JUDGE}
local function turn_of(line, id, at)
  while true do
    local head = redis.call('LINDEX', line, 0)
    if not head or head == id then return {{1}} end
    local status = status_of(redis.call('GET', ARGV[at] .. head .. ARGV[at + 1]))
    local verdict = judge(status, redis.call('EXISTS', ARGV[at + 2] .. head .. ARGV[at + 3]) == 1,
                          redis.call('EXISTS', ARGV[at + 4] .. head .. ARGV[at + 5]) == 1)
    if verdict == 'alive' then return {{0}} end
    if verdict == 'lost' then return {{0, head}} end
    redis.call('LPOP', line)
  end
end
"""

# KEYS: the line. ARGV: execution id, then the halves around an id of the record, lease and
# queued keys.
_TURN = LUA_TURN + "return turn_of(KEYS[1], ARGV[1], 2)\n"

# Leave the line; the new head, if any, is whose turn it is now (cluster: the wake-up follows).
# A conversation that ends is the session's unfinished one no more.
# KEYS: the line, its conversation. ARGV: execution id
_LEAVE = """
redis.call('LREM', KEYS[1], 1, ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return redis.call('LINDEX', KEYS[1], 0)
"""

# Take a place in the line (a cluster's create; on one Redis the create's own script does it).
# With `join`, a conversation whose session holds an unfinished one is not started: that one's
# id is answered instead, unless it is the one the caller found finished (then it is replaced).
# KEYS: the line, its conversation. ARGV: execution id, ttl s, a conversation (1/0), join (1/0),
# the conversation found finished ('' = none)
_ENTER = """
if ARGV[4] == '1' then
  local current = redis.call('GET', KEYS[2])
  if current and current ~= ARGV[5] then return current end
end
if ARGV[3] == '1' then redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2]) end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# Drop the head of a line if it is still the one found ended.
# KEYS: the line. ARGV: that head
_DROP_HEAD = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
return 1
"""


@dataclass(frozen=True, slots=True)
class Turn:
    mine: bool
    lost_head: str | None = None  # the head ahead, which looks lost: reap it, then look again


class SessionLine:
    def __init__(self, client, keys: Keys):
        self.client = client
        self.keys = keys
        self.cluster = is_cluster(client)
        self._turn = client.register_script(_TURN)
        self._leave = client.register_script(_LEAVE)
        self._drop_head = client.register_script(_DROP_HEAD)
        self._enter = client.register_script(_ENTER)

    def load_scripts(self) -> None:
        scripts = (self._leave, self._drop_head, self._enter) if self.cluster else (self._turn,)
        for script in scripts:
            self.client.script_load(script.script)

    def key(self, record: ExecutionRecord) -> str | None:
        """The line of the record's chat session, if it belongs to one."""
        if not record.session_id:
            return None
        return self.keys.session_queue(record.workflow_id, record.session_id)

    def head(self, line: str) -> str | None:
        return self.client.lindex(line, 0)

    def turn(self, execution_id: str, line: str) -> Turn:
        """Is it this execution's turn? Heads that ended are dropped on the way."""
        if self.cluster:
            return self._turn_in_steps(execution_id, line)
        mine, *lost = self._turn(keys=[line], args=[execution_id, *self.key_halves()])
        return Turn(bool(mine), lost[0] if lost else None)

    def key_halves(self) -> list[str]:
        """What LUA_TURN's `at` points to: the halves around an id of the keys it reads."""
        return [
            *self.keys.execution("\0").split("\0"),
            *self.keys.execution_lease("\0").split("\0"),
            *self.keys.execution_queued("\0").split("\0"),
        ]

    def _turn_in_steps(self, execution_id: str, line: str) -> Turn:
        """`turn` in a cluster: the line's head, then its keys (one slot), one read each."""
        while True:
            head = self.client.lindex(line, 0)
            if not head or head == execution_id:
                return Turn(True)
            pipe = self.client.pipeline(transaction=False)
            pipe.get(self.keys.execution(head))
            pipe.exists(self.keys.execution_lease(head))
            pipe.exists(self.keys.execution_queued(head))
            raw, leased, queued = pipe.execute()
            verdict = liveness.judge(_status(raw), bool(leased), bool(queued))
            if verdict == liveness.Verdict.ALIVE:
                return Turn(False)
            if verdict == liveness.Verdict.LOST:
                return Turn(False, head)
            self._drop_head(keys=[line], args=[head])

    def wait(self, execution_id: str, timeout: float) -> None:
        """Block until woken by the execution ahead, or `timeout` passes."""
        self.client.blpop([self.keys.execution_turn(execution_id)], timeout=max(timeout, 0.01))

    def enter(
        self,
        line: str,
        record: ExecutionRecord,
        ttl: int,
        join: bool,
        finished: Callable[[str], bool],
    ) -> str | None:
        """Take the record's place in its line (a cluster's create, in the line's slot): None,
        or, with `join`, the id of the session's unfinished conversation it is to join
        (`finished(id)` says whether one found there has ended meanwhile)."""
        conversation = int(record.response_mode == "responseNodes")
        ended = ""
        while True:
            answer = self._enter(
                keys=[line, conversation_of(line)],
                args=[record.id, ttl, conversation, int(join), ended],
            )
            if answer == 1:
                return None
            current = answer.decode() if isinstance(answer, bytes) else str(answer)
            if not finished(current):
                return current
            ended = current

    def leave(self, line: str, execution_id: str) -> None:
        """Leave the line and wake its new head (a cluster's second step of an end; on one
        Redis the end's own script does this)."""
        head = self._leave(keys=[line, conversation_of(line)], args=[execution_id])
        if head:
            pipe = self.client.pipeline(transaction=True)  # one slot: the head's turn key
            pipe.rpush(self.keys.execution_turn(head), "1")
            pipe.expire(self.keys.execution_turn(head), 60)
            pipe.execute()


def _status(raw: str | None):
    if not raw:
        return None
    try:
        return header(raw).status
    except (RecordError, ValueError):
        return None
