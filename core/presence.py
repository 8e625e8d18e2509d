"""Which workers' processes are gone: the evidence that lets a reaper end a dead worker's
executions within about a second, while a worker that is only slow keeps them.

A worker's lease heartbeat (worker/leases.py) renews on a connection of its own and writes that
connection's name, `<server run id>/<client id>`, into every lease it renews (core/leases.py)
and into its presence, `worker:<id>`: the connection and the executions it holds. When the
process dies, the kernel closes its connections and Redis forgets them at once; a process that
is stopped by the OS, starved of CPU or slow keeps them. So a reaper asks Redis which of the
workers' heartbeat connections still exist (CLIENT LIST ID) and, for a worker whose connection is
gone, reaps each execution it held with that connection as evidence: the end script
(core/executions.py) counts a lease that still names a gone connection as no lease, and confirms
the loss as it confirms any other, CONFIRM_MS later. A worker whose connection was only killed
(CLIENT KILL) has reconnected and renamed its leases by then.

The evidence needs one server: after a restart every connection is new (the run id tells), and
a cluster's heartbeat talks to many nodes. There the lease's time to live alone decides
(core/liveness.py): a stall bound, long enough for a process paused by the OS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from core.clock import now_ms
from core.keys import Keys
from core.redis_clients import is_cluster


class Owner:
    """The name of a worker's heartbeat connection, as its leases carry it ('' until known).
    Written by the heartbeat's thread, read by the runner's greenlets: one str, swapped whole."""

    __slots__ = ("conn",)

    def __init__(self) -> None:
        self.conn = ""

    def lease(self, token: str) -> str:
        """The value of a lease held with `token`: `<token>@<connection>`."""
        return f"{token}@{self.conn}" if self.conn else token


@dataclass(frozen=True)
class Gone:
    """A worker whose heartbeat connection no longer exists, and what it held."""

    worker_id: str
    conn: str
    held: dict[str, str]  # execution id -> its token


class Presence:
    """The registry of workers (`workers`, `worker:<id>`) and the look for gone ones."""

    def __init__(self, client, keys: Keys, lease_seconds: float):
        self.client = client
        self.keys = keys
        self.lease_ms = int(lease_seconds * 1000)
        self.enabled = not is_cluster(client)

    def announce(self, pipe, worker_id: str, conn: str, held: dict[str, str]) -> None:
        """Queue on `pipe` (the heartbeat's round) this worker's presence."""
        if not self.enabled:
            return
        value = json.dumps({"conn": conn, "held": held}, separators=(",", ":"))
        pipe.set(self.keys.worker(worker_id), value, px=self.lease_ms)
        pipe.zadd(self.keys.workers(), {worker_id: now_ms()})

    def withdraw(self, worker_id: str) -> None:
        """A worker that stops: nothing to look for any more."""
        if not self.enabled:
            return
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(self.keys.worker(worker_id))
        pipe.zrem(self.keys.workers(), worker_id)
        pipe.execute()

    def leases_named(self, conns: list[str]) -> dict[str, set[str]]:
        """The executions in the reapers' index whose lease names one of these connections."""
        ids = [_text(i) for i in self.client.zrange(self.keys.running(), 0, -1)]
        if not ids:
            return {}
        leases = self.client.mget([self.keys.execution_lease(i) for i in ids])
        wanted, named = set(conns), dict[str, set[str]]()
        for execution_id, lease in zip(ids, leases, strict=True):
            conn = _text(lease).rpartition("@")[2] if lease else ""
            if conn in wanted:
                named.setdefault(conn, set()).add(execution_id)
        return named

    def gone(self) -> list[Gone]:
        """The workers whose heartbeat connection on this server no longer exists."""
        if not self.enabled:
            return []
        workers = self.keys.workers()
        pipe = self.client.pipeline(transaction=False)
        pipe.zremrangebyscore(workers, "-inf", now_ms() - 2 * self.lease_ms)
        pipe.zrange(workers, 0, -1)
        pipe.info("server")
        _, ids, info = pipe.execute()
        if not ids:
            return []
        run_id = info["run_id"]
        values = self.client.mget([self.keys.worker(_text(w)) for w in ids])
        present = [_presence(_text(w), v) for w, v in zip(ids, values, strict=True)]
        here = [p for p in present if p is not None and p.conn.startswith(run_id + "/")]
        if not here:
            return []
        client_ids = [p.conn.partition("/")[2] for p in here]
        alive = {str(c["id"]) for c in self.client.client_list(client_id=client_ids)}
        return [p for p, c in zip(here, client_ids, strict=True) if c not in alive]


def reap_the_dead(store, presence: Presence) -> None:
    """One look for gone workers (from any process): their executions reaped with the gone
    connection as evidence (core/execution_reaping.py `reap`), and, once none is left unfinished,
    their presence withdrawn. What a worker holds is read from its presence and, since that is
    half a second old at worst, from the leases of the running ones."""
    gone = presence.gone()
    if not gone:
        return
    named = presence.leases_named([g.conn for g in gone])
    for worker in gone:
        ids = set(worker.held) | named.get(worker.conn, set())
        records = [store.reap(execution_id, gone=worker.conn) for execution_id in ids]
        if all(record is None or record.finished for record in records):
            presence.withdraw(worker.worker_id)


def _presence(worker_id: str, raw) -> Gone | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
        return Gone(worker_id, str(value["conn"]), dict(value["held"]))
    except (ValueError, KeyError, TypeError):
        return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value
