"""core/waiting.py against a real Redis: messages keep their order and index (whatever their
text), a paused execution holds no lease and keeps its turn, a wait past its deadline ends
once, and stopping a waiting execution cancels it."""

from __future__ import annotations

from dataclasses import dataclass

from core import events
from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.execution_outcomes import Reply
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.stops import request_stop
from core.waiting import EXPIRED, WaitingStore


def _waiting(
    redis_client, keys, wait_till: int | None = None
) -> tuple[WaitingStore, ExecutionRecord]:
    store = ExecutionStore(redis_client, keys)
    record = ExecutionRecord("e1", "w1", session_id="s1")
    store.create(record)
    running = record.next(status=Status.RUNNING, claim="t1")
    assert store.claim(record, running)
    waiting = running.next(status=Status.WAITING, wait_till=wait_till)
    assert store.pause(running, waiting, '{"engine":{"node":"Ask"}}', "a1") == ("paused", None)
    return WaitingStore(store), waiting


STATE = '{"engine":{"node":"Ask"}}'


@dataclass
class Resumed:
    """One execution's records: as created, as its first worker ran it (claim t1), its wait,
    and new again once a reply resumed it."""

    created: ExecutionRecord
    first: ExecutionRecord
    waiting: ExecutionRecord
    resumed: ExecutionRecord


def _resumed(redis_client, keys) -> tuple[ExecutionStore, Resumed]:
    store = ExecutionStore(redis_client, keys)
    created = ExecutionRecord("e1", "w1", session_id="s1")
    store.create(created)
    first = created.next(status=Status.RUNNING, claim="t1")
    assert store.claim(created, first)
    waiting = first.next(status=Status.WAITING)
    assert store.pause(first, waiting, STATE, "a1") == ("paused", None)
    outcome, resumed = store.reply(waiting, {"json": {"chatInput": "Ada"}})
    assert outcome == Reply.RESUMED and resumed is not None
    return store, Resumed(created, first, waiting, resumed)


def _subscribed(redis_client, channel):
    pubsub = redis_client.pubsub()
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    return pubsub


def test_messages_are_listed_and_published_with_their_index(redis_client, keys):
    waits = WaitingStore(ExecutionStore(redis_client, keys))
    pubsub = _subscribed(redis_client, keys.execution_events("e1"))
    assert waits.send_message("e1", ChatNodeMessage("one", False)) == 0
    assert waits.send_message("e1", ChatNodeMessage('two \ud800 "}', True)) == 1
    published = [events.decode(pubsub.get_message(timeout=5)["data"]) for _ in range(2)]
    assert [(e.kind, e.body["n"], e.body["text"]) for e in published] == [
        (events.Kind.MESSAGE, 0, "one"),
        (events.Kind.MESSAGE, 1, 'two \ud800 "}'),
    ]
    assert [m.text for m in waits.messages("e1", 1)] == ['two \ud800 "}']
    assert waits.messages("e1", 1)[0].n == 1
    pubsub.close()


def test_a_paused_execution_holds_no_lease_and_keeps_its_session_turn(redis_client, keys):
    _waiting(redis_client, keys)
    assert not redis_client.exists(keys.execution_lease("e1"))
    assert redis_client.zscore(keys.running(), "e1") is None
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]
    store = ExecutionStore(redis_client, keys)
    assert store.lines.turn("e1", keys.session_queue("w1", "s1")).mine


def test_only_one_message_resumes_a_wait(redis_client, keys):
    waits, waiting = _waiting(redis_client, keys)
    first = waits.store.reply(waiting, {"json": {"chatInput": "one"}})
    assert first[0] == Reply.RESUMED and first[1].queued_at
    assert waits.store.reply(waiting, {"json": {"chatInput": "two"}}) == (Reply.QUEUED, None)
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]


def test_a_wait_retried_after_its_execution_moved_on_to_another_worker_takes_nothing(
    redis_client, keys
):
    """A worker's wait was recorded but its answer lost; meanwhile a reply resumed the execution
    and another worker claimed it. The first worker's retry of that wait is refused: it takes
    neither the reply that resumed the run nor the one queued for the second worker's run."""
    store, run = _resumed(redis_client, keys)
    second = run.resumed.next(status=Status.RUNNING, claim="t2")
    assert store.claim(run.resumed, second)
    assert store.reply(second, {"json": {"chatInput": "next"}}) == (Reply.QUEUED, None)

    assert store.pause(run.first, run.waiting, STATE, "a1") == ("refused", None)
    assert redis_client.llen(keys.execution_replies("e1")) == 1
    current = store.get("e1")
    assert current is not None and (current.status, current.claim) == (Status.RUNNING, "t2")


def test_a_stale_task_of_an_execution_that_is_new_again_claims_nothing(redis_client, keys):
    """A task redelivered after its execution ran, waited and was resumed (new again, with the
    reply's own task) carries the record as it first was: its claim is refused, and the resumed
    run is claimed once, by the reply's task. No message is answered twice."""
    store, run = _resumed(redis_client, keys)

    assert not store.claim(run.created, run.created.next(status=Status.RUNNING, claim="t2"))
    assert store.claim(run.resumed, run.resumed.next(status=Status.RUNNING, claim="t3"))
    current = store.get("e1")
    assert current is not None and (current.status, current.claim) == (Status.RUNNING, "t3")


def test_delivered_counts_only_grow(redis_client, keys):
    waits = WaitingStore(ExecutionStore(redis_client, keys))
    waits.mark_delivered("e1", 2)
    waits.mark_delivered("e1", 1)
    assert waits.delivered("e1") == 2


def test_a_wait_past_its_deadline_ends_with_the_expiry_error_once(redis_client, keys):
    waits, waiting = _waiting(redis_client, keys, wait_till=now_ms() - 1)
    pubsub = _subscribed(redis_client, keys.execution_events("e1"))
    assert waits.due() == [waiting]
    assert waits.expire(waiting)
    assert not waits.expire(waiting)
    assert waits.due() == []
    record = waits.store.get("e1")
    assert (record.status, record.error) == (Status.ERROR, EXPIRED)
    done = events.decode(pubsub.get_message(timeout=5)["data"])
    assert done.kind == events.Kind.DONE and done.body["error"] == EXPIRED
    assert done.body["expired"] is True
    assert redis_client.zcard(keys.waiting()) == 0
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == []
    assert waits.store.reply(waiting, {"json": {}}) == (Reply.ENDED, None)
    pubsub.close()


def test_a_wait_not_yet_due_is_left_alone(redis_client, keys):
    waits, _ = _waiting(redis_client, keys, wait_till=now_ms() + 60_000)
    assert waits.due() == []
    assert waits.store.get("e1").status == Status.WAITING


def test_stopping_a_waiting_execution_cancels_it_and_frees_its_session(redis_client, keys):
    _waiting(redis_client, keys)
    stopped = request_stop(ExecutionStore(redis_client, keys), "e1")
    assert stopped.status == Status.CANCELED
    assert stopped.error == "The execution was stopped while it waited for a reply."
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == []
