"""A worker's outbox that runs behind (thousands of executions on one busy worker) must not turn
a complete answer into "end lost": the end is recorded, with its final event, only once the
outbox has published every chunk, so a stream never sees a finished record with lines still to
come. A worker lost while its chunks wait in the outbox ends the stream with an error once its
lease runs out and its loss is confirmed.

Real Redis, the real outbox (held by the test), runner, heartbeat, relay and liveness checks, in
one process."""

from __future__ import annotations

import json
import secrets
import threading

import pytest

import engine.nodes  # noqa: F401  (imported at collection, not inside the first test)
from api import responses
from api.launcher import Launch
from api.liveness import LivenessChecks
from api.relay import Relay
from api.responses import Outcome
from core import chunks as chunk_lines
from core import events, liveness
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.presence import Presence
from core.settings import Settings
from core.task import TaskPayload
from engine.services import Services
from memory.window import InProcessMemory
from tests.workflows import SIMPLE_CHAT, example
from worker.execution_run import ExecutionRunner
from worker.leases import Heartbeat
from worker.publisher import Outbox
from worker.stops import Stops

WAIT = 10.0  # upper bound for anything the test waits on; never reached when all goes well
QUIET = 0.05  # the api's keepalive interval here: many quiet intervals pass while held


class HeldOutbox(Outbox):
    """Holds every publish until `release` is set: an outbox that runs far behind."""

    def __init__(self, client):
        super().__init__(client)
        self.release = threading.Event()

    def _publish(self, batch):
        self.release.wait(WAIT)
        super()._publish(batch)


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, keepalive_seconds=QUIET, lease_seconds=1.0)


@pytest.fixture
def store(redis_client, keys, settings):
    return ExecutionStore(redis_client, keys, lease_seconds=settings.lease_seconds)


@pytest.fixture
def stops(settings, keys):
    stops = Stops(settings.redis_url, keys.stop_channel())
    yield stops
    stops.close()


def launch(store: ExecutionStore, message: str) -> TaskPayload:
    workflow = example(SIMPLE_CHAT)
    session = secrets.token_hex(4)
    record = ExecutionRecord(secrets.token_hex(8), workflow["id"], session_id=session,
                             response_mode="streaming")  # fmt: skip
    store.create(record)
    item = {"json": {"action": "sendMessage", "sessionId": session, "chatInput": message}}
    return TaskPayload(record, workflow=workflow, start_node="When chat message received",
                       items=[item], streaming=True, response_mode="streaming")  # fmt: skip


def outcome_of(store, relay, settings, execution_id: str) -> Outcome:
    stream = relay.subscribe(store.keys.execution_events(execution_id))
    return Outcome(Launch(execution_id, stream), store, relay, settings, LivenessChecks(store))


def test_an_answer_held_in_a_lagging_outbox_still_ends_whole(settings, store, stops, redis_url):
    outbox = HeldOutbox(store.client)
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    leases = LeaseStore(store.client, store.keys, settings.lease_seconds)
    runner = ExecutionRunner(settings, store, leases, outbox, services, stops)
    heartbeat = Heartbeat(stops, lambda: (leases, Presence(store.client, store.keys, 5.0)), "w1")
    heartbeat.start()
    relay = Relay(redis_url)
    payload = launch(store, "hello there")
    execution_id = payload.record.id
    outcome = outcome_of(store, relay, settings, execution_id)
    worker = threading.Thread(target=runner.run, args=(payload.encode(),), daemon=True)
    worker.start()
    try:
        received, quiet = [], 0
        for piece in responses._ndjson(outcome, 0.0):  # what one write sends: one line or more
            received.extend(json.loads(line) for line in piece.splitlines())
            if piece == chunk_lines.KEEPALIVE.encode():
                # Held: the run is over, but its record still says running (leased).
                assert store.get(execution_id).status == Status.RUNNING
                quiet += 1
                if quiet == 5:
                    outbox.release.set()
    finally:
        outbox.release.set()
        heartbeat.close()
    worker.join(WAIT)
    answer = [c for c in received if c["type"] != "keepalive"]
    assert [c["type"] for c in answer] == ["begin"] + ["item"] * 4 + ["end"], answer[-1]
    assert quiet >= 5
    assert "".join(c["content"] for c in answer if c["type"] == "item") == "You said: hello there"
    record = store.get(execution_id)
    # The record counts every numbered event of its channel: the stream had them all.
    assert record.status == Status.SUCCESS and record.events == outcome.stream.next_seq
    assert not store.client.exists(store.keys.execution_lease(execution_id))
    assert store.client.llen(store.lines.key(payload.record)) == 0


def test_a_worker_lost_with_its_chunks_in_its_outbox_ends_the_stream_with_an_error(
    settings, store, redis_url, monkeypatch
):
    """As a worker that claimed the execution, published the first lines, and died with the
    rest in its outbox: no renewal, its lease runs out, the loss is confirmed."""
    monkeypatch.setattr(liveness, "CONFIRM_MS", 100)
    relay = Relay(redis_url)
    payload = launch(store, "hello")
    record = payload.record
    outcome = outcome_of(store, relay, settings, record.id)
    assert store.claim(record, record.next(status=Status.RUNNING, claim="t1"))
    lines = '{"type":"begin"}\n{"type":"item","content":"You "}\n'
    store.client.publish(outcome.stream.channel, events.encode(events.lines(lines, items=1, seq=0)))
    received = [
        json.loads(line) for piece in responses._ndjson(outcome, 0.0) for line in piece.splitlines()
    ]
    answer = [c for c in received if c["type"] != "keepalive"]
    assert [c["type"] for c in answer] == ["begin", "item", "error"]
    assert "lost" in answer[-1]["content"]
    assert store.get(record.id).status == Status.CRASHED
