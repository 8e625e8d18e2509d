"""Every transition of core/executions.py against a real Redis: each is one compare-and-set step
that does the rest of its work with it, and a retried step does nothing twice."""

from __future__ import annotations

import json

import pytest

from core import events, liveness
from core.execution_outcomes import Claimed, NotSubscribed, Reply
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.memory_turns import TurnWrite
from core.results import FinalResult
from core.session_line import Turn
from core.stops import request_stop


@pytest.fixture
def store(redis_client, keys):
    return ExecutionStore(redis_client, keys, queue_timeout_seconds=300, lease_seconds=5)


@pytest.fixture
def instant_confirm(monkeypatch):
    """A loss needs two sightings CONFIRM_MS apart: none, here."""
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)


def new(
    store: ExecutionStore, execution_id: str = "e1", session: str | None = "s1"
) -> ExecutionRecord:
    record = ExecutionRecord(execution_id, "w1", session_id=session, created_at=1, queued_at=1,
                             response_mode="responseNodes")  # fmt: skip
    store.create(record)
    return record


def claimed(store: ExecutionStore, record: ExecutionRecord, token: str = "t1") -> ExecutionRecord:
    running = record.next(status=Status.RUNNING, claim=token)
    assert store.claim(record, running)
    return running


def subscribed(redis_client, channel: str):
    pubsub = redis_client.pubsub()
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    return pubsub


def test_a_new_execution_waits_in_the_queue_for_the_queue_timeout_and_in_its_line(
    store, keys, redis_client
):
    new(store)
    assert store.get("e1").status == Status.NEW
    assert 299_000 < redis_client.pttl(keys.execution_queued("e1")) <= 300_000
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]
    assert redis_client.zscore(keys.queued(), "e1") is not None


def test_a_claim_takes_the_lease_once_and_a_retry_of_it_is_still_the_same_claim(
    store, keys, redis_client
):
    record = new(store)
    running = claimed(store, record, "t1")
    assert redis_client.get(keys.execution_lease("e1")) == "t1"
    assert not redis_client.exists(keys.execution_queued("e1"))
    assert store.claim(record, running)  # the same claim, retried after a timeout
    assert not store.claim(record, record.next(status=Status.RUNNING, claim="t2"))  # a duplicate
    assert store.get("e1") == running


def test_a_claim_says_whether_a_stop_was_asked_for_before_it(store, keys, redis_client):
    """The worker starts a stopped execution canceled at once, without a read of its own."""
    plain = new(store, "e1", session=None)
    assert store.claim(plain, plain.next(status=Status.RUNNING, claim="t1")) == Claimed.CLAIMED
    asked = new(store, "e2", session=None)
    redis_client.set(keys.execution_stop("e2"), "1")  # asked while its task was in the queue
    running = asked.next(status=Status.RUNNING, claim="t2")
    assert store.claim(asked, running) == Claimed.STOP_ASKED
    assert store.claim(asked, running) == Claimed.STOP_ASKED  # the retried claim says so too
    assert store.claim(asked, asked.next(status=Status.RUNNING, claim="t3")) == Claimed.NOT


def test_the_end_records_the_outcome_and_publishes_the_final_event_in_one_step(
    store, keys, redis_client
):
    running = claimed(store, new(store))
    pubsub = subscribed(redis_client, keys.execution_events("e1"))
    final = running.next(status=Status.SUCCESS, events=1)
    event = events.encode(events.done(FinalResult(Status.SUCCESS).to_json(), 0))
    assert store.finish(running, final, event).outcome == "ok"
    assert pubsub.get_message(timeout=5)["data"] == event
    assert store.get("e1") == final
    assert not redis_client.exists(keys.execution_lease("e1"))
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == []
    # Retried after a timeout whose command did run: nothing twice.
    assert store.finish(running, final, event).outcome == "already"
    assert pubsub.get_message(timeout=0.2) is None
    pubsub.close()


def test_an_end_hands_the_session_turn_to_the_next_message(store, keys, redis_client):
    running = claimed(store, new(store, "e1"))
    new(store, "e2")
    assert not store.lines.turn("e2", keys.session_queue("w1", "s1")).mine
    store.finish(running, running.next(status=Status.SUCCESS), "")
    assert redis_client.lpop(keys.execution_turn("e2")) == "1"  # woken
    assert store.lines.turn("e2", keys.session_queue("w1", "s1")).mine


def test_a_worker_declared_lost_can_no_longer_end_its_execution_nor_write_its_memory_turn(
    store, keys, redis_client, instant_confirm
):
    running = claimed(store, new(store))
    redis_client.delete(keys.execution_lease("e1"))  # its renewals did not reach Redis
    store.reap("e1")
    assert store.reap("e1").status == Status.CRASHED
    final = running.next(status=Status.SUCCESS)
    turn = TurnWrite(keys.chat("s1"), ['{"type":"human"}', '{"type":"ai"}'], 0)
    assert store.finish(running, final, "", turns=[turn]).outcome == "refused"
    assert store.get("e1").status == Status.CRASHED
    assert not redis_client.exists(keys.chat("s1"))


def test_the_end_writes_the_runs_memory_turns_in_its_step_once(store, keys, redis_client):
    running = claimed(store, new(store))
    final = running.next(status=Status.SUCCESS)
    turns = [
        TurnWrite(keys.chat("s1"), ['{"n":1}', '{"n":2}'], 0),
        TurnWrite(keys.chat("s2"), ['{"n":3}'], 60),
    ]
    assert store.finish(running, final, "", turns=turns).outcome == "ok"
    assert store.finish(running, final, "", turns=turns).outcome == "already"  # a retry
    assert redis_client.lrange(keys.chat("s1"), 0, -1) == ['{"n":2}', '{"n":1}']
    assert redis_client.lrange(keys.chat("s2"), 0, -1) == ['{"n":3}']
    assert redis_client.ttl(keys.chat("s1")) == -1
    assert 0 < redis_client.ttl(keys.chat("s2")) <= 60


def test_a_wait_writes_the_runs_memory_turns_once_and_a_stop_that_overtook_it_none(
    store, keys, redis_client
):
    running = claimed(store, new(store))
    waiting = running.next(status=Status.WAITING)
    turn = TurnWrite(keys.chat("s1"), ['{"n":1}'], 0)
    redis_client.set(keys.execution_stop("e1"), "1")
    assert store.pause(running, waiting, "{}", "a1", [turn])[0] == "stopped"
    assert not redis_client.exists(keys.chat("s1"))
    redis_client.delete(keys.execution_stop("e1"))
    assert store.pause(running, waiting, "{}", "a2", [turn])[0] == "paused"
    assert store.pause(running, waiting, "{}", "a2", [turn])[0] == "paused"  # a retry
    assert redis_client.lrange(keys.chat("s1"), 0, -1) == ['{"n":1}']


def test_a_lost_running_execution_is_ended_only_once_its_loss_is_confirmed(
    store, keys, redis_client, monkeypatch
):
    running = claimed(store, new(store))
    new(store, "e2")
    pubsub = subscribed(redis_client, keys.execution_events("e1"))
    redis_client.delete(keys.execution_lease("e1"))
    monkeypatch.setattr(liveness, "CONFIRM_MS", 60_000)
    assert store.reap("e1") == running  # seen lost once: a suspect, nothing ended
    assert redis_client.exists(keys.execution_suspect("e1"))
    redis_client.set(keys.execution_lease("e1"), "t1")  # it renewed after all
    assert store.reap("e1") == running
    assert not redis_client.exists(keys.execution_suspect("e1"))
    redis_client.delete(keys.execution_lease("e1"))
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    store.reap("e1")
    crashed = store.reap("e1")
    assert crashed.status == Status.CRASHED
    assert (
        crashed.error
        == "The worker running this execution was lost (it stopped renewing its lease)."
    )
    done = events.decode(pubsub.get_message(timeout=5)["data"])
    assert done.kind == events.Kind.DONE and done.body["status"] == "crashed"
    assert redis_client.lpop(keys.execution_turn("e2")) == "1"
    pubsub.close()


