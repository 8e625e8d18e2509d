"""A worker's outbox that runs behind (thousands of executions on one busy worker) must not turn
a complete answer into "end lost": the worker keeps the execution's lease until its final event
is published, and the api waits for that event as long as the lease is held. A worker lost in
that window still ends the stream with an error line once its lease runs out.

Real Redis, the real outbox (held at its final event by the test), runner, relay and liveness
checks, in one process."""

from __future__ import annotations

import json
import secrets
import threading
from collections import OrderedDict

import pytest

import engine.nodes  # noqa: F401  (imported at collection, not inside the first test)
from api import responses
from api.launcher import Launch
from api.liveness import LivenessChecks
from api.relay import Relay
from api.responses import KEEPALIVE, Outcome
from core import events
from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.settings import Settings
from engine.services import Services
from memory.window import InProcessMemory
from tests.workflows import SIMPLE_CHAT, example
from worker.execution_run import ExecutionRunner
from worker.leases import Leases
from worker.publisher import Outbox, _is_done
from worker.stops import Stops

WAIT = 10.0  # upper bound for anything the test waits on; never reached when all goes well
QUIET = 0.05  # the api's keepalive interval here: many quiet intervals pass while the end is held


class HeldOutbox(Outbox):
    """Publishes every chunk as usual but holds each execution's final event until `release`
    is set: an outbox that runs far behind, at the worst moment."""

    def __init__(self, client):
        super().__init__(client)
        self.release = threading.Event()

    def _publish(self, batch):
        before = OrderedDict((c, p[:-1] if p and _is_done(p[-1]) else p) for c, p in batch.items())
        ends = OrderedDict((c, p[-1:]) for c, p in batch.items() if p and _is_done(p[-1]))
        super()._publish(before)
        if ends:
            self.release.wait(WAIT)
            super()._publish(ends)


@pytest.fixture
def settings(redis_url):
    return Settings(redis_url=redis_url, keepalive_seconds=QUIET)


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys)


@pytest.fixture
def stops(settings, keys):
    stops = Stops(settings.redis_url, keys.stop_channel())
    yield stops
    stops.close()


def launch(store: ExecutionStore, message: str) -> dict:
    workflow = example(SIMPLE_CHAT)
    session = secrets.token_hex(4)
    record = {
        "id": secrets.token_hex(8),
        "workflowId": workflow["id"],
        "mode": "webhook",
        "status": Status.NEW,
        "createdAt": now_ms(),
        "sessionId": session,
        "responseMode": "streaming",
    }
    store.create(record)
    item = {"json": {"action": "sendMessage", "sessionId": session, "chatInput": message}}
    return {
        "record": record,
        "workflow": workflow,
        "startNode": "When chat message received",
        "items": [item],
        "streaming": True,
        "responseMode": "streaming",
    }


def test_a_final_event_held_in_a_lagging_outbox_still_ends_the_answer_whole(
    settings, store, stops, redis_url, monkeypatch
):
    monkeypatch.setattr(responses, "FINAL_GRACE_SECONDS", QUIET)  # far shorter than the lag
    outbox = HeldOutbox(store.client)
    services = Services(redis=store.client, keys=store.keys, simple_memory=InProcessMemory())
    runner = ExecutionRunner(settings, store, outbox, services, stops)
    leases = Leases(settings, store, stops, outbox)
    leases.start()
    relay = Relay(redis_url)
    payload = launch(store, "hello there")
    execution_id = payload["record"]["id"]
    stream = relay.subscribe(store.keys.execution_events(execution_id))
    checks = LivenessChecks(store, settings.queue_timeout_seconds)
    outcome = Outcome(Launch(execution_id, stream), store, relay, settings, checks)
    worker = threading.Thread(target=runner.run, args=(payload,), daemon=True)
    worker.start()
    try:
        chunks, held_for = [], 0
        for piece in responses._ndjson(outcome, 0.0):  # what one write sends: one line or more
            chunks.extend(json.loads(line) for line in piece.splitlines())
            if piece == KEEPALIVE.encode() and store.get(execution_id)["status"] == Status.SUCCESS:
                # The record says it finished while its end sits in the outbox: let several
                # quiet intervals (each longer than the grace) pass before it is published.
                held_for += 1
                if held_for == 3:
                    outbox.release.set()
    finally:
        outbox.release.set()
        leases.close()
    worker.join(WAIT)
    answer = [c for c in chunks if c["type"] != "keepalive"]
    assert [c["type"] for c in answer] == ["begin"] + ["item"] * 4 + ["end"], answer[-1]
    assert held_for >= 3
    assert "".join(c["content"] for c in answer if c["type"] == "item") == "You said: hello there"
    # Its lease went once the end was out, and with it the session's line.
    assert store.client.zscore(store.keys.running(), execution_id) is None
    assert store.client.llen(store.session_queue(payload["record"])) == 0


def test_a_worker_lost_before_it_published_the_final_event_still_ends_the_stream_with_an_error(
    settings, store, redis_url, monkeypatch
):
    """As a worker that recorded the outcome, published the answer's lines, and died with the
    final event still in its outbox: no renewal, its lease runs out."""
    monkeypatch.setattr(responses, "FINAL_GRACE_SECONDS", QUIET)
    relay = Relay(redis_url)
    payload = launch(store, "hello")
    record = payload["record"]
    stream = relay.subscribe(store.keys.execution_events(record["id"]))
    running = {**record, "status": Status.RUNNING}
    assert store.transition(running, {Status.NEW}, lease_ms=60_000)
    lines = '{"type":"begin"}\n{"type":"item","content":"You "}\n'
    store.client.publish(stream.channel, events.encode(events.lines(lines, items=1, seq=0)))
    finished = {**running, "status": Status.SUCCESS}
    assert store.transition(finished, {Status.RUNNING})
    store.hold_lease(record["id"], int(QUIET * 1000 * 4))  # as the worker does, then dies
    checks = LivenessChecks(store, settings.queue_timeout_seconds)
    outcome = Outcome(Launch(record["id"], stream), store, relay, settings, checks)
    chunks = [
        json.loads(line) for piece in responses._ndjson(outcome, 0.0) for line in piece.splitlines()
    ]
    answer = [c for c in chunks if c["type"] != "keepalive"]
    assert [c["type"] for c in answer] == ["begin", "item", "error"]
    assert "lost" in answer[-1]["content"]
