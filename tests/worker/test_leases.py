"""One worker's leases and its watch, against a real Redis: what it holds keeps its lease (from
an OS thread, whatever the greenlets do), what a lost worker ran is reaped once its loss is
confirmed, what nobody took is reaped after the queue timeout, and a shutdown stops what
outlives its grace and then exits. The watch's rounds are driven by hand with a fake clock."""

from __future__ import annotations

import secrets
import threading
import time

import pytest
import redis

from core import liveness
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.presence import Presence
from core.settings import Settings
from tests.waiting import wait_until
from worker import leases as leases_module
from worker.leases import REAP_EVERY_SECONDS, Heartbeat, Leases
from worker.stops import Stops

LOST = "The worker running this execution was lost (it stopped renewing its lease)."


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Outbox:
    def __init__(self) -> None:
        self.busy = False

    def idle(self) -> bool:
        return not self.busy


class Harness:
    """A worker's watch with the parts it looks at laid bare."""

    def __init__(self, store: ExecutionStore, stops: Stops):
        self.store = store
        self.stops = stops
        self.clock = Clock()
        self.outbox = Outbox()
        self.exits = 0
        self.lease_store = LeaseStore(store.client, store.keys, 5.0)
        settings = Settings(lease_seconds=5.0, queue_timeout_seconds=300.0)
        self.leases = Leases(
            settings,
            store,
            self.lease_store,
            stops,
            self.outbox,
            clock=self.clock,
            end_process=self._exit,
        )

    def _exit(self) -> None:
        self.exits += 1

    def running(self, leased: bool = True) -> str:
        """A running execution, its lease held by someone (or already run out)."""
        record = ExecutionRecord(secrets.token_hex(8), "w1")
        self.store.create(record)
        assert self.store.claim(record, record.next(status=Status.RUNNING, claim="other"))
        if not leased:
            self.store.client.delete(self.store.keys.execution_lease(record.id))
        self.store.client.zadd(self.store.keys.running(), {record.id: 0})  # due, by its index
        return record.id

    def status(self, execution_id: str) -> str:
        return self.store.get(execution_id).status


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys)


@pytest.fixture
def stops(redis_url, keys):
    return Stops(redis_url, keys.stop_channel())


@pytest.fixture
def worker(store, stops, monkeypatch):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    return Harness(store, stops)


def tick(worker: Harness) -> None:
    """One round of the watch, past its reaping interval."""
    worker.clock.now += REAP_EVERY_SECONDS
    worker.leases.tick()


def test_a_running_execution_whose_lease_ran_out_is_reaped_once_its_loss_is_confirmed(worker):
    lost = worker.running(leased=False)
    tick(worker)
    assert worker.status(lost) == Status.RUNNING  # seen lost once: a suspect
    tick(worker)
    record = worker.store.get(lost)
    assert (record.status, record.error) == (Status.CRASHED, LOST)
    assert worker.store.client.zscore(worker.store.keys.running(), lost) is None


def test_a_running_execution_whose_lease_is_held_is_not_reaped(worker):
    elsewhere = worker.running(leased=True)  # by its index, due: its lease key says otherwise
    tick(worker)
    tick(worker)
    assert worker.status(elsewhere) == Status.RUNNING


def test_a_new_execution_nobody_took_within_the_queue_timeout_is_reaped(worker):
    record = ExecutionRecord(secrets.token_hex(8), "w1", queued_at=1)
    worker.store.create(record)
    worker.store.client.delete(worker.store.keys.execution_queued(record.id))
    worker.store.client.zadd(worker.store.keys.queued(), {record.id: 0})
    tick(worker)
    tick(worker)
    crashed = worker.store.get(record.id)
    assert (crashed.status, crashed.error) == (
        Status.CRASHED,
        "No worker started this execution within 300 s.",
    )


def test_reaping_comes_round_once_a_second(worker):
    lost = worker.running(leased=False)
    worker.leases.tick()  # the first round: a suspect
    worker.leases.tick()  # the same second: no round
    worker.clock.now += REAP_EVERY_SECONDS / 2
    worker.leases.tick()
    assert worker.status(lost) == Status.RUNNING
    worker.clock.now += REAP_EVERY_SECONDS / 2
    worker.leases.tick()
    assert worker.status(lost) == Status.CRASHED


def presence(store: ExecutionStore) -> Presence:
    return Presence(store.client, store.keys, 5.0)


def _claimed(store: ExecutionStore, token: str) -> str:
    record = ExecutionRecord(secrets.token_hex(8), "w1")
    store.create(record)
    assert store.claim(record, record.next(status=Status.RUNNING, claim=token))
    return record.id


def test_the_heartbeat_renews_what_this_worker_holds(store, stops):
    lease_store = LeaseStore(store.client, store.keys, 5.0)
    running = _claimed(store, "mine")
    store.client.pexpire(store.keys.execution_lease(running), 100)
    held = ExecutionRecord(secrets.token_hex(8), "w1")  # waits for its session's turn
    store.create(held)
    lease_store.hold(held.id, "mine")
    store.client.pexpire(store.keys.execution_lease(held.id), 100)
    stops.add(running, "mine")
    stops.add(held.id, "mine")
    heartbeat = Heartbeat(stops, lambda: (lease_store, presence(store)), "w1")
    heartbeat.start()
    try:
        wait_until(lambda: heartbeat.beats >= 1, 5, "a heartbeat")
        for execution_id in (running, held.id):
            lease = store.client.get(store.keys.execution_lease(execution_id))
            assert lease == f"mine@{lease_store.owner.conn}"
            assert 4000 < store.client.pttl(store.keys.execution_lease(execution_id)) <= 5000
    finally:
        heartbeat.close()


