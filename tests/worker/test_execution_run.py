"""Running one execution on a worker, against a real Redis: the claim drops duplicates (and a
claim retried after its answer was lost still runs once), a session's messages take turns and a
lost head of the line is reaped, a run over its time limit fails, a stop cancels it, and an end
whose answer was lost is retried and written once."""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

import pytest
import redis

# The node registry (and the openai SDK under it) takes seconds to import: at collection,
# not inside whichever test loads a workflow first.
import engine.nodes  # noqa: F401
from core import events, liveness
from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.results import FinalResult
from core.session_line import SessionLine
from core.settings import Settings
from core.stops import request_stop
from core.task import TaskPayload
from engine.executor import run_workflow
from engine.services import Services
from memory.window import InProcessMemory
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example
from worker.execution_run import ExecutionRunner
from worker.stops import Stops

TRIGGER = "When chat message received"
WAIT = 5.0  # upper bound for anything the test waits on; never reached when all goes well


class RecordingOutbox:
    """Keeps each execution's final result. The end's own step publishes the final event, as
    with the real outbox."""

    publishes_final = True

    def __init__(self) -> None:
        self.results: dict[str, FinalResult] = {}

    def chunk(self, channel: str, chunk: dict[str, Any]) -> None:
        pass

    def response(self, channel: str, response: dict[str, Any]) -> None:
        pass

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        pass

    def flush(self, channel: str) -> threading.Event:
        flushed = threading.Event()
        flushed.set()
        return flushed

    def final(self, channel: str, result: FinalResult) -> tuple[str, int]:
        self.results[channel] = result
        return events.encode(events.done(result.to_json(), 0)), 0

    def delivered(self, channel: str, event: str) -> None:
        pass

    def forget(self, channel: str) -> None:
        pass

    def idle(self) -> bool:
        return True


class Engine:
    """The real engine, noting each run. An execution listed in `hold` waits at its start until
    released; one in `until_stopped` runs until its cancel event is set (a model that would
    never finish by itself)."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.started: dict[str, threading.Event] = {}
        self.hold: dict[str, threading.Event] = {}
        self.until_stopped: set[str] = set()

    def entered(self, execution_id: str) -> threading.Event:
        return self.started.setdefault(execution_id, threading.Event())

    def __call__(self, *args, **kwargs):
        execution_id = kwargs["execution_id"]
        self.runs.append(execution_id)
        self.entered(execution_id).set()
        if execution_id in self.hold:
            assert self.hold[execution_id].wait(WAIT)
        if execution_id in self.until_stopped:
            assert kwargs["cancel"].wait(WAIT)
        return run_workflow(*args, **kwargs)


class WatchedLine(SessionLine):
    """Tells when an execution has started waiting for its session's turn."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.waiting = threading.Event()

    def wait(self, execution_id: str, timeout: float) -> None:
        self.waiting.set()
        super().wait(execution_id, timeout)


class WatchedStore(ExecutionStore):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = WatchedLine(self.client, self.keys)


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, execution_timeout_seconds=WAIT * 2)


@pytest.fixture
def store(redis_client, keys):
    return WatchedStore(redis_client, keys)


@pytest.fixture
def engine():
    return Engine()


@pytest.fixture
def stops(settings, keys):
    stops = Stops(settings.redis_url, keys.stop_channel())
    yield stops
    stops.close()


def make_runner(settings, store, stops, engine=run_workflow) -> ExecutionRunner:
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    leases = LeaseStore(store.client, store.keys, settings.lease_seconds)
    return ExecutionRunner(
        settings, store, leases, RecordingOutbox(), services, stops, engine=engine
    )


@pytest.fixture
def runner(settings, store, stops, engine):
    return make_runner(settings, store, stops, engine)


def launch(
    store: ExecutionStore, message: str, session: str = "s1", example_name=SIMPLE_CHAT, **fields
) -> dict:
    """What the api does before enqueueing: a `new` record in the session's line, and the
    task's message."""
    workflow = example(example_name)
    record = ExecutionRecord(
        secrets.token_hex(8),
        workflow["id"],
        workflow_name=workflow["name"],
        created_at=now_ms(),
        queued_at=fields.pop("queued_at", now_ms()),
        session_id=session,
        response_mode="streaming",
    )
    store.create(record)
    item = {"json": {"action": "sendMessage", "sessionId": session, "chatInput": message}}
    payload = TaskPayload(
        record,
        workflow={**workflow, **fields},
        start_node=TRIGGER,
        items=[item],
        streaming=True,
        response_mode="streaming",
    )
    return payload.encode()


def id_of(message: dict) -> str:
    return TaskPayload.decode(message).record.id


