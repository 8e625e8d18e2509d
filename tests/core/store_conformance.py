"""The outcome of every step of an execution's lifecycle, which every execution store must give:
the Redis store (core/executions.py) and the reference (tests/core/reference_store.py).

A store's test class inherits `StoreConformance` and provides a `probe` fixture
(tests/core/store_probes.py) holding a fresh, empty store with a queue timeout of 300 s that
collects the events it publishes (see test_store_conformance.py).
"""

from __future__ import annotations

import json

import pytest

from core import events, liveness
from core.execution_outcomes import Claimed, Reply
from core.execution_record import ExecutionRecord, Status
from core.memory_turns import TurnWrite
from core.results import FinalResult
from core.session_line import Turn
from tests.core.store_probes import StoreProbe

SUCCESS = events.encode(events.done(FinalResult(Status.SUCCESS).to_json(), 0))


def new(probe: StoreProbe, execution_id: str = "e1", session: str | None = "s1") -> ExecutionRecord:
    record = ExecutionRecord(execution_id, "w1", session_id=session, created_at=1, queued_at=1,
                             response_mode="responseNodes")  # fmt: skip
    assert probe.store.create(record) is None
    return record


def claimed(probe: StoreProbe, record: ExecutionRecord, token: str = "t1") -> ExecutionRecord:
    running = record.next(status=Status.RUNNING, claim=token)
    assert probe.store.claim(record, running) == Claimed.CLAIMED
    return running


def waiting(probe: StoreProbe, running: ExecutionRecord, **changes) -> ExecutionRecord:
    paused = running.next(status=Status.WAITING, **changes)
    assert probe.store.pause(running, paused, "{}", "a0") == ("paused", None)
    return paused


def lost(probe: StoreProbe, execution_id: str) -> ExecutionRecord:
    """Nothing keeps it alive any more (its worker is gone, its queue time ran out), and a
    reaper confirmed it (CONFIRM_MS is 0)."""
    probe.lose_lease(execution_id)
    probe.run_out_of_queue_time(execution_id)
    probe.store.reap(execution_id)
    crashed = probe.store.reap(execution_id)
    assert crashed.status == Status.CRASHED
    return crashed


def chat(text: str) -> dict:
    return {"json": {"chatInput": text}}


def texts(replies: list[str]) -> list[str]:
    return [json.loads(r)["json"]["chatInput"] for r in replies]


