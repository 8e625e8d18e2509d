"""One worker's leases, one round at a time, against a real Redis: what it runs keeps its lease,
what a lost worker ran is reaped, and a shutdown stops what outlives its grace and then exits.
The rounds are driven by hand with a fake clock, never by the background loop's second."""

from __future__ import annotations

import secrets

import pytest
import redis

from core.executions import ExecutionStore, Status, now_ms
from core.settings import Settings
from worker.leases import REAP_EVERY_SECONDS, Leases
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
    """A worker's Leases with the parts it watches laid bare."""

    def __init__(self, store: ExecutionStore, stops: Stops, store_for_leases=None):
        self.store = store
        self.stops = stops
        self.clock = Clock()
        self.outbox = Outbox()
        self.exits = 0
        settings = Settings(lease_seconds=5.0, queue_timeout_seconds=300.0)
        self.leases = Leases(
            settings,
            store_for_leases or store,
            stops,
            self.outbox,
            clock=self.clock,
            end_process=self._exit,
        )

    def _exit(self) -> None:
        self.exits += 1

    def running(self, lease_deadline_ms: int) -> str:
        """A running execution whose lease ends at `lease_deadline_ms`."""
        record = {"id": secrets.token_hex(8), "workflowId": "w1", "status": Status.NEW,
                  "createdAt": now_ms()}  # fmt: skip
        self.store.create(record)
        started = {**record, "status": Status.RUNNING}
        assert self.store.transition(started, {Status.NEW}, lease_ms=5000)
        self.store.client.zadd(self.store.keys.running(), {record["id"]: lease_deadline_ms})
        return record["id"]

    def lease(self, execution_id: str) -> float | None:
        return self.store.client.zscore(self.store.keys.running(), execution_id)

    def status(self, execution_id: str) -> str:
        return self.store.get(execution_id)["status"]


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys)


@pytest.fixture
def stops(redis_url, keys):
    return Stops(redis_url, keys.stop_channel())


@pytest.fixture
def worker(store, stops):
    return Harness(store, stops)


def test_a_running_execution_whose_lease_ran_out_is_reaped_as_lost(worker):
    lost = worker.running(lease_deadline_ms=now_ms() - 1)
    worker.leases.tick()
    record = worker.store.get(lost)
    assert (record["status"], record["error"]) == (Status.CRASHED, LOST)
    assert worker.lease(lost) is None


def test_a_finished_execution_whose_worker_was_lost_before_releasing_its_lease_loses_the_lease(
    worker,
):
    # Recorded, then lost with the final event still in its outbox: the record stays as it is,
    # and the expired lease does not linger (the reaper takes a hundred at a time).
    done = worker.running(lease_deadline_ms=now_ms() - 1)
    finished = {**worker.store.get(done), "status": Status.SUCCESS}
    assert worker.store.transition(finished, {Status.RUNNING}, lease_ms=5000)
    worker.store.client.zadd(worker.store.keys.running(), {done: now_ms() - 1})
    worker.leases.tick()
    assert worker.status(done) == Status.SUCCESS
    assert worker.lease(done) is None


def test_an_execution_running_here_has_its_lease_renewed_and_is_not_reaped(worker):
    mine = worker.running(lease_deadline_ms=now_ms() - 1)  # as late as the lost one
    worker.stops.add(mine)
    before = now_ms()
    worker.leases.tick()
    assert worker.status(mine) == Status.RUNNING
    assert worker.lease(mine) >= before + 5000


def test_a_running_execution_with_time_left_on_its_lease_is_not_reaped(worker):
    elsewhere = worker.running(lease_deadline_ms=now_ms() + 60_000)
    worker.leases.tick()
    assert worker.status(elsewhere) == Status.RUNNING


def test_reaping_comes_round_once_every_five_seconds(worker):
    worker.leases.tick()  # the first round reaps
    lost = worker.running(lease_deadline_ms=now_ms() - 1)
    worker.clock.now += REAP_EVERY_SECONDS - 1
    worker.leases.tick()
    assert worker.status(lost) == Status.RUNNING
    worker.clock.now += 1.5
    worker.leases.tick()
    assert worker.status(lost) == Status.CRASHED


class FailingOnce(ExecutionStore):
    def __init__(self, *args, error: Exception):
        super().__init__(*args)
        self.error: Exception | None = error

    def renew_leases(self, execution_ids, lease_ms):
        error, self.error = self.error, None
        if error:
            raise error
        super().renew_leases(execution_ids, lease_ms)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (redis.ConnectionError("gone"), "could not renew execution leases: gone"),
        (RuntimeError("a bug"), "renewing leases failed"),
    ],
)
def test_a_round_that_fails_is_logged_and_the_next_one_renews(
    redis_client, keys, stops, caplog, error, message
):
    failing = FailingOnce(redis_client, keys, error=error)
    worker = Harness(ExecutionStore(redis_client, keys), stops, store_for_leases=failing)
    mine = worker.running(lease_deadline_ms=now_ms() - 1)
    worker.stops.add(mine)
    worker.leases.tick()
    assert message in caplog.text
    worker.leases.tick()
    assert worker.lease(mine) > now_ms()
    assert worker.status(mine) == Status.RUNNING


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