def test_a_new_execution_no_worker_took_is_ended_after_its_queue_time(
    store, keys, redis_client, instant_confirm
):
    new(store)
    redis_client.delete(keys.execution_queued("e1"))  # its queue time ran out
    store.reap("e1")
    record = store.reap("e1")
    assert record.status == Status.CRASHED
    assert record.error == "No worker started this execution within 300 s."


def test_a_new_execution_held_by_a_worker_for_its_turn_is_alive_while_that_worker_is(
    store, keys, redis_client, instant_confirm
):
    new(store)
    LeaseStore(redis_client, keys, 5).hold("e1", "t1")
    assert not redis_client.exists(keys.execution_queued("e1"))
    assert store.reap("e1").status == Status.NEW
    redis_client.delete(keys.execution_lease("e1"))  # that worker is gone
    store.reap("e1")
    assert store.reap("e1").status == Status.CRASHED


def test_a_message_before_the_chat_node_waits_is_its_reply_and_the_run_goes_on(store, keys):
    record = new(store)
    reply = {"json": {"chatInput": "Ada"}}
    assert store.reply(record, reply) == (Reply.QUEUED, None)
    running = claimed(store, record)
    waiting = running.next(status=Status.WAITING)
    assert store.pause(running, waiting, "{}", "a1") == (
        "reply",
        json.dumps(reply, separators=(",", ":")),
    )
    # The same pause retried (its answer was lost): the same reply, not a lost one.
    assert store.pause(running, waiting, "{}", "a1")[0] == "reply"
    assert store.get("e1").status == Status.RUNNING
    assert store.pause(running, waiting, "{}", "a2") == ("paused", None)
    assert store.pause(running, waiting, "{}", "a2") == ("paused", None)
    assert store.get("e1") == waiting


def test_a_message_to_a_waiting_execution_resumes_it_once(store, keys, redis_client):
    running = claimed(store, new(store))
    waiting = running.next(status=Status.WAITING, wait_till=10**13)
    assert store.pause(running, waiting, '{"engine":{}}', "a1") == ("paused", None)
    assert redis_client.zscore(keys.waiting(), "e1") == 10**13
    outcome, queued = store.reply(waiting, {"json": {"chatInput": "Ada"}})
    assert (
        outcome == Reply.RESUMED and queued.status == Status.NEW and queued.rev == waiting.rev + 1
    )
    assert store.get("e1") == queued
    assert redis_client.exists(keys.execution_queued("e1"))
    assert redis_client.zscore(keys.waiting(), "e1") is None
    # A second message, built from the same waiting record: the next reply, queued.
    assert store.reply(waiting, {"json": {"chatInput": "again"}}) == (Reply.QUEUED, None)
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]


def test_a_message_to_a_finished_execution_is_refused(store):
    running = claimed(store, new(store))
    store.finish(running, running.next(status=Status.SUCCESS), "")
    assert store.reply(running, {"json": {}}) == (Reply.ENDED, None)


def test_replies_an_execution_never_took_come_back_with_its_end(store):
    record = new(store)
    store.reply(record, {"json": {"chatInput": "one"}})
    store.reply(record, {"json": {"chatInput": "two"}})
    running = claimed(store, record)
    ended = store.finish(running, running.next(status=Status.SUCCESS), "")
    assert [json.loads(r)["json"]["chatInput"] for r in ended.leftovers] == ["one", "two"]


