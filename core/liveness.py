"""Is this execution alive? One rule, for every process and every Redis script that asks.

An unfinished execution is kept alive by a key with a time to live, in its own slot, so Redis's
own clock decides and no two hosts' clocks are compared:

- `running`: alive while its lease (`execution:<id>:lease`) exists. The worker running it sets
  the lease at the claim and renews it every second (worker/leases.py).
- `new`: alive while it waits in the broker's queue (`execution:<id>:queued`, set when it became
  new, for the queue timeout) or while a worker holds it waiting for its session's turn (that
  worker's lease; taking the task drops the queued key).
- `waiting`: alive. A Chat node waits on purpose, with its own deadline (core/waiting.py).
- finished: ended, not alive and not lost.

A lost execution is confirmed before anyone ends it: it must look lost twice, at least
CONFIRM_MS apart by Redis's clock (`execution:<id>:suspect` holds the first sighting). A worker
renews every second, so in that time a living one has renewed, even after Redis was paused or
restarted, when every lease has run out at once and the renewals queued behind the pause have
not run yet.

`judge` is the rule in Python (the api's batched checks); LUA_JUDGE is the same rule inside the
scripts (core/end_script.py), which apply it atomically with the write that ends an execution.
tests/core/test_liveness.py holds the two to the same answers.
"""

from __future__ import annotations

from enum import StrEnum

from core.execution_record import Status

CONFIRM_MS = 2000
# The same, when the evidence is that the worker's heartbeat connection is gone (core/presence.py):
# a living worker whose connection was only killed has reconnected and renamed its leases within
# its next heartbeat (half a second) and the reconnect.
GONE_CONFIRM_MS = 1000


class Verdict(StrEnum):
    ALIVE = "alive"
    LOST = "lost"
    ENDED = "ended"  # finished, or its record is gone


def judge(status: Status | None, leased: bool, queued: bool) -> Verdict:
    if status is None or status not in (Status.NEW, Status.RUNNING, Status.WAITING):
        return Verdict.ENDED
    if status == Status.RUNNING:
        return Verdict.ALIVE if leased else Verdict.LOST
    if status == Status.NEW:
        return Verdict.ALIVE if leased or queued else Verdict.LOST
    return Verdict.ALIVE


# A Lua function of the same rule: status (a string, or false when there is no record), and
# whether the lease and queued keys exist (booleans).
LUA_JUDGE = """
local function judge(status, leased, queued)
  if status == 'running' then
    if leased then return 'alive' else return 'lost' end
  elseif status == 'new' then
    if leased or queued then return 'alive' else return 'lost' end
  elseif status == 'waiting' then
    return 'alive'
  end
  return 'ended'
end
"""


def lost_within(lease_seconds: float, check_every_seconds: float = 1.0) -> float:
    """At most how long after its worker's last renewal a lost execution is ended: its lease
    runs out, a reaper (workers look every second) sees it lost, and again CONFIRM_MS later."""
    return lease_seconds + CONFIRM_MS / 1000 + 2 * check_every_seconds


def dead_within(check_every_seconds: float = 0.5) -> float:
    """At most how long after its worker's process died (its connections closed) an execution
    is ended: a look at the workers' connections (every half second, by every worker and api),
    and again GONE_CONFIRM_MS later."""
    return GONE_CONFIRM_MS / 1000 + 2 * check_every_seconds
