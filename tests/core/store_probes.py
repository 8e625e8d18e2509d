"""What a test does to an execution store besides its steps, for each store: the faults it
injects (a lease or a queue time that runs out, a record that expires), the parts other modules
play (a stop: core/stops.py; leases: core/leases.py) and what it reads beyond the store's own
queries (a lease, the reapers' index, the replies queued, a session's line, a wake-up, the
events published, a memory list). The lifecycle state machine and the conformance suite talk to
a store only through its steps and a probe, so they run on Redis and on the reference alike.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from core import events
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.keys import Keys
from core.leases import LeaseStore
from core.redis_clients import is_cluster
from core.stops import STOPPED_NEW, STOPPED_WAITING, request_stop
from tests.core.reference_store import ReferenceStore


class StoreProbe(Protocol):
    store: Any  # an ExecutionStore, or the ReferenceStore

    def stop(self, execution_id: str) -> None: ...  # core/stops.py request_stop
    def mark_stop(self, execution_id: str) -> None: ...  # a stop's marker alone
    def hold(self, execution_id: str, token: str) -> None: ...
    def renew(self, execution_id: str, token: str) -> None: ...
    def lose_lease(self, execution_id: str) -> None: ...
    def run_out_of_queue_time(self, execution_id: str) -> None: ...
    def expire(self, execution_id: str) -> None: ...  # its record's time to live ran out
    def lease(self, execution_id: str) -> str | None: ...
    def queued(self, execution_id: str) -> bool: ...
    def suspected(self, execution_id: str) -> bool: ...
    def running_ids(self) -> set[str]: ...  # the reapers' index of leases
    def waiting_deadline(self, execution_id: str) -> int | None: ...
    def replies(self, execution_id: str) -> list[str]: ...  # queued, not taken yet
    def line(self, record: ExecutionRecord) -> list[str]: ...
    def woken(self, execution_id: str) -> bool: ...  # takes one wake-up
    def events(self, execution_id: str) -> list[events.Event]: ...  # since the last look
    def memory_key(self, session: str) -> str: ...
    def memory(self, key: str) -> list[str]: ...
    def close(self) -> None: ...


class RedisProbe:
    """The Redis store, read and faulted through its keys (core/keys.py). `listen`: the events
    published are collected (one Redis), from a pattern subscription made before any step."""

    def __init__(self, client, keys: Keys | None = None, *, listen: bool = False, **limits):
        cluster = is_cluster(client)
        self.client = client
        self.keys = keys or Keys(prefix=f"m{uuid.uuid4().hex[:8]}:", cluster=cluster)
        self.store = ExecutionStore(client, self.keys, **limits)
        self.leases = LeaseStore(client, self.keys, self.store.lease_ms / 1000)
        self.pubsub = None
        self.heard: dict[str, list[events.Event]] = {}
        if listen:
            self.pubsub = client.pubsub()
            self.pubsub.psubscribe(self.keys.execution_events("*"))
            assert self.pubsub.get_message(timeout=5)["type"] == "psubscribe"

    def stop(self, execution_id: str) -> None:
        request_stop(self.store, execution_id)

    def mark_stop(self, execution_id: str) -> None:
        self.client.set(self.keys.execution_stop(execution_id), "1")

    def hold(self, execution_id: str, token: str) -> None:
        self.leases.hold(execution_id, token)

    def renew(self, execution_id: str, token: str) -> None:
        self.leases.renew({execution_id: token})

    def lose_lease(self, execution_id: str) -> None:
        self.client.delete(self.keys.execution_lease(execution_id))

    def run_out_of_queue_time(self, execution_id: str) -> None:
        self.client.delete(self.keys.execution_queued(execution_id))

    def expire(self, execution_id: str) -> None:
        self.client.delete(self.keys.execution(execution_id))

    def lease(self, execution_id: str) -> str | None:
        return self.client.get(self.keys.execution_lease(execution_id))

    def queued(self, execution_id: str) -> bool:
        return bool(self.client.exists(self.keys.execution_queued(execution_id)))

    def suspected(self, execution_id: str) -> bool:
        return bool(self.client.exists(self.keys.execution_suspect(execution_id)))

    def running_ids(self) -> set[str]:
        return set(self.client.zrange(self.keys.running(), 0, -1))

    def waiting_deadline(self, execution_id: str) -> int | None:
        score = self.client.zscore(self.keys.waiting(), execution_id)
        return None if score is None else int(score)

    def replies(self, execution_id: str) -> list[str]:
        return self.client.lrange(self.keys.execution_replies(execution_id), 0, -1)

    def line(self, record: ExecutionRecord) -> list[str]:
        key = self.store.lines.key(record)
        return [] if key is None else self.client.lrange(key, 0, -1)

    def woken(self, execution_id: str) -> bool:
        return self.client.lpop(self.keys.execution_turn(execution_id)) == "1"

    def events(self, execution_id: str) -> list[events.Event]:
        """Everything published so far: a marker published now arrives after it (one server
        sends a subscriber its messages in the order it ran the commands)."""
        assert self.pubsub is not None, "a probe made with listen=True"
        marker = self.keys.execution_events(f"marker{uuid.uuid4().hex}")
        self.client.publish(marker, "")
        while (message := self.pubsub.get_message(timeout=5)) is not None:
            if message["channel"] == marker:
                break
            self.heard.setdefault(message["channel"], []).append(events.decode(message["data"]))
        else:
            raise AssertionError("the marker never came back")
        return self.heard.pop(self.keys.execution_events(execution_id), [])

    def memory_key(self, session: str) -> str:
        return self.keys.chat(session)

    def memory(self, key: str) -> list[str]:
        return self.client.lrange(key, 0, -1)

    def close(self) -> None:
        if self.pubsub is not None:
            self.pubsub.close()
        self.client.close()


class ReferenceProbe:
    """The reference store, read and faulted through its dicts."""

    def __init__(self, **limits: float) -> None:
        self.store = ReferenceStore(**limits)

    def stop(self, execution_id: str) -> None:
        record = self.store.get(execution_id)
        if record is None or record.finished:
            return
        if record.status == Status.RUNNING:
            self.store.stops.add(execution_id)
            return
        why = STOPPED_WAITING if record.status == Status.WAITING else STOPPED_NEW
        assert self.store.cancel(record, why)

    def mark_stop(self, execution_id: str) -> None:
        self.store.stops.add(execution_id)

    def hold(self, execution_id: str, token: str) -> None:
        self.store.hold(execution_id, token)

    def renew(self, execution_id: str, token: str) -> None:
        self.store.renew(execution_id, token)

    def lose_lease(self, execution_id: str) -> None:
        self.store.leases.pop(execution_id, None)

    def run_out_of_queue_time(self, execution_id: str) -> None:
        self.store.queued.discard(execution_id)

    def expire(self, execution_id: str) -> None:
        self.store.records.pop(execution_id, None)

    def lease(self, execution_id: str) -> str | None:
        return self.store.leases.get(execution_id)

    def queued(self, execution_id: str) -> bool:
        return execution_id in self.store.queued

    def suspected(self, execution_id: str) -> bool:
        return execution_id in self.store.suspects

    def running_ids(self) -> set[str]:
        return set(self.store.running_index)

    def waiting_deadline(self, execution_id: str) -> int | None:
        return self.store.waiting_index.get(execution_id)

    def replies(self, execution_id: str) -> list[str]:
        return list(self.store.replies.get(execution_id, []))

    def line(self, record: ExecutionRecord) -> list[str]:
        key = self.store.lines.key(record)
        return [] if key is None else list(self.store.lines.queues.get(key, []))

    def woken(self, execution_id: str) -> bool:
        if not self.store.lines.woken[execution_id]:
            return False
        self.store.lines.woken[execution_id] -= 1
        return True

    def events(self, execution_id: str) -> list[events.Event]:
        mine = [events.decode(e) for i, e in self.store.published if i == execution_id]
        self.store.published = [(i, e) for i, e in self.store.published if i != execution_id]
        return mine

    def memory_key(self, session: str) -> str:
        return f"chat:{session}"

    def memory(self, key: str) -> list[str]:
        return list(self.store.memory.get(key, []))

    def close(self) -> None:
        pass