def test_a_stop_cancels_what_does_not_run_and_tells_its_stream(store, keys, redis_client):
    record = new(store)
    pubsub = subscribed(redis_client, keys.execution_events("e1"))
    assert request_stop(store, "e1").status == Status.CANCELED
    done = events.decode(pubsub.get_message(timeout=5)["data"])
    assert done.body == {
        "status": "canceled",
        "error": "The execution was stopped before it started.",
    }
    assert not store.claim(record, record.next(status=Status.RUNNING, claim="t1"))
    pubsub.close()


def test_a_stop_of_a_running_execution_tells_its_worker(store, keys, redis_client):
    claimed(store, new(store))
    pubsub = subscribed(redis_client, keys.stop_channel())
    assert request_stop(store, "e1").status == Status.RUNNING
    assert pubsub.get_message(timeout=5)["data"] == "e1"
    assert redis_client.exists(keys.execution_stop("e1"))
    pubsub.close()


def test_a_record_holding_any_text_goes_through_every_script(store):
    odd = ExecutionRecord(
        "e1", "w1", session_id="s1", error="\ud800 \"'\\", run_data={"\udfff": [{"x": "}" * 50}]}
    )
    store.create(odd)
    running = claimed(store, odd)
    waiting = running.next(status=Status.WAITING, waiting_node="\ud800")
    assert store.pause(running, waiting, "{}", "a1") == ("paused", None)
    outcome, queued = store.reply(waiting, {"json": {"chatInput": "\ud800"}})
    assert outcome == Reply.RESUMED
    running = claimed(store, queued, "t2")
    assert store.finish(running, running.next(status=Status.SUCCESS), "").outcome == "ok"
    assert store.get("e1").error == odd.error


def test_an_end_with_replies_left_over_starts_the_sessions_next_execution_in_the_same_step(
    store, keys, redis_client
):
    record = new(store)
    for text in ("one", "two", "three"):
        store.reply(record, {"json": {"chatInput": text}})
    running = claimed(store, record)
    pubsub = subscribed(redis_client, keys.execution_events("e1"))
    successor = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
    final = running.next(status=Status.SUCCESS)
    event = events.encode(events.done(FinalResult(Status.SUCCESS).to_json(), 0))
    ended = store.finish(running, final, event, successor)
    assert ended.outcome == "ok" and ended.successor == successor
    assert [json.loads(r)["json"]["chatInput"] for r in ended.leftovers] == ["one", "two", "three"]
    # In its place at once: a message now is its reply, never a third execution.
    assert store.get("e2") == successor
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e2"]
    assert redis_client.lpop(keys.execution_turn("e2")) == "1"
    queued = [
        json.loads(r)["json"]["chatInput"]
        for r in redis_client.lrange(keys.execution_replies("e2"), 0, -1)
    ]
    assert queued == ["two", "three"]
    assert store.reply(successor, {"json": {"chatInput": "four"}}) == (Reply.QUEUED, None)
    done = events.decode(pubsub.get_message(timeout=5)["data"])
    assert done.kind == events.Kind.DONE and done.body["continues"] is True
    follow = events.decode(pubsub.get_message(timeout=5)["data"])
    assert follow.kind == events.Kind.NEXT and follow.body == {"executionId": "e2"}
    # The end retried after its answer was lost: the same successor, and its first message.
    again = store.finish(running, final, event, successor)
    assert again.outcome == "already" and again.successor == successor
    assert [json.loads(r)["json"]["chatInput"] for r in again.leftovers] == ["one"]
    pubsub.close()


def test_a_conversation_is_joined_not_started_while_its_session_has_one_unfinished(
    store, keys, redis_client
):
    """Two messages at once to a responseNodes chat: the second create finds the first's
    conversation in the same step, starts nothing and names it (its message is that one's
    reply)."""
    first = new(store, "e1")  # responseNodes, session s1
    second = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
    assert store.create(second, join=True) == "e1"
    assert store.get("e2") is None
    assert redis_client.lrange(keys.session_queue("w1", "s1"), 0, -1) == ["e1"]
    running = claimed(store, first)
    store.pause(running, running.next(status=Status.WAITING), "{}", "a1")
    assert store.create(second, join=True) == "e1"  # waiting: still unfinished
    assert store.get("e1").status == Status.WAITING
    store.cancel(store.get("e1"), "stopped")
    assert store.create(second, join=True) is None  # finished: the message starts the next
    assert store.get("e2").status == Status.NEW


