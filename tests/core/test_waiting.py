"""core/waiting.py against a real Redis: messages keep their order and index, one reply wins a
wait, a wait past its deadline ends once, and stopping a waiting execution cancels it."""

from __future__ import annotations

import json

from core import events
from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.waiting import EXPIRED, WaitingStore


def _waiting(redis_client, keys, wait_till: int | None = None) -> tuple[WaitingStore, dict]:
    store = ExecutionStore(redis_client, keys)
    record = {"id": "e1", "workflowId": "w1", "sessionId": "s1", "status": Status.NEW}
    store.create(record)
    running = {**record, "status": Status.RUNNING}
    assert store.transition(running, {Status.NEW}, lease_ms=5000)
    waits = WaitingStore(store)
    waiting = {**running, "status": Status.WAITING, "waitTill": wait_till}
    assert waits.pause(waiting, {"engine": {"node": "Ask"}, "workflow": {}, "pushRef": None})
    return waits, waiting


def test_messages_are_listed_and_published_with_their_index(redis_client, keys):
    waits = WaitingStore(ExecutionStore(redis_client, keys))
    pubsub = redis_client.pubsub()
    pubsub.subscribe(keys.execution_events("e1"))
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    assert waits.send_message("e1", {"text": "one", "wait": False}) == 0
    assert waits.send_message("e1", {"text": "two", "wait": True}) == 1
    published = [events.decode(pubsub.get_message(timeout=5)["data"]) for _ in range(2)]
    assert [(e.kind, e.body["n"], e.body["text"]) for e in published] == [
        (events.Kind.MESSAGE, 0, "one"),
        (events.Kind.MESSAGE, 1, "two"),
    ]
    assert [m["text"] for m in waits.messages("e1", 1)] == ["two"]
    assert waits.messages("e1", 1)[0]["n"] == 1
    pubsub.close()


def test_a_paused_execution_holds_no_lease_and_keeps_its_session_turn(redis_client, keys):
    _waiting(redis_client, keys)
    assert redis_client.zscore(keys.running(), "e1") is None
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]
    store = ExecutionStore(redis_client, keys)
    assert store.my_turn("e1", keys.session_queue("w1", "s1"))


def test_only_one_reply_resumes_a_wait(redis_client, keys):
    waits, _ = _waiting(redis_client, keys)
    first = waits.claim_reply("e1")
    assert first is not None and first["status"] == Status.NEW and first["queuedAt"]
    assert waits.claim_reply("e1") is None
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]


def test_delivered_counts_only_grow(redis_client, keys):
    waits = WaitingStore(ExecutionStore(redis_client, keys))
    waits.mark_delivered("e1", 2)
    waits.mark_delivered("e1", 1)
    assert waits.delivered("e1") == 2


def test_a_wait_past_its_deadline_ends_with_the_expiry_error_once(redis_client, keys):
    waits, _ = _waiting(redis_client, keys, wait_till=now_ms() - 1)
    pubsub = redis_client.pubsub()
    pubsub.subscribe(keys.execution_events("e1"))
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    assert waits.expire_due() == 1
    assert waits.expire_due() == 0
    record = json.loads(redis_client.get(keys.execution("e1")))
    assert (record["status"], record["error"]) == ("error", EXPIRED)
    done = events.decode(pubsub.get_message(timeout=5)["data"])
    assert done.kind == events.Kind.DONE and done.body["error"] == EXPIRED
    assert redis_client.zcard(keys.waiting()) == 0
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == []
    assert waits.claim_reply("e1") is None
    pubsub.close()


def test_a_wait_not_yet_due_is_left_alone(redis_client, keys):
    waits, _ = _waiting(redis_client, keys, wait_till=now_ms() + 60_000)
    assert waits.expire_due() == 0
    assert json.loads(redis_client.get(keys.execution("e1")))["status"] == "waiting"


def test_stopping_a_waiting_execution_cancels_it_and_frees_its_session(redis_client, keys):
    _waiting(redis_client, keys)
    stopped = ExecutionStore(redis_client, keys).request_stop("e1")
    assert stopped["status"] == Status.CANCELED
    assert stopped["error"] == "The execution was stopped while it waited for a reply."
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == []
