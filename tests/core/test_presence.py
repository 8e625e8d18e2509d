"""Workers' presence against a real Redis: the executions of a worker whose heartbeat connection
closed (its process died) are reaped once that is confirmed; a worker whose connection was only
killed reconnects, renames its leases, and keeps them; no evidence is taken from another server's
connections (a restart)."""

from __future__ import annotations

import secrets

import pytest
import redis

from core import liveness
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.presence import Owner, Presence, reap_the_dead
from tests.waiting import wait_until

LEASE_SECONDS = 30.0


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys, lease_seconds=LEASE_SECONDS)


@pytest.fixture
def instant_confirm(monkeypatch):
    monkeypatch.setattr(liveness, "GONE_CONFIRM_MS", 0)


class Worker:
    """A worker's heartbeat on a connection of its own, and one running execution."""

    def __init__(self, redis_url: str, store: ExecutionStore):
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.leases = LeaseStore(self.client, store.keys, LEASE_SECONDS, Owner())
        self.presence = Presence(self.client, store.keys, LEASE_SECONDS)
        self.id = f"w{secrets.token_hex(4)}"
        self.beat()  # learns its connection's name
        record = ExecutionRecord(secrets.token_hex(8), "wf")
        store.create(record)
        running = record.next(status=Status.RUNNING, claim="t1")
        assert store.claim(record, running, self.leases.owner.lease("t1"))
        self.execution_id = record.id
        self.held = {record.id: "t1"}
        self.beat()

    def beat(self) -> None:
        held = getattr(self, "held", {})
        while self.leases.beat(self.id, held, self.presence):
            pass

    def client_id(self) -> str:
        return self.leases.owner.conn.partition("/")[2]


def test_a_worker_announces_its_connection_and_what_it_holds(redis_url, store):
    worker = Worker(redis_url, store)
    watcher = Presence(store.client, store.keys, LEASE_SECONDS)
    assert watcher.gone() == []
    lease = store.client.get(store.keys.execution_lease(worker.execution_id))
    assert lease == f"t1@{worker.leases.owner.conn}"
    assert worker.leases.owner.conn.startswith(store.client.info("server")["run_id"] + "/")


def test_the_executions_of_a_worker_whose_process_died_are_reaped_once_confirmed(
    redis_url, store, instant_confirm
):
    worker = Worker(redis_url, store)
    watcher = Presence(store.client, store.keys, LEASE_SECONDS)
    reap_the_dead(store, watcher)
    assert store.get(worker.execution_id).status == Status.RUNNING
    worker.client.close()  # its connections close as the process dies
    wait_until(lambda: watcher.gone(), 5, "Redis to forget the connection")
    reap_the_dead(store, watcher)  # seen once: a suspect
    assert store.get(worker.execution_id).status == Status.RUNNING
    reap_the_dead(store, watcher)  # seen again: confirmed
    record = store.get(worker.execution_id)
    assert record.status == Status.CRASHED
    assert record.error == "The worker running this execution died (its process is gone)."
    assert not store.client.exists(store.keys.worker(worker.id))  # withdrawn
    assert watcher.gone() == []


def test_a_worker_whose_connection_was_killed_reconnects_and_keeps_its_executions(
    redis_url, store, instant_confirm
):
    worker = Worker(redis_url, store)
    watcher = Presence(store.client, store.keys, LEASE_SECONDS)
    old = worker.leases.owner.conn
    store.client.client_kill_filter(_id=worker.client_id())
    wait_until(lambda: watcher.gone(), 5, "Redis to forget the connection")
    reap_the_dead(store, watcher)  # seen once: a suspect
    worker.beat()  # its next heartbeat reconnects, and names the new connection
    assert worker.leases.owner.conn != old
    reap_the_dead(store, watcher)
    reap_the_dead(store, watcher)
    assert store.get(worker.execution_id).status == Status.RUNNING
    lease = store.client.get(store.keys.execution_lease(worker.execution_id))
    assert lease == f"t1@{worker.leases.owner.conn}"


def test_a_connection_of_another_server_run_is_no_evidence(redis_url, store, instant_confirm):
    worker = Worker(redis_url, store)
    watcher = Presence(store.client, store.keys, LEASE_SECONDS)
    before = f"0000{secrets.token_hex(18)}/{worker.client_id()}"  # as before a restart
    worker.leases.owner.conn = before
    worker.client.close()
    presence = Presence(store.client, store.keys, LEASE_SECONDS)
    pipe = store.client.pipeline(transaction=False)
    presence.announce(pipe, worker.id, before, worker.held)
    pipe.execute()
    for _ in range(3):
        reap_the_dead(store, watcher)
    assert store.get(worker.execution_id).status == Status.RUNNING


def test_an_execution_claimed_since_the_workers_last_heartbeat_is_found_by_its_lease(
    redis_url, store, instant_confirm
):
    worker = Worker(redis_url, store)
    late = ExecutionRecord(secrets.token_hex(8), "wf")  # claimed after its last announcement
    store.create(late)
    assert store.claim(late, late.next(status=Status.RUNNING, claim="t2"),
                       worker.leases.owner.lease("t2"))  # fmt: skip
    watcher = Presence(store.client, store.keys, LEASE_SECONDS)
    worker.client.close()
    wait_until(lambda: watcher.gone(), 5, "Redis to forget the connection")
    reap_the_dead(store, watcher)
    reap_the_dead(store, watcher)
    assert store.get(late.id).status == Status.CRASHED
    assert store.get(worker.execution_id).status == Status.CRASHED