def test_a_create_waits_for_a_subscriber_to_its_channel_and_writes_nothing_before(
    store, keys, redis_client
):
    """The api sends its SUBSCRIBE and the create without waiting in between: the task must
    not be queued before Redis holds the subscription, so a create that overtook it writes
    nothing (no record, no index, no line, no task) and says so."""
    record = ExecutionRecord("e1", "w1", session_id="s1", response_mode="streaming")
    channel = keys.execution_events("e1")
    task = (keys.prefix + "queue", b"the task")
    with pytest.raises(NotSubscribed):
        store.create(record, task=task, channel=channel)
    assert sorted(redis_client.scan_iter(match=keys.prefix + "*")) == []
    pubsub = redis_client.pubsub()
    pubsub.subscribe(channel)
    assert store.create(record, task=task, channel=channel) is None
    assert store.get("e1").status == Status.NEW
    assert redis_client.lrange(keys.prefix + "queue", 0, -1) == ["the task"]
    pubsub.close()


def test_only_a_conversation_is_joined(store, keys):
    new(store, "e1")  # a conversation is unfinished in s1
    streaming = ExecutionRecord("e2", "w1", session_id="s1", response_mode="streaming")
    assert store.create(streaming) is None  # no join asked: it waits its turn in the line
    lone = ExecutionRecord("e3", "w1", session_id="s2", response_mode="responseNodes")
    assert store.create(lone, join=True) is None  # another session
    plain = ExecutionRecord("e4", "w1", response_mode="responseNodes")
    assert store.create(plain, join=True) is None  # no session, no line


def test_a_claim_at_its_turn_claims_the_head_of_its_line_in_one_step(store, keys, redis_client):
    line = keys.session_queue("w1", "s1")
    first, second = new(store, "e1"), new(store, "e2")
    ahead = second.next(status=Status.RUNNING, claim="t2")
    assert store.claim_at_turn(second, ahead, line) == (Claimed.NOT, Turn(False))  # e1 is alive
    assert store.get("e2").status == Status.NEW and not redis_client.exists(
        keys.execution_lease("e2")
    )
    running = first.next(status=Status.RUNNING, claim="t1")
    assert store.claim_at_turn(first, running, line) == (Claimed.CLAIMED, Turn(True))
    assert store.claim_at_turn(first, running, line) == (Claimed.CLAIMED, Turn(True))  # a retry
    assert redis_client.get(keys.execution_lease("e1")) == "t1"
    store.finish(running, running.next(status=Status.SUCCESS), "")
    redis_client.set(keys.execution_stop("e2"), "1")
    assert store.claim_at_turn(second, ahead, line) == (Claimed.STOP_ASKED, Turn(True))


def test_a_claim_at_its_turn_names_a_lost_head_and_drops_ended_ones(
    store, keys, redis_client, instant_confirm
):
    line = keys.session_queue("w1", "s1")
    lost, behind = new(store, "e1"), new(store, "e2")
    claimed(store, lost, "t1")
    redis_client.delete(keys.execution_lease("e1"))  # its worker is gone
    running = behind.next(status=Status.RUNNING, claim="t2")
    assert store.claim_at_turn(behind, running, line) == (Claimed.NOT, Turn(False, "e1"))
    redis_client.delete(keys.execution("e1"))  # gone altogether: dropped on the way
    assert store.claim_at_turn(behind, running, line) == (Claimed.CLAIMED, Turn(True))
    assert redis_client.lrange(line, 0, -1) == ["e2"]
