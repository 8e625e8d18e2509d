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
from core.keys import Keys
from core.redis_clients import is_cluster


class LeaseStore:
    def __init__(self, client, keys: Keys, lease_seconds: float):
        self.client = client
        self.keys = keys
        self.lease_ms = int(lease_seconds * 1000)
        self.cluster = is_cluster(client)

    def hold(self, execution_id: str, token: str) -> None:
        """A worker took the execution's task but must wait for its session's turn: it is no
        longer in the broker's queue, and lives as long as that worker does."""
        own = self.client.pipeline(transaction=not self.cluster)
        own.set(self.keys.execution_lease(execution_id), token, px=self.lease_ms)
        own.delete(self.keys.execution_queued(execution_id))
        if self.cluster:
            own.execute()
            own = self.client.pipeline(transaction=False)
        own.zadd(self.keys.running(), {execution_id: now_ms() + self.lease_ms})
        own.zrem(self.keys.queued(), execution_id)
        own.execute()

    def renew(self, held: dict[str, str]) -> None:
        """Renew the leases of these executions (id -> the token of whoever holds it)."""
        if not held:
            return
        deadline = now_ms() + self.lease_ms
        pipe = self.client.pipeline(transaction=False)
        for execution_id, token in held.items():
            pipe.set(self.keys.execution_lease(execution_id), token, px=self.lease_ms)
        pipe.zadd(self.keys.running(), dict.fromkeys(held, deadline))
        pipe.execute()

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
