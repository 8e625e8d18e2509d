"""The execution lifecycle as a state machine (hypothesis), on a real Redis and on the reference
store (tests/core/reference_store.py), each driven through its steps and a probe
(tests/core/store_probes.py): random interleavings of arrivals, claims (duplicated, and
retried), chunks' end, waits, replies, lost leases and queue times, reaps and stops, from two
workers and the api, keep the invariants:

- one runner per execution: between two `new` periods, one claim wins (its retry is the same
  claim);
- session order: an execution is claimed only when every earlier one of its session ended;
- a finished execution stays as it ended (a worker declared lost writes nothing more);
- no turn lost: the first unfinished execution of a session is always the one whose turn it is;
- a reply is never lost: every message handed to an unfinished execution is taken by a wait,
  comes back with its end, or its execution was canceled or crashed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from core import liveness
from core.execution_outcomes import Reply
from core.execution_record import ExecutionRecord, Status
from tests.core.store_probes import RedisProbe, ReferenceProbe, StoreProbe

WORKERS = ("w1", "w2")
SESSIONS = ("s1", "s2")


class Lifecycle(RuleBasedStateMachine):
    """`open_probe` gives a fresh store and its probe (one Redis or the reference here; a
    cluster's in tests/scale/test_cluster.py)."""

    executions = Bundle("executions")
    open_probe: Callable[[], StoreProbe]

    def __init__(self) -> None:
        super().__init__()
        self.probe = type(self).open_probe()
        self.store = self.probe.store
        self.order: dict[str, list[str]] = {s: [] for s in SESSIONS}  # arrival order
        self.tasks: dict[str, ExecutionRecord] = {}  # what each execution's latest task carries
        self.running: dict[str, ExecutionRecord] = {}  # what its runner holds
        self.claims: dict[str, int] = {}  # claims won in the current `new` period
        self.finished: dict[str, Status] = {}  # how each execution ended, when first seen
        self.sent: dict[str, list[str]] = {}  # replies handed to each execution
        self.taken: dict[str, list[str]] = {}  # ...and taken by its waits or its end
        self.tokens: dict[str, list[str]] = {}  # every claim a worker made on each execution
        self.counter = 0

    def teardown(self) -> None:
        self.probe.close()

    # --- the api ----------------------------------------------------------------------------
    @rule(target=executions, session=st.sampled_from(SESSIONS))
    def arrive(self, session):
        self.counter += 1
        record = ExecutionRecord(f"e{self.counter}", "wf", session_id=session, queued_at=1)
        self.store.create(record)
        self.order[session].append(record.id)
        self.tasks[record.id] = record
        self.claims[record.id] = 0
        self.sent[record.id], self.taken[record.id] = [], []
        return record.id

    @rule(execution=executions, text=st.sampled_from(["hi", "Ada", "\ud800"]))
    def reply(self, execution, text):
        record = self.store.get(execution)
        outcome, queued = self.store.reply(record, {"json": {"chatInput": text}})
        if record.finished:
            assert outcome == Reply.ENDED
            return
        if outcome == Reply.RESUMED:
            self.tasks[execution] = queued  # the task that continues it carries this record
            self.claims[execution] = 0
            self.taken[execution].append(text)  # the resume task carries it to the engine
        if outcome != Reply.ENDED:
            self.sent[execution].append(text)

    @rule(execution=executions)
    def stop(self, execution):
        self.probe.stop(execution)

    # --- workers ----------------------------------------------------------------------------
    @rule(
        execution=executions,
        worker=st.sampled_from(WORKERS),
        retry=st.booleans(),
        at_turn=st.booleans(),
    )
    def claim(self, execution, worker, retry, at_turn):
        """A worker took the task (perhaps a duplicate delivery): its turn, then the claim; or
        both in one step (`claim_at_turn`, one Redis only)."""
        task = self.tasks[execution]
        line = self.store.lines.key(task)
        token = f"{worker}x{self.counter}"
        self.counter += 1
        running = task.next(status=Status.RUNNING, claim=token)
        self.tokens.setdefault(execution, []).append(token)
        if at_turn and not self.store.cluster:
            claimed, turn = self.store.claim_at_turn(task, running, line)
            if not turn.mine:
                assert not claimed
                return
        else:
            if not self.store.lines.turn(execution, line).mine:
                return
            claimed = self.store.claim(task, running)
        if claimed:
            earlier = self.order[task.session_id][: self.order[task.session_id].index(execution)]
            assert all(e in self.finished for e in earlier), "claimed out of its session's order"
            self.claims[execution] += 1
            assert self.claims[execution] == 1, "two claims won one `new` period"
            self.running[execution] = running
            if retry and at_turn and not self.store.cluster:
                again, _ = self.store.claim_at_turn(task, running, line)
                assert again, "a retried claim is the same claim"
            elif retry:
                assert self.store.claim(task, running), "a retried claim is the same claim"

    @rule(execution=executions, retry=st.booleans())
    def pause(self, execution, retry):
        running = self.running.get(execution)
        if running is None:
            return
        waiting = running.next(status=Status.WAITING)
        attempt = uuid.uuid4().hex
        outcome, reply = self.store.pause(running, waiting, "{}", attempt)
        if retry:
            assert self.store.pause(running, waiting, "{}", attempt) == (outcome, reply)
        if outcome == "reply":
            self.taken[execution].append(json.loads(reply)["json"]["chatInput"])
        elif outcome == "paused":
            del self.running[execution]
        else:
            del self.running[execution]  # stopped being its: reaped while it ran

    @rule(
        execution=executions,
        status=st.sampled_from([Status.SUCCESS, Status.ERROR]),
        retry=st.booleans(),
    )
    def finish(self, execution, status, retry):
        running = self.running.pop(execution, None)
        if running is None:
            return
        final = running.next(status=status)
        ended = self.store.finish(running, final, "")
        if ended.written:
            self.taken[execution] += [json.loads(r)["json"]["chatInput"] for r in ended.leftovers]
        if retry:
            assert self.store.finish(running, final, "").outcome in ("already", "refused")

    @rule(execution=executions, pick=st.integers(min_value=0, max_value=3))
    def renew(self, execution, pick):
        """A worker's heartbeat renews what it held when it looked, perhaps no longer its."""
        tokens = self.tokens.get(execution)
        if tokens:
            self.probe.renew(execution, tokens[pick % len(tokens)])

    # --- faults -----------------------------------------------------------------------------
    @rule(execution=executions)
    def lose_lease(self, execution):
        """Its worker died (or stopped renewing)."""
        self.probe.lose_lease(execution)

    @rule(execution=executions)
    def queue_time_runs_out(self, execution):
        self.probe.run_out_of_queue_time(execution)

    @rule(execution=executions)
    def reap(self, execution):
        self.store.reap(execution)
        self.store.reap(execution)  # the loss confirmed (CONFIRM_MS is 0 here)

    # --- invariants -------------------------------------------------------------------------
    @invariant()
    def finished_stays_finished_and_no_turn_is_lost(self):
        for ids in self.order.values():
            first_unfinished = None
            for execution_id in ids:
                record = self.store.get(execution_id)
                if record.finished:
                    ended = self.finished.setdefault(execution_id, record.status)
                    assert record.status == ended, "a finished execution was ended again"
                else:
                    assert execution_id not in self.finished, "a finished execution came back"
                    first_unfinished = first_unfinished or record
            if first_unfinished is not None:
                line = self.store.lines.key(first_unfinished)
                assert self.store.lines.turn(first_unfinished.id, line).mine, "a turn was lost"

    @invariant()
    def only_a_new_or_running_execution_holds_a_lease(self):
        for execution_id in self.tokens:
            if self.store.get(execution_id).status in (Status.NEW, Status.RUNNING):
                continue
            assert self.probe.lease(execution_id) is None, execution_id
            assert execution_id not in self.probe.running_ids(), execution_id

    @invariant()
    def no_reply_is_lost(self):
        for execution_id, sent in self.sent.items():
            record = self.store.get(execution_id)
            if record.status in (Status.CANCELED, Status.CRASHED):
                continue
            queued = [json.loads(r)["json"]["chatInput"] for r in self.probe.replies(execution_id)]
            assert sorted(self.taken[execution_id] + queued) == sorted(sent), execution_id


SETTINGS = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def run_machine(open_probe: Callable[[], StoreProbe], monkeypatch, **changes) -> None:
    monkeypatch.setattr(liveness, "CONFIRM_MS", 0)
    monkeypatch.setattr(Lifecycle, "open_probe", staticmethod(open_probe), raising=False)
    run_state_machine_as_test(Lifecycle, settings=settings(SETTINGS, **changes))


def test_the_lifecycle_keeps_its_invariants_on_the_reference_store(monkeypatch):
    run_machine(lambda: ReferenceProbe(queue_timeout_seconds=300), monkeypatch)


@pytest.mark.slow  # the reference's run above stands for it in `make test-fast`
def test_the_lifecycle_keeps_its_invariants_on_one_redis(redis_url, monkeypatch):
    run_machine(
        lambda: RedisProbe(
            redis.Redis.from_url(redis_url, decode_responses=True), queue_timeout_seconds=300
        ),
        monkeypatch,
    )
