"""Leases: what keeps a running execution alive (core/liveness.py), in Redis.

`execution:<id>:lease` exists while a worker runs the execution, or holds it waiting for its
session's turn; its time to live is the lease time, and the worker renews it every second from a
thread of its own (worker/leases.py), so a worker that is busy computing still renews. Redis's
own clock lets it run out: no deadline computed on one host is compared on another.

`executions:running` (a sorted set, score = the deadline as the renewing worker saw it) is only
where reapers look for leases that may have run out; the lease key is the truth, and the reap
(core/executions.py) checks it again, atomically with the end it writes.
"""

from __future__ import annotations

from core.clock import now_ms
from core.execution_record import LUA_HEADER
from core.keys import Keys
from core.presence import Owner, Presence
from core.redis_clients import IN_FLIGHT, is_cluster

# A lease is renewed only while its execution is still this worker's: `running` under this
# worker's claim, or `new` with the lease this worker took to hold it for its session's turn.
# A renewal that crosses the execution's end (or its wait) must not bring back the lease that
# step deleted. Sent as EVAL (not EVALSHA): it goes in a pipeline, to any node of a cluster,
# with nothing to load first. A lease's value is its token, then `@` and the name of the
# connection that renews it (core/presence.py): renewed, it names today's connection.
# KEYS: record, lease; ARGV: token, lease ms, the lease's value
_RENEW = (
    IN_FLIGHT
    + f"""
local raw = redis.call('GET', KEYS[1])
local status, rev, claim  -- rev unused
if raw then status, rev, claim = string.match(raw, '{LUA_HEADER}') end
if status == 'running' and claim == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  return 1
end
local held = status == 'new' and redis.call('GET', KEYS[2])
if held and (held == ARGV[1] or string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. '@') then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  return 1
end
return 0
"""
)


class LeaseStore:
    def __init__(self, client, keys: Keys, lease_seconds: float, owner: Owner | None = None):
        self.client = client
        self.keys = keys
        self.lease_ms = int(lease_seconds * 1000)
        self.cluster = is_cluster(client)
        self.owner = owner or Owner()  # whose connection this worker's leases name

    def hold(self, execution_id: str, token: str) -> None:
        """A worker took the execution's task but must wait for its session's turn: it is no
        longer in the broker's queue, and lives as long as that worker does."""
        own = self.client.pipeline(transaction=not self.cluster)
        own.set(self.keys.execution_lease(execution_id), self.owner.lease(token), px=self.lease_ms)
        own.delete(self.keys.execution_queued(execution_id))
        if self.cluster:
            own.execute()
            own = self.client.pipeline(transaction=False)
        own.zadd(self.keys.running(), {execution_id: now_ms() + self.lease_ms})
        own.zrem(self.keys.queued(), execution_id)
        own.execute()

    def renew(self, held: dict[str, str]) -> None:
        """Renew the leases of these executions (id -> the token of whoever holds it)."""
        if held:
            pipe = self.client.pipeline(transaction=False)
            self._renew_on(pipe, held)
            pipe.execute()

    def beat(self, worker_id: str, held: dict[str, str], presence: Presence) -> bool:
        """One heartbeat, in one round trip on this store's own connection: renew the leases,
        announce this worker's presence, and learn the connection's name (core/presence.py).
        True if the name changed (a reconnect): the leases just written name the old one, and
        the caller beats again at once."""
        pipe = self.client.pipeline(transaction=False)
        if presence.enabled:
            pipe.client_id()
            pipe.info("server")
        self._renew_on(pipe, held)
        presence.announce(pipe, worker_id, self.owner.conn, held)
        replies = pipe.execute()
        if not presence.enabled:
            return False
        conn = f"{replies[1]['run_id']}/{replies[0]}"
        changed, self.owner.conn = conn != self.owner.conn, conn
        return changed

    def _renew_on(self, pipe, held: dict[str, str]) -> None:
        if not held:
            return
        deadline = now_ms() + self.lease_ms
        lease = self.owner.lease
        for execution_id, token in held.items():
            keys = (self.keys.execution(execution_id), self.keys.execution_lease(execution_id))
            # (as a command: a cluster's pipeline has no eval(), yet routes EVAL by its keys)
            pipe.execute_command("EVAL", _RENEW, 2, *keys, token, self.lease_ms, lease(token))
        # XX: an execution that ended meanwhile left the index, and stays out of it.
        pipe.zadd(self.keys.running(), dict.fromkeys(held, deadline), xx=True)

    def candidates(self, limit: int = 100) -> list[str]:
        """Executions whose lease or queue time may have run out (by the indexes' clocks)."""
        now = now_ms()
        pipe = self.client.pipeline(transaction=False)
        pipe.zrangebyscore(self.keys.running(), "-inf", now, start=0, num=limit)
        pipe.zrangebyscore(self.keys.queued(), "-inf", now, start=0, num=limit)
        leased, queued = pipe.execute()
        return list(dict.fromkeys([*leased, *queued]))

    def forget(self, execution_id: str) -> None:
        """Reapers need not look at this execution any more (it ended, or waits)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrem(self.keys.running(), execution_id)
        pipe.zrem(self.keys.queued(), execution_id)
        pipe.execute()