def in_thread(runner: ExecutionRunner, payload: dict) -> tuple[threading.Thread, list[str]]:
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(runner.run(payload)), daemon=True)
    thread.start()
    return thread, outcome


def test_a_duplicate_delivery_of_a_finished_execution_is_dropped_without_running(
    runner, store, engine
):
    payload = launch(store, "hello")
    assert runner.run(payload) == "success"
    assert runner.run(dict(payload)) == "dropped"
    assert engine.runs == [id_of(payload)]
    assert store.get(id_of(payload)).status == Status.SUCCESS


def test_a_duplicate_delivered_while_the_first_copy_runs_is_dropped(runner, store, engine):
    payload = launch(store, "hello")
    execution_id = id_of(payload)
    engine.hold[execution_id] = threading.Event()
    first, outcome = in_thread(runner, payload)
    assert engine.entered(execution_id).wait(WAIT)
    assert runner.run(dict(payload)) == "dropped"
    engine.hold[execution_id].set()
    first.join(WAIT)
    assert outcome == ["success"]
    assert engine.runs == [execution_id]


def test_the_second_message_of_a_session_waits_until_the_first_has_finished(runner, store, engine):
    first, second = launch(store, "my name is Ada"), launch(store, "what is my name")
    first_id, second_id = id_of(first), id_of(second)
    engine.hold[first_id] = threading.Event()
    first_thread, first_outcome = in_thread(runner, first)
    assert engine.entered(first_id).wait(WAIT)
    second_thread, second_outcome = in_thread(runner, second)
    assert store.lines.waiting.wait(WAIT)  # the second is blocked on its turn...
    assert engine.runs == [first_id]  # ...and has not started...
    assert store.get(second_id).status == Status.NEW
    # ...held by this worker's lease, out of the broker's queue.
    assert store.client.exists(store.keys.execution_lease(second_id))
    assert not store.client.exists(store.keys.execution_queued(second_id))
    engine.hold[first_id].set()
    first_thread.join(WAIT)
    second_thread.join(WAIT)
    assert (first_outcome, second_outcome) == (["success"], ["success"])
    assert engine.runs == [first_id, second_id]
    result = runner.outbox.results[store.keys.execution_events(second_id)]
    assert result.output == {"output": "Your name is Ada."}  # it saw the first turn


def test_an_execution_declared_lost_while_it_ran_writes_neither_its_outcome_nor_its_turn(
    runner, store, engine, monkeypatch
):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    payload = launch(store, "my name is Ada", example_name=REDIS_CHAT)
    execution_id = id_of(payload)
    engine.hold[execution_id] = threading.Event()
    thread, outcome = in_thread(runner, payload)
    assert engine.entered(execution_id).wait(WAIT)
    store.client.delete(store.keys.execution_lease(execution_id))  # as if it stopped renewing
    store.reap(execution_id)
    assert store.reap(execution_id).status == Status.CRASHED
    engine.hold[execution_id].set()
    thread.join(WAIT)
    assert outcome == [Status.CRASHED]
    assert store.get(execution_id).status == Status.CRASHED
    assert not store.client.exists(store.keys.chat("s1"))


def test_a_redis_memory_turn_is_written_with_the_end(runner, store):
    payload = launch(store, "my name is Ada", example_name=REDIS_CHAT)
    assert runner.run(payload) == "success"
    turn = [json.loads(m) for m in store.client.lrange(store.keys.chat("s1"), 0, -1)]
    assert [m["type"] for m in turn] == ["ai", "human"]
    assert turn[0]["data"]["content"] == "Nice to meet you, Ada!"


def test_a_lost_head_of_the_line_is_reaped_and_the_next_message_runs(runner, store, monkeypatch):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    lost = TaskPayload.decode(launch(store, "my name is Ada")).record
    assert store.claim(lost, lost.next(status=Status.RUNNING, claim="gone"))
    store.client.delete(store.keys.execution_lease(lost.id))  # its worker died
    assert runner.run(launch(store, "hello")) == "success"
    crashed = store.get(lost.id)
    assert crashed.status == Status.CRASHED
    assert (
        crashed.error
        == "The worker running this execution was lost (it stopped renewing its lease)."
    )


def test_an_execution_over_its_time_limit_fails_as_timed_out(redis_url, store, stops, engine):
    settings = Settings(redis_url=redis_url, execution_timeout_seconds=0.1)
    runner = make_runner(settings, store, stops, engine)
    payload = launch(store, "hello")
    execution_id = id_of(payload)
    engine.until_stopped.add(execution_id)
    assert runner.run(payload) == "error"
    error = "The execution timed out after 0.1 s (MINI_N8N_EXECUTION_TIMEOUT)."
    record = store.get(execution_id)
    assert (record.status, record.error) == (Status.ERROR, error)
    result = runner.outbox.results[store.keys.execution_events(execution_id)]
    assert (result.status, result.error) == ("error", error)


