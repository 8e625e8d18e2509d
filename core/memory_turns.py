"""A chat-memory turn as Redis writes it, for the steps that write one together with how an
execution ended (core/end_script.py, core/execution_scripts.py; memory/journal.py says why)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Writes the turns passed after `at` in ARGV onto the KEYS from `first` on (one key each):
# for each, its TTL in seconds (0: none), how many elements, then the elements, oldest first.
LUA_WRITE_TURNS = """
local function write_turns(first, at)
  local i = at
  for k = first, #KEYS do
    local seconds, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    redis.call('LPUSH', KEYS[k], unpack(ARGV, i + 2, i + 1 + n))
    if seconds > 0 then redis.call('EXPIRE', KEYS[k], seconds) end
    i = i + 2 + n
  end
end
"""


@dataclass(frozen=True)
class TurnWrite:
    """LPUSH `elements` (a turn's messages, oldest first) onto `key`, then, with a TTL, EXPIRE."""

    key: str
    elements: list[str]
    ttl_seconds: int


def append_turns(keys: list, args: list, turns: Sequence[TurnWrite], cluster: bool) -> None:
    """Append the turns to a step's KEYS (one key each) and ARGV, as LUA_WRITE_TURNS reads them;
    the last ARGV, '' until now, becomes where their keys begin. One Redis only: in a cluster
    a session's memory is another slot than the execution's."""
    if not turns:
        return
    if cluster:
        raise ValueError("memory turns cannot join an execution's step in a cluster")
    args[-1] = len(keys) + 1
    keys += [t.key for t in turns]
    for turn in turns:
        args += [turn.ttl_seconds, len(turn.elements), *turn.elements]
