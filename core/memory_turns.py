"""A chat-memory turn as Redis writes it, for the steps that write one together with how an
execution ended (core/executions.py, core/waiting.py; memory/journal.py says why)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Writes the turns passed after `at` in ARGV onto the KEYS from `first` on (one key each):
# for each, its TTL in seconds (0: none), how many elements, then the elements, oldest first.
LUA_WRITE_TURNS = """
local function write_turns(first, at)
  local i = at
  for k = first, #KEYS do
    local ttl, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    redis.call('LPUSH', KEYS[k], unpack(ARGV, i + 2, i + 1 + n))
    if ttl > 0 then redis.call('EXPIRE', KEYS[k], ttl) end
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


def script_args(turns: Sequence[TurnWrite]) -> tuple[list[str], list[str | int]]:
    """The KEYS to append (one per turn) and the ARGV to append, as LUA_WRITE_TURNS reads them."""
    keys = [t.key for t in turns]
    args: list[str | int] = []
    for turn in turns:
        args += [turn.ttl_seconds, len(turn.elements), *turn.elements]
    return keys, args