def test_a_stop_request_cancels_a_running_execution(runner, store, stops, engine):
    stops.start()
    assert stops.listening.wait(WAIT)
    payload = launch(store, "hello")
    execution_id = id_of(payload)
    engine.until_stopped.add(execution_id)
    thread, outcome = in_thread(runner, payload)
    assert engine.entered(execution_id).wait(WAIT)
    request_stop(store, execution_id)  # broadcast to every worker
    thread.join(WAIT)
    assert outcome == ["canceled"]
    record = store.get(execution_id)
    assert (record.status, record.error) == (Status.CANCELED, "The execution was stopped")
    assert stops.running() == []


def test_a_stop_marker_found_at_the_claim_cancels_the_run(runner, store, redis_client):
    # A stop broadcast just before this worker claimed the execution, when nothing here heard it.
    payload = launch(store, "hello")
    execution_id = id_of(payload)
    redis_client.set(store.keys.execution_stop(execution_id), "1")
    assert runner.run(payload) == "canceled"
    assert store.get(execution_id).status == Status.CANCELED


def test_an_execution_that_waited_past_the_queue_timeout_is_crashed_and_never_runs(
    runner, store, engine, monkeypatch
):
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    payload = launch(store, "hello", queued_at=now_ms() - 400_000)
    execution_id = id_of(payload)
    store.client.delete(store.keys.execution_queued(execution_id))  # its queue time ran out
    store.reap(execution_id)
    crashed = store.reap(execution_id)
    assert crashed.status == Status.CRASHED
    assert crashed.error == "No worker started this execution within 300 s."
    assert runner.run(payload) == "dropped"  # a worker that gets it at last
    assert engine.runs == []


class EndAnswerLost(WatchedStore):
    """The end is written, but its answer never reaches the worker (Redis went away)."""

    lost = False

    def finish(self, *args, **kwargs):
        ended = super().finish(*args, **kwargs)
        if not self.lost:
            self.lost = True
            raise redis.TimeoutError("Timeout reading from socket")
        return ended


def test_an_end_whose_answer_was_lost_is_retried_and_written_once(
    settings, redis_client, keys, stops, caplog
):
    store = EndAnswerLost(redis_client, keys)
    runner = make_runner(settings, store, stops)
    payload = launch(store, "hello")
    pubsub = redis_client.pubsub()
    pubsub.subscribe(keys.execution_events(id_of(payload)))
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    assert runner.run(payload) == "success"
    assert store.lost
    assert store.get(id_of(payload)).status == Status.SUCCESS
    assert "Redis unreachable, retrying" in caplog.text
    finals = list(iter(lambda: pubsub.get_message(timeout=0.5), None))
    assert len(finals) == 1  # published once, by the write that did happen
    pubsub.close()


class ClaimAnswerLost(WatchedStore):
    """The first claim is written, and its answer never reaches the worker (either form: alone,
    or with the look at the session's line)."""

    claims = 0

    def claim(self, *args):
        return self._answer_lost_once(super().claim(*args))

    def claim_at_turn(self, *args):
        return self._answer_lost_once(super().claim_at_turn(*args))

    def _answer_lost_once(self, answer):
        self.claims += 1
        if self.claims == 1:
            raise redis.TimeoutError("Timeout reading from socket")
        return answer


def test_a_claim_retried_after_its_answer_was_lost_runs_the_execution_once(
    settings, redis_client, keys, stops, engine
):
    store = ClaimAnswerLost(redis_client, keys)
    runner = make_runner(settings, store, stops, engine)
    payload = launch(store, "hello")
    assert runner.run(payload) == "success"
    assert store.claims == 2 and engine.runs == [id_of(payload)]


def test_a_snapshot_that_no_longer_loads_fails_its_record_instead_of_leaving_it_running(
    runner, store
):
    payload = launch(store, "hello", nodes=[{"name": "X", "type": "gone.node"}])
    assert runner.run(payload) == Status.ERROR
    record = store.get(id_of(payload))
    assert record.status == Status.ERROR
    assert record.error == 'The execution could not run: Node "X": unknown node type "gone.node"'
    assert not store.client.exists(store.keys.execution_lease(id_of(payload)))


def test_an_answer_holding_a_lone_surrogate_does_not_hold_up_its_sessions_next_message(runner):
    # The run data echoes the message: no script may need to decode a record holding one.
    first = launch(runner.store, "\ud800 hi", session="s-surrogate")
    assert runner.run(first) == "success"
    second = launch(runner.store, "hello", session="s-surrogate")
    assert runner.run(second) == "success"
