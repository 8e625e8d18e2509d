"""Running one execution on a worker, against a real Redis: the claim drops duplicates, a
session's messages take turns, a run over its time limit fails, a stop cancels it, and an
outcome Redis refused for a moment is still recorded."""

from __future__ import annotations

import copy
import secrets
import threading
from typing import Any

import pytest
import redis

# The node registry (and the openai SDK under it) takes seconds to import: at collection,
# not inside whichever test loads a workflow first.
import engine.nodes  # noqa: F401
from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.settings import Settings
from engine.executor import run_workflow
from engine.services import Services
from memory.window import InProcessMemory
from tests.workflows import SIMPLE_CHAT, example
from worker.execution_run import ExecutionRunner
from worker.stops import Stops

TRIGGER = "When chat message received"
WAIT = 5.0  # upper bound for anything the test waits on; never reached when all goes well


class RecordingOutbox:
    """Keeps each execution's final result instead of publishing it."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    def chunk(self, channel: str, chunk: dict[str, Any]) -> None:
        pass

    def response(self, channel: str, response: dict[str, Any]) -> None:
        pass

    def event(self, channel: str, event_type: str, data: dict[str, Any]) -> None:
        pass

    def done(self, channel: str, result: dict[str, Any]) -> threading.Event:
        self.results[channel] = result
        flushed = threading.Event()
        flushed.set()
        return flushed

    def idle(self) -> bool:
        return True


class LaggingOutbox(RecordingOutbox):
    """Takes the final event and publishes it only once `published` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.queued = threading.Event()
        self.published = threading.Event()

    def done(self, channel: str, result: dict[str, Any]) -> threading.Event:
        super().done(channel, result)
        self.queued.set()
        return self.published


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


class WatchedStore(ExecutionStore):
    """Tells when an execution has started waiting for its session's turn."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.waiting = threading.Event()

    def wait_turn(self, execution_id: str, timeout: float) -> None:
        self.waiting.set()
        super().wait_turn(execution_id, timeout)


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


@pytest.fixture
def runner(settings, store, stops, engine):
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    return ExecutionRunner(settings, store, RecordingOutbox(), services, stops, engine=engine)


def launch(store: ExecutionStore, message: str, session: str = "s1", **record) -> dict:
    """What the api does before enqueueing: a `new` record in the session's line, and the
    task's payload."""
    workflow = example(SIMPLE_CHAT)
    record = {
        "id": secrets.token_hex(8),
        "workflowId": workflow["id"],
        "workflowName": workflow["name"],
        "mode": "webhook",
        "status": Status.NEW,
        "createdAt": now_ms(),
        "sessionId": session,
        "responseMode": "streaming",
        **record,
    }
    store.create(record)
    item = {"json": {"action": "sendMessage", "sessionId": session, "chatInput": message}}
    return {
        "record": record,
        "workflow": workflow,
        "startNode": TRIGGER,
        "items": [item],
        "streaming": True,
        "responseMode": "streaming",
        "pushRef": None,
    }


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
    assert runner.run(copy.deepcopy(payload)) == "dropped"
    assert engine.runs == [payload["record"]["id"]]
    assert store.get(payload["record"]["id"])["status"] == Status.SUCCESS


def test_a_duplicate_delivered_while_the_first_copy_runs_is_dropped(runner, store, engine):
    payload = launch(store, "hello")
    execution_id = payload["record"]["id"]
    engine.hold[execution_id] = threading.Event()
    first, outcome = in_thread(runner, payload)
    assert engine.entered(execution_id).wait(WAIT)
    assert runner.run(copy.deepcopy(payload)) == "dropped"
    engine.hold[execution_id].set()
    first.join(WAIT)
    assert outcome == ["success"]
    assert engine.runs == [execution_id]


def test_the_second_message_of_a_session_waits_until_the_first_has_finished(runner, store, engine):
    first, second = launch(store, "my name is Ada"), launch(store, "what is my name")
    first_id, second_id = first["record"]["id"], second["record"]["id"]
    engine.hold[first_id] = threading.Event()
    first_thread, first_outcome = in_thread(runner, first)
    assert engine.entered(first_id).wait(WAIT)
    second_thread, second_outcome = in_thread(runner, second)
    assert store.waiting.wait(WAIT)  # the second is blocked on its turn...
    assert engine.runs == [first_id]  # ...and has not started
    assert store.get(second_id)["status"] == Status.NEW
    engine.hold[first_id].set()
    first_thread.join(WAIT)
    second_thread.join(WAIT)
    assert (first_outcome, second_outcome) == (["success"], ["success"])
    assert engine.runs == [first_id, second_id]
    result = runner.outbox.results[store.keys.execution_events(second_id)]
    assert result["output"] == {"output": "Your name is Ada."}  # it saw the first turn