def test_a_renewal_never_brings_back_the_lease_of_an_execution_that_ended_or_is_not_its(store):
    """The heartbeat read what it holds just before the execution ended: its renewal comes
    after the end, and must leave no lease and no entry in the reapers' index behind."""
    lease_store = LeaseStore(store.client, store.keys, 5.0)
    ended = _claimed(store, "mine")
    running = store.get(ended)
    store.finish(running, running.next(status=Status.SUCCESS), "")
    other = _claimed(store, "theirs")  # claimed by another worker
    queued = ExecutionRecord(secrets.token_hex(8), "w1")  # not held by anyone yet
    store.create(queued)
    lease_store.renew({ended: "mine", other: "mine", queued.id: "mine", "gone": "mine"})
    assert store.client.exists(store.keys.execution_lease(ended)) == 0
    assert store.client.zscore(store.keys.running(), ended) is None
    assert store.client.get(store.keys.execution_lease(other)) == "theirs"
    assert store.client.exists(store.keys.execution_lease(queued.id)) == 0
    assert store.client.exists(store.keys.execution_lease("gone")) == 0
    assert store.client.zscore(store.keys.running(), "gone") is None


def test_the_heartbeat_beats_while_the_other_threads_hold_the_interpreter(store, stops):
    """A node that computes for seconds: the heartbeat's own thread still renews."""
    lease_store = LeaseStore(store.client, store.keys, 5.0)
    stops.add("e1", "mine")
    heartbeat = Heartbeat(stops, lambda: (lease_store, presence(store)), "w1")
    heartbeat.start()
    try:
        wait_until(lambda: heartbeat.beats >= 1, 5, "a first heartbeat")
        first, give_up = heartbeat.beats, time.monotonic() + 30  # a guard against hanging
        while heartbeat.beats < first + 2:  # CPU-bound, never yields on purpose
            sum(range(10_000))
            assert time.monotonic() < give_up, "the heartbeat stopped while this thread computed"
    finally:
        heartbeat.close()


class FailingOnce(LeaseStore):
    def __init__(self, *args, error: Exception):
        super().__init__(*args)
        self.error: Exception | None = error

    def beat(self, *args):
        error, self.error = self.error, None
        if error:
            raise error
        return super().beat(*args)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (redis.ConnectionError("gone"), "could not renew execution leases: gone"),
        (RuntimeError("a bug"), "renewing leases failed"),
    ],
)
def test_a_heartbeat_that_fails_is_logged_and_the_next_one_renews(
    store, stops, caplog, monkeypatch, error, message
):
    monkeypatch.setattr(leases_module, "RENEW_EVERY_SECONDS", 0.05)
    failing = FailingOnce(store.client, store.keys, 5.0, error=error)
    running = _claimed(store, "mine")
    store.client.delete(store.keys.execution_lease(running))  # the failed beat did not renew
    stops.add(running, "mine")
    heartbeat = Heartbeat(stops, lambda: (failing, presence(store)), "w1")
    heartbeat.start()
    try:
        wait_until(lambda: heartbeat.beats >= 1, 5, "a heartbeat after the failure")
    finally:
        heartbeat.close()
    assert message in caplog.text
    assert store.client.get(store.keys.execution_lease(running)) == f"mine@{failing.owner.conn}"


def test_a_shutdown_stops_what_outlives_its_grace_period(worker):
    cancel = worker.stops.add("e1")
    worker.leases.stop_all_after(2.0)
    worker.clock.now += 1.9
    worker.leases.tick()
    assert not cancel.is_set()
    worker.clock.now += 0.1
    worker.leases.tick()
    assert cancel.is_set()
    assert worker.exits == 0  # still running: it ends, then the worker exits


def test_a_shutting_down_worker_exits_once_nothing_runs_and_all_is_published(worker, caplog):
    worker.stops.add("e1")
    worker.outbox.busy = True
    worker.leases.stop_all_after(8.0)
    worker.clock.now += 1.0
    worker.leases.tick()
    worker.stops.remove("e1")
    worker.leases.tick()
    assert worker.exits == 0  # its last events are not published yet
    worker.outbox.busy = False
    worker.leases.tick()
    assert worker.exits == 1
    assert "shutting down: no execution left, exiting" in caplog.text


def test_an_idle_worker_stays_up_for_a_second_after_its_shutdown_began(worker):
    worker.leases.stop_all_after(8.0)
    worker.clock.now += 0.9
    worker.leases.tick()
    assert worker.exits == 0
    worker.clock.now += 0.1
    worker.leases.tick()
    assert worker.exits == 1


def test_a_worker_that_is_not_shutting_down_never_exits(worker):
    worker.clock.now += 3600
    worker.leases.tick()
    assert worker.exits == 0


def test_the_held_map_is_safe_to_read_from_another_thread(stops):
    seen: list[dict[str, str]] = []
    reader = threading.Thread(target=lambda: [seen.append(stops.held()) for _ in range(2000)])
    reader.start()
    for i in range(2000):
        stops.add(f"e{i}", "t")
        stops.remove(f"e{i}")
    reader.join(10)
    assert all(isinstance(held, dict) for held in seen) and stops.held() == {}
