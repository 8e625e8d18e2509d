"""The Chat Hub's replies in flight: which conversation an execution answers (`HubRun`, in
`hub:execution:<id>`, a HASH of `run` -> its JSON and `consumed` -> the execution's last event
the relay applied), and which api process relays it now (`hub:execution:<id>:relay`, a lease).

A reply is relayed by the api process that started it (api/hub/feed.py). Should that process
die, its lease runs out and any other process that is asked about the conversation (a reconnect,
a read) takes the relaying over from `consumed`: the execution's kept events (core/replay.py)
give what came meanwhile. A reply that waits (a Chat node asks) is relayed again by whoever
delivers the answer: the waiting webhook's click or the hub's next message.
"""

from __future__ import annotations

import secrets
from typing import Any

from core.hub_batch import Batch
from core.hub_records import HubRun
from core.keys import Keys
from core.redis_clients import script

# KEYS: lease. ARGV: token, ms. Renew only one's own lease; one that ran out while nobody took
# it is taken again: Redis paused or restarted past the lease while its relay went on, and no
# other process relays the reply unless asked (a reconnect, a read), which may never come.
_RENEW = """
local held = redis.call('GET', KEYS[1])
if held == false and ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if held ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


class RunStore:
    def __init__(self, client: Any, keys: Keys, ttl_seconds: int, lease_ms: int):
        self.client = client
        self.keys = keys
        self.ttl = ttl_seconds  # the execution's own keys' time to live
        self.lease_ms = lease_ms
        self._renew = script(client, _RENEW)
        self._release = script(client, _RELEASE)

    def save(self, run: HubRun) -> None:
        key = self.keys.hub_run(run.execution_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, "run", run.to_json())
        pipe.expire(key, self.ttl)
        pipe.execute()

    def queue_save(self, batch: Batch, run: HubRun, consumed: int | None = None) -> None:
        key = self.keys.hub_run(run.execution_id)
        more = () if consumed is None else ("consumed", consumed)
        batch.call("HSET", key, "run", run.to_json(), *more)
        batch.call("EXPIRE", key, self.ttl)

    def queue_take(self, batch: Batch, execution_id: str) -> tuple[int, str]:
        """`take` in `batch`: (its reply's index, the token it holds if that reply is true)."""
        token = secrets.token_hex(8)
        index = batch.call("SET", self.keys.hub_relay(execution_id), token, "NX", "PX",
                           self.lease_ms)  # fmt: skip
        return index, token

    def get(self, execution_id: str) -> tuple[HubRun, int] | None:
        """The run and the last execution event applied (-1: none yet)."""
        found = self.client.hmget(self.keys.hub_run(execution_id), ["run", "consumed"])
        if not found[0]:
            return None
        return HubRun.from_json(found[0]), int(found[1]) if found[1] is not None else -1

    # --- who relays it ----------------------------------------------------------------------
    def take(self, execution_id: str) -> str | None:
        """The relay's lease for this process (its token), or None when another holds it."""
        token = secrets.token_hex(8)
        taken = self.client.set(self.keys.hub_relay(execution_id), token, nx=True, px=self.lease_ms)
        return token if taken else None

    def renew(self, execution_id: str, token: str) -> bool:
        """Whether this process still relays it: its lease renewed, or taken again if it ran
        out with nobody else taking it."""
        return bool(self._renew(keys=[self.keys.hub_relay(execution_id)],
                                args=[token, self.lease_ms]))  # fmt: skip

    def release(self, execution_id: str, token: str) -> None:
        self._release(keys=[self.keys.hub_relay(execution_id)], args=[token])

    def relayed(self, execution_id: str) -> bool:
        return bool(self.client.exists(self.keys.hub_relay(execution_id)))