def test_a_finished_execution_keeps_its_lease_until_its_final_event_is_published(
    settings, store, stops, engine
):
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    outbox = LaggingOutbox()
    runner = ExecutionRunner(settings, store, outbox, services, stops, engine=engine)
    payload = launch(store, "hello")
    execution_id = payload["record"]["id"]
    thread, outcome = in_thread(runner, payload)
    assert outbox.queued.wait(WAIT)
    assert store.get(execution_id)["status"] == Status.SUCCESS  # recorded at once...
    assert store.client.zscore(store.keys.running(), execution_id) is not None  # ...leased
    assert stops.running() == [execution_id]  # so the lease thread keeps renewing it
    queue = store.session_queue(payload["record"])
    assert store.client.lrange(queue, 0, -1) == []  # its session's next message may start
    outbox.published.set()
    thread.join(WAIT)
    assert outcome == ["success"]
    assert store.client.zscore(store.keys.running(), execution_id) is None


def test_an_execution_over_its_time_limit_fails_as_timed_out(redis_url, store, stops, engine):
    settings = Settings(redis_url=redis_url, execution_timeout_seconds=0.1)
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    runner = ExecutionRunner(settings, store, RecordingOutbox(), services, stops, engine=engine)
    payload = launch(store, "hello")
    execution_id = payload["record"]["id"]
    engine.until_stopped.add(execution_id)
    assert runner.run(payload) == "error"
    error = "The execution timed out after 0.1 s (MINI_N8N_EXECUTION_TIMEOUT)."
    record = store.get(execution_id)
    assert (record["status"], record["error"]) == (Status.ERROR, error)
    result = runner.outbox.results[store.keys.execution_events(execution_id)]
    assert (result["status"], result["error"]) == ("error", error)


def test_a_stop_request_cancels_a_running_execution(runner, store, stops, engine):
    stops.start()
    assert stops.listening.wait(WAIT)
    payload = launch(store, "hello")
    execution_id = payload["record"]["id"]
    engine.until_stopped.add(execution_id)
    thread, outcome = in_thread(runner, payload)
    assert engine.entered(execution_id).wait(WAIT)
    store.request_stop(execution_id)  # broadcast to every worker
    thread.join(WAIT)
    assert outcome == ["canceled"]
    record = store.get(execution_id)
    assert (record["status"], record["error"]) == (Status.CANCELED, "The execution was stopped")
    assert stops.running() == []


def test_a_stop_marker_found_at_the_claim_cancels_the_run(runner, store, redis_client):
    # A stop broadcast just before this worker claimed the execution, when nothing here heard it.
    payload = launch(store, "hello")
    execution_id = payload["record"]["id"]
    redis_client.set(store.keys.execution_stop(execution_id), "1")
    assert runner.run(payload) == "canceled"
    assert store.get(execution_id)["status"] == Status.CANCELED


def test_an_execution_that_waited_past_the_queue_timeout_is_crashed_and_never_runs(
    runner, store, engine
):
    payload = launch(store, "hello", createdAt=now_ms() - 2000)
    execution_id = payload["record"]["id"]
    crashed = store.mark_crashed_if_lost(execution_id, queue_timeout_s=1)
    assert crashed["status"] == Status.CRASHED
    assert crashed["error"] == "No worker started this execution within 1 s."
    assert runner.run(payload) == "dropped"  # a worker that gets it at last
    assert engine.runs == []


class RefusingOnce(WatchedStore):
    """Redis goes away just as the outcome is written; meanwhile a reaper, seeing the lease run
    out, marks the execution lost."""

    refused = False

    def transition(self, record, allowed_from, *, lease_ms=0):
        if record["status"] in (Status.SUCCESS, Status.ERROR) and not self.refused:
            self.refused = True
            lost = {**record, "status": Status.CRASHED, "error": "lost"}
            assert super().transition(lost, {Status.RUNNING})
            raise redis.ConnectionError("Redis went away")
        return super().transition(record, allowed_from, lease_ms=lease_ms)


def test_an_outcome_redis_refused_is_recorded_once_it_answers_over_the_lost_mark(
    settings, redis_client, keys, stops, caplog
):
    store = RefusingOnce(redis_client, keys)
    services = Services(redis=redis_client, keys=keys, simple_memory=InProcessMemory())
    runner = ExecutionRunner(settings, store, RecordingOutbox(), services, stops)
    payload = launch(store, "hello")
    assert runner.run(payload) == "success"
    assert store.refused
    assert store.get(payload["record"]["id"])["status"] == Status.SUCCESS
    assert "Redis unreachable, retrying" in caplog.text


def test_a_snapshot_that_no_longer_loads_fails_its_record_instead_of_leaving_it_running(
    runner, store
):
    payload = launch(store, "hello")
    payload["workflow"] = {**payload["workflow"], "nodes": [{"name": "X", "type": "gone.node"}]}
    assert runner.run(payload) == Status.ERROR
    record = store.get(payload["record"]["id"])
    assert record["status"] == Status.ERROR
    assert record["error"] == 'The execution could not run: Node "X": unknown node type "gone.node"'
    assert store.client.zscore(store.keys.running(), payload["record"]["id"]) is None


def test_an_answer_holding_a_lone_surrogate_does_not_hold_up_its_sessions_next_message(runner):
    # Redis' Lua JSON decoder refuses lone surrogates: a finished record holding one (the run
    # data echoes the message) must never need decoding by a script again, so its session's
    # line is left at the outcome, not after its final event is published.
    first = launch(runner.store, "\ud800 hi", session="s-surrogate")
    assert runner.run(first) == "success"
    second = launch(runner.store, "hello", session="s-surrogate")
    assert runner.run(second) == "success"