class StoreConformance:
    @pytest.fixture
    def instant_confirm(self, monkeypatch):
        """A loss needs two sightings CONFIRM_MS apart: none, here."""
        monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
        monkeypatch.setattr(liveness, "GONE_CONFIRM_MS", 0)

    # --- create and claim ---------------------------------------------------------------------
    def test_a_new_execution_waits_in_the_queue_and_in_its_sessions_line(self, probe):
        record = new(probe)
        assert probe.store.get("e1") == record
        assert probe.queued("e1") and probe.lease("e1") is None
        assert probe.line(record) == ["e1"]
        assert probe.store.list("w1") == [record]
        assert probe.store.verdicts(["e1"]) == {"e1": (record, liveness.Verdict.ALIVE)}

    def test_items_too_large_for_the_task_are_kept_beside_the_record_until_its_end(self, probe):
        record = ExecutionRecord("e1", "w1")
        probe.store.create(record, items=b'[{"json":{"n":1}}]')
        assert probe.store.stored_items("e1") == [{"json": {"n": 1}}]
        running = claimed(probe, record)
        probe.store.finish(running, running.next(status=Status.SUCCESS), "")
        assert probe.store.stored_items("e1") is None

    def test_a_claim_takes_the_lease_once_and_a_retry_of_it_is_the_same_claim(self, probe):
        record = new(probe)
        running = claimed(probe, record, "t1")
        assert probe.lease("e1") == "t1" and not probe.queued("e1")
        assert "e1" in probe.running_ids()
        assert probe.store.claim(record, running) == Claimed.CLAIMED  # retried after a timeout
        duplicate = record.next(status=Status.RUNNING, claim="t2")
        assert probe.store.claim(record, duplicate) == Claimed.NOT
        assert probe.store.get("e1") == running and probe.lease("e1") == "t1"

    def test_a_claim_says_whether_a_stop_was_asked_for_before_it(self, probe):
        plain = new(probe, "e1", session=None)
        assert probe.store.claim(plain, plain.next(status=Status.RUNNING, claim="t1"))
        asked = new(probe, "e2", session=None)
        probe.mark_stop("e2")
        running = asked.next(status=Status.RUNNING, claim="t2")
        assert probe.store.claim(asked, running) == Claimed.STOP_ASKED
        assert probe.store.claim(asked, running) == Claimed.STOP_ASKED  # its retry says so too

    def test_a_claim_built_from_an_older_revision_is_refused(self, probe):
        record = new(probe)
        running = claimed(probe, record)
        paused = waiting(probe, running)
        outcome, queued = probe.store.reply(paused, chat("Ada"))
        assert outcome == Reply.RESUMED
        # The first task, delivered again: its record is two writes behind.
        assert probe.store.claim(record, record.next(status=Status.RUNNING, claim="t9")) == 0
        assert probe.store.claim(queued, queued.next(status=Status.RUNNING, claim="t2"))

    # --- the session's line -------------------------------------------------------------------
    def test_only_the_head_of_a_line_is_claimed_at_its_turn_and_a_retry_is_the_same(self, probe):
        first, second = new(probe, "e1"), new(probe, "e2")
        line = probe.store.lines.key(first)
        behind = second.next(status=Status.RUNNING, claim="t2")
        assert probe.store.claim_at_turn(second, behind, line) == (Claimed.NOT, Turn(False))
        assert probe.store.get("e2") == second and probe.lease("e2") is None
        running = first.next(status=Status.RUNNING, claim="t1")
        assert probe.store.claim_at_turn(first, running, line) == (Claimed.CLAIMED, Turn(True))
        assert probe.store.claim_at_turn(first, running, line) == (Claimed.CLAIMED, Turn(True))
        assert probe.lease("e1") == "t1"

    def test_the_next_in_a_line_has_its_turn_only_once_the_head_ended(self, probe):
        first, second = new(probe, "e1"), new(probe, "e2")
        line = probe.store.lines.key(first)
        running = claimed(probe, first)
        paused = waiting(probe, running)
        assert not probe.store.lines.turn("e2", line).mine  # a waiting head keeps its place
        _, queued = probe.store.reply(paused, chat("Ada"))
        running = claimed(probe, queued, "t2")
        assert not probe.store.lines.turn("e2", line).mine
        assert not probe.woken("e2")
        probe.store.finish(running, running.next(status=Status.SUCCESS), "")
        assert probe.woken("e2")
        assert probe.store.lines.turn("e2", line).mine
        assert probe.line(second) == ["e2"]

    def test_a_turn_names_a_lost_head_and_drops_heads_that_are_gone(self, probe, instant_confirm):
        head, behind = new(probe, "e1"), new(probe, "e2")
        line = probe.store.lines.key(head)
        claimed(probe, head, "t1")
        probe.lose_lease("e1")
        running = behind.next(status=Status.RUNNING, claim="t2")
        assert probe.store.claim_at_turn(behind, running, line) == (Claimed.NOT, Turn(False, "e1"))
        probe.expire("e1")
        assert probe.store.claim_at_turn(behind, running, line) == (Claimed.CLAIMED, Turn(True))
        assert probe.line(behind) == ["e2"]

    def test_a_conversation_is_joined_while_its_session_has_one_unfinished(self, probe):
        first = new(probe, "e1")
        second = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
        assert probe.store.create(second, join=True) == "e1"
        assert probe.store.get("e2") is None and probe.line(first) == ["e1"]
        waiting(probe, claimed(probe, first))
        assert probe.store.create(second, join=True) == "e1"  # waiting: still unfinished
        probe.store.cancel(probe.store.get("e1"), "stopped")
        assert probe.store.create(second, join=True) is None
        streaming = ExecutionRecord("e3", "w1", session_id="s1", response_mode="streaming")
        assert probe.store.create(streaming) is None  # no join asked: it waits its turn
        assert probe.line(first) == ["e2", "e3"]

    # --- the end ------------------------------------------------------------------------------
    def test_the_end_records_the_outcome_and_publishes_the_final_event_once(self, probe):
        record = new(probe)
        running = claimed(probe, record)
        final = running.next(status=Status.SUCCESS, events=1)
        assert probe.store.finish(running, final, SUCCESS).outcome == "ok"
        assert probe.events("e1") == [events.decode(SUCCESS)]
        assert probe.store.get("e1") == final
        assert probe.lease("e1") is None and "e1" not in probe.running_ids()
        assert probe.line(record) == []
        assert probe.store.finish(running, final, SUCCESS).outcome == "already"  # a retry
        assert probe.events("e1") == []
        assert probe.store.finished("e1")

    def test_the_end_writes_the_runs_memory_turns_once(self, probe):
        running = claimed(probe, new(probe))
        turn = TurnWrite(probe.memory_key("s1"), ['{"n":1}', '{"n":2}'], 0)
        final = running.next(status=Status.SUCCESS)
        assert probe.store.finish(running, final, "", turns=[turn]).outcome == "ok"
        assert probe.store.finish(running, final, "", turns=[turn]).outcome == "already"
        assert probe.memory(probe.memory_key("s1")) == ['{"n":2}', '{"n":1}']

    def test_replies_an_execution_never_took_come_back_with_its_end(self, probe):
        record = new(probe)
        probe.store.reply(record, chat("one"))
        probe.store.reply(record, chat("two"))
        running = claimed(probe, record)
        ended = probe.store.finish(running, running.next(status=Status.SUCCESS), "")
        assert texts(ended.leftovers) == ["one", "two"] and ended.successor is None
        assert probe.replies("e1") == []

    def test_the_successor_starts_in_the_end_of_its_head_with_the_replies_left_over(self, probe):
        record = new(probe)
        new(probe, "e3", session="s2")  # another session's line is not touched
        new(probe, "e4")  # behind it in its line: the successor goes ahead of it
        for text in ("one", "two", "three"):
            probe.store.reply(record, chat(text))
        running = claimed(probe, record)
        successor = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
        final = running.next(status=Status.SUCCESS)
        ended = probe.store.finish(running, final, SUCCESS, successor)
        assert ended.outcome == "ok" and ended.successor == successor
        assert texts(ended.leftovers) == ["one", "two", "three"]
        assert probe.store.get("e2") == successor and probe.queued("e2")
        assert probe.line(successor) == ["e2", "e4"] and probe.woken("e2")
        assert texts(probe.replies("e2")) == ["two", "three"]
        done, follow = probe.events("e1")
        assert done.kind == events.Kind.DONE and done.body["continues"] is True
        assert follow.kind == events.Kind.NEXT and follow.body == {"executionId": "e2"}
        again = probe.store.finish(running, final, SUCCESS, successor)  # its answer was lost
        assert again.outcome == "already" and again.successor == successor
        assert texts(again.leftovers) == ["one"]
        assert probe.line(probe.store.get("e3")) == ["e3"]

    def test_no_successor_starts_without_replies_left_over(self, probe):
        running = claimed(probe, new(probe))
        successor = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
        ended = probe.store.finish(running, running.next(status=Status.SUCCESS), "", successor)
        assert ended.outcome == "ok" and ended.successor is None
        assert probe.store.get("e2") is None

    # --- the fence ----------------------------------------------------------------------------
    def test_a_claim_declared_lost_is_refused_by_every_later_step(self, probe, instant_confirm):
        record = new(probe)
        probe.store.reply(record, chat("early"))
        running = claimed(probe, record, "t1")
        lost(probe, "e1")
        probe.events("e1")
        paused = running.next(status=Status.WAITING)
        turn = TurnWrite(probe.memory_key("s1"), ['{"n":1}'], 0)
        assert probe.store.pause(running, paused, "{}", "a1", [turn]) == ("refused", None)
        probe.renew("e1", "t1")
        assert probe.lease("e1") is None  # a late heartbeat brings nothing back
        assert probe.store.claim(record, running) == Claimed.NOT  # nor does a retried claim
        successor = ExecutionRecord("e2", "w1", session_id="s1", response_mode="responseNodes")
        final = running.next(status=Status.SUCCESS)
        assert probe.store.finish(running, final, SUCCESS, successor, [turn]).outcome == "refused"
        assert probe.store.get("e1").status == Status.CRASHED
        assert probe.store.get("e2") is None and probe.events("e1") == []
        assert probe.memory(probe.memory_key("s1")) == []
        assert texts(probe.replies("e1")) == ["early"]  # a reap leaves them where they were

    def test_a_reaped_execution_stays_crashed(self, probe, instant_confirm):
        record = new(probe)
        crashed = lost(probe, "e1")
        assert crashed.error == "No worker started this execution within 300 s."
        assert probe.store.reap("e1") == crashed
        assert not probe.store.cancel(record, "stopped")
        assert not probe.store.fail_start(record, "no broker")
        assert probe.store.reply(record, chat("hi")) == (Reply.ENDED, None)
        assert probe.store.claim(record, record.next(status=Status.RUNNING, claim="t1")) == 0
        assert probe.store.get("e1") == crashed

    def test_a_lost_running_execution_is_ended_only_once_its_loss_is_confirmed(
        self, probe, monkeypatch
    ):
        running = claimed(probe, new(probe))
        new(probe, "e2")
        probe.lose_lease("e1")
        monkeypatch.setattr(liveness, "CONFIRM_MS", 60_000)
        assert probe.store.reap("e1") == running  # seen lost once: a suspect, nothing ended
        assert probe.suspected("e1")
        assert probe.store.reap("e1") == running  # seen again too soon
        probe.renew("e1", "t1")  # its worker's heartbeat got through after all
        assert probe.store.reap("e1") == running and not probe.suspected("e1")
        probe.lose_lease("e1")
        monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
        probe.store.reap("e1")
        crashed = probe.store.reap("e1")
        assert crashed.status == Status.CRASHED
        assert crashed.error == (
            "The worker running this execution was lost (it stopped renewing its lease)."
        )
        (done,) = probe.events("e1")
        assert done.kind == events.Kind.DONE and done.body["status"] == "crashed"
        assert probe.woken("e2")

    def test_a_lease_naming_a_connection_that_is_gone_holds_nothing(self, probe, instant_confirm):
        record = new(probe, session=None)
        probe.store.claim(record, record.next(status=Status.RUNNING, claim="t1"), "t1@c1")
        assert probe.store.reap("e1", gone="c2").status == Status.RUNNING  # another's
        assert not probe.suspected("e1")
        probe.store.reap("e1", gone="c1")
        crashed = probe.store.reap("e1", gone="c1")
        assert crashed.error == "The worker running this execution died (its process is gone)."

    def test_a_new_execution_held_for_its_turn_is_alive_while_its_holder_is(
        self, probe, instant_confirm
    ):
        new(probe)
        probe.hold("e1", "t1")
        assert not probe.queued("e1")
        probe.renew("e1", "t1")
        probe.store.reap("e1")
        assert probe.store.reap("e1").status == Status.NEW
        probe.lose_lease("e1")
        probe.store.reap("e1")
        assert probe.store.reap("e1").status == Status.CRASHED

    def test_a_lease_is_renewed_only_while_the_execution_is_its_holders(self, probe):
        record = new(probe)
        probe.renew("e1", "t1")  # not claimed yet, nor held
        assert probe.lease("e1") is None
        running = claimed(probe, record, "t1")
        probe.renew("e1", "t2")  # another worker's token
        assert probe.lease("e1") == "t1"
        waiting(probe, running)
        probe.renew("e1", "t1")  # the heartbeat crossed the wait
        assert probe.lease("e1") is None

    # --- waits and replies --------------------------------------------------------------------
    def test_a_message_before_the_wait_is_its_reply_and_a_retried_pause_gets_it_again(self, probe):
        record = new(probe)
        assert probe.store.reply(record, chat("Ada")) == (Reply.QUEUED, None)
        running = claimed(probe, record)
        paused = running.next(status=Status.WAITING)
        outcome, reply = probe.store.pause(running, paused, "{}", "a1")
        assert outcome == "reply" and texts([reply]) == ["Ada"]
        assert probe.store.pause(running, paused, "{}", "a1") == ("reply", reply)  # a retry
        assert probe.store.get("e1") == running
        assert probe.store.pause(running, paused, "{}", "a2") == ("paused", None)
        assert probe.store.pause(running, paused, "{}", "a2") == ("paused", None)
        assert probe.store.get("e1") == paused and probe.lease("e1") is None

    def test_a_waiting_execution_is_resumed_once_by_a_reply_to_its_wait(self, probe):
        running = claimed(probe, new(probe))
        paused = waiting(probe, running, wait_till=10**13)
        assert probe.waiting_deadline("e1") == 10**13
        outcome, queued = probe.store.reply(paused, chat("Ada"))
        assert outcome == Reply.RESUMED
        assert queued.status == Status.NEW and queued.rev == paused.rev + 1
        assert probe.store.get("e1") == queued and probe.queued("e1")
        assert probe.waiting_deadline("e1") is None
        # A second message built from the same wait: the next reply, never a second resume.
        assert probe.store.reply(paused, chat("again")) == (Reply.QUEUED, None)
        assert probe.store.resume_expired(paused) is None
        assert probe.store.get("e1") == queued

    def test_a_wait_that_takes_no_reply_leaves_chat_messages_for_the_next_chat_node(self, probe):
        record = new(probe)
        assert probe.store.reply(record, chat("early")) == (Reply.QUEUED, None)
        running = claimed(probe, record)
        paused = running.next(status=Status.WAITING, wait_for="time", wait_till=10**13)
        assert probe.store.pause(running, paused, "{}", "a1", take_reply=False) == ("paused", None)
        assert texts(probe.replies("e1")) == ["early"]
        # A chat message while a Wait node waits is queued too: its time or its URL resumes it.
        assert probe.store.reply(paused, chat("meanwhile")) == (Reply.QUEUED, None)
        assert probe.store.get("e1") == paused
        queued = probe.store.resume_expired(paused)
        assert (queued.status, queued.wait_for) == (Status.NEW, None)
        running = claimed(probe, queued, "t2")
        outcome, reply = probe.store.pause(running, running.next(status=Status.WAITING), "{}", "b1")
        assert outcome == "reply" and texts([reply]) == ["early"]  # the Chat node's, in order
        assert texts(probe.replies("e1")) == ["meanwhile"]

    def test_a_chat_message_resumes_a_chat_nodes_wait(self, probe):
        running = claimed(probe, new(probe))
        paused = waiting(probe, running, wait_for="reply")
        assert probe.store.reply(paused, chat("Ada"))[0] == Reply.RESUMED

    def test_a_click_that_only_a_wait_takes_is_refused_by_an_execution_that_does_not_wait(
        self, probe
    ):
        record = new(probe)
        assert probe.store.reply(record, chat("yes"), queue=False) == (Reply.NOT_WAITING, None)
        running = claimed(probe, record)
        assert probe.store.reply(running, chat("yes"), queue=False) == (Reply.NOT_WAITING, None)
        assert probe.replies("e1") == []
        paused = waiting(probe, running)
        assert probe.store.reply(paused, chat("yes"), queue=False)[0] == Reply.RESUMED

    def test_a_reply_built_from_an_earlier_wait_resumes_the_wait_of_now(self, probe):
        running = claimed(probe, new(probe))
        first = waiting(probe, running)
        _, queued = probe.store.reply(first, chat("one"))
        running = claimed(probe, queued, "t2")
        second = running.next(status=Status.WAITING, waiting_node="Chat 2")
        assert probe.store.pause(running, second, "{}", "b1") == ("paused", None)
        outcome, resumed = probe.store.reply(first, chat("two"))
        assert outcome == Reply.RESUMED and resumed.waiting_node == "Chat 2"
        assert resumed.rev == second.rev + 1

    def test_an_expired_wait_goes_on_without_a_reply_or_ends(self, probe):
        running = claimed(probe, new(probe))
        paused = waiting(probe, running)
        queued = probe.store.resume_expired(paused)
        assert queued.status == Status.NEW and probe.store.get("e1") == queued
        running = claimed(probe, queued, "t2")
        paused = waiting(probe, running)
        final = paused.next(status=Status.ERROR, error="no reply in time")
        result = FinalResult(Status.ERROR, "no reply in time")
        assert not probe.store.end_wait(running, final, result)  # not from a stale record
        assert probe.store.end_wait(paused, final, result)
        assert probe.store.get("e1") == final
        assert probe.events("e1")[-1].body == {"status": "error", "error": "no reply in time"}

    def test_a_message_to_a_finished_execution_is_refused(self, probe):
        running = claimed(probe, new(probe))
        probe.store.finish(running, running.next(status=Status.SUCCESS), "")
        assert probe.store.reply(running, chat("late")) == (Reply.ENDED, None)

    # --- stops, cancels and failed starts -----------------------------------------------------
    def test_a_stop_cancels_what_does_not_run_and_tells_its_stream(self, probe):
        record = new(probe)
        new(probe, "e2")
        probe.stop("e1")
        assert probe.store.get("e1").status == Status.CANCELED
        (done,) = probe.events("e1")
        assert done.body == {
            "status": "canceled",
            "error": "The execution was stopped before it started.",
        }
        assert not probe.store.claim(record, record.next(status=Status.RUNNING, claim="t1"))
        assert probe.woken("e2")

    def test_a_stop_of_a_running_execution_is_its_workers_to_act_on(self, probe):
        record = new(probe)
        running = claimed(probe, record)
        probe.stop("e1")
        assert probe.store.get("e1") == running
        assert not probe.store.cancel(running, "stopped")  # only its worker ends it
        paused = running.next(status=Status.WAITING)
        assert probe.store.pause(running, paused, "{}", "a1") == ("stopped", None)
        assert probe.store.claim(record, running) == Claimed.STOP_ASKED  # a retried claim

    def test_a_waiting_execution_is_canceled_at_once(self, probe):
        paused = waiting(probe, claimed(probe, new(probe)))
        probe.stop("e1")
        canceled = probe.store.get("e1")
        assert canceled.status == Status.CANCELED
        assert canceled.error == "The execution was stopped while it waited for a reply."
        assert probe.store.reply(paused, chat("late")) == (Reply.ENDED, None)

    def test_a_failed_start_ends_only_a_new_execution(self, probe):
        record = new(probe)
        running = claimed(probe, record)
        assert not probe.store.fail_start(record, "no broker")
        other = new(probe, "e2", session=None)
        assert probe.store.fail_start(other, "no broker")
        assert probe.store.get("e2").error == "no broker"
        assert probe.store.get("e1") == running

    def test_a_record_holding_any_text_goes_through_every_step(self, probe):
        odd = ExecutionRecord(
            "e1", "w1", session_id="s1", error="\ud800 \"'\\", run_data={"\udfff": [{"x": "}"}]}
        )
        probe.store.create(odd)
        running = claimed(probe, odd)
        paused = waiting(probe, running, waiting_node="\ud800")
        outcome, queued = probe.store.reply(paused, chat("\ud800"))
        assert outcome == Reply.RESUMED
        running = claimed(probe, queued, "t2")
        assert probe.store.finish(running, running.next(status=Status.SUCCESS), "").written
        assert probe.store.get("e1").error == odd.error
