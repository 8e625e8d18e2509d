"""The execution store's lifecycle in plain Python: the reference the Redis store
(core/executions.py) is held to by tests/core/store_conformance.py, and the store the lifecycle
state machine (tests/core/test_lifecycle_machine.py) runs on without a Redis.

It has the same public methods with the same answers: create, claim (and claim at its turn),
pause, reply, cancel, a failed start, an expired wait, finish (starting the session's next
execution with the replies left over) and reap, with the reads. Where the rules are (create,
claim, the turn, pause, reply, and `end`, which every ending step goes through) each step is
what one of the Redis store's scripts does, written again as plain dict updates; the steps that
only build an end's request are the Redis store's own code. It plays the leases' part too
(core/leases.py `hold`, `renew`), which the steps read.

What it leaves out, being one process's memory: time to live (a queue time or a lease runs out
when a test says so: tests/core/store_probes.py), the broker, the webhooks a create may check
and the subscribers it may wait for (tests/core/test_executions.py covers those on Redis), and
a cluster's steps.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from core import end_script, events, liveness
from core.clock import now_ms
from core.execution_outcomes import Claimed, Ended, EndRequest, Reply
from core.execution_reaping import ExecutionReaping
from core.execution_record import ExecutionRecord, Status
from core.execution_transitions import ExecutionTransitions
from core.jsontext import dumps
from core.liveness import Verdict
from core.memory_turns import TurnWrite
from core.session_line import Turn

SUSPECT_MS = 60_000  # a sighting of a loss older than this is forgotten (the suspect key's TTL)


class ReferenceLines:
    """The sessions' lines (core/session_line.py): each session's executions in arrival order;
    the head's turn is its to run."""

    def __init__(self, store: ReferenceStore) -> None:
        self.store = store
        self.queues: dict[str, list[str]] = {}
        self.woken: Counter[str] = Counter()  # wake-ups sent to a new head, not yet taken

    def key(self, record: ExecutionRecord) -> str | None:
        if not record.session_id:
            return None
        return f"session:{record.workflow_id}:{record.session_id}"

    def head(self, line: str) -> str | None:
        queue = self.queues.get(line)
        return queue[0] if queue else None

    def turn(self, execution_id: str, line: str) -> Turn:
        """Its turn when it is the head; heads that ended (or are gone) are dropped on the way,
        a head that looks lost is named."""
        queue = self.queues.get(line, [])
        while queue and queue[0] != execution_id:
            verdict = self.store.liveness(queue[0])
            if verdict == Verdict.ALIVE:
                return Turn(False)
            if verdict == Verdict.LOST:
                return Turn(False, queue[0])
            queue.pop(0)
        return Turn(True)

    def join(self, line: str, execution_id: str) -> None:
        self.queues.setdefault(line, []).append(execution_id)

    def insert_after(self, line: str, ahead: str, execution_id: str) -> None:
        queue = self.queues.get(line, [])
        if ahead in queue:
            queue.insert(queue.index(ahead) + 1, execution_id)

    def leave(self, line: str, execution_id: str) -> None:
        """Leave the line and wake its new head."""
        queue = self.queues.get(line, [])
        if execution_id in queue:
            queue.remove(execution_id)
        if queue:
            self.woken[queue[0]] += 1


class ReferenceStore:
    """core/executions.py ExecutionStore's lifecycle over dicts. Records are kept encoded, as
    Redis keeps them, so a step compares and reads exactly what the scripts do."""

    cluster = False

    # The steps that only build an end's request (or a reply) are the Redis store's own code,
    # borrowed: the rules are in `end`, `reply` and the steps below, written again here.
    fail_start = ExecutionTransitions.fail_start
    cancel = ExecutionTransitions.cancel
    end_wait = ExecutionTransitions.end_wait
    finish = ExecutionTransitions.finish
    resume_expired = ExecutionTransitions.resume_expired
    reap = ExecutionReaping.reap
    lost_reason = ExecutionReaping.lost_reason

    def __init__(self, *, queue_timeout_seconds: float = 300.0, lease_seconds: float = 5.0):
        self.queue_timeout_ms = int(queue_timeout_seconds * 1000)
        self.lease_ms = int(lease_seconds * 1000)
        self.records: dict[str, str] = {}  # id -> the encoded record
        self.leases: dict[str, str] = {}  # id -> its lease: a token, perhaps `@` a connection
        self.queued: set[str] = set()  # in the broker's queue, its queue time not run out
        self.stops: set[str] = set()  # a stop was asked for while it ran
        self.replies: dict[str, list[str]] = {}  # replies (JSON) it has not taken yet
        self.taken: dict[str, str] = {}  # the reply a pause took: `<attempt>:<reply>`
        self.resume_states: dict[str, str] = {}
        self.suspects: dict[str, int] = {}  # when a loss was first seen (ms)
        self.first_messages: dict[str, str] = {}  # what its successor started with
        self.items: dict[str, bytes] = {}
        self.by_workflow: dict[str, dict[str, None]] = {}  # ids in the order they were indexed
        self.running_index: set[str] = set()  # where reapers look for leases
        self.waiting_index: dict[str, int] = {}  # id -> its wait's deadline (ms)
        self.published: list[tuple[str, str]] = []  # (execution id, event) on its channel
        self.memory: dict[str, list[str]] = {}  # memory list -> its elements, newest first
        self.tasks: list[tuple[str, bytes]] = []
        self.lines = ReferenceLines(self)

    # --- reads ------------------------------------------------------------------------------
    def get(self, execution_id: str) -> ExecutionRecord | None:
        raw = self.records.get(execution_id)
        return None if raw is None else ExecutionRecord.decode(raw)

    def list(self, workflow_id: str, limit: int = 50) -> list[ExecutionRecord]:
        ids = list(reversed(self.by_workflow.get(workflow_id, {})))[:limit]
        return [r for r in map(self.get, ids) if r is not None]

    def stored_items(self, execution_id: str) -> list[dict[str, Any]] | None:
        raw = self.items.get(execution_id)
        return None if raw is None else json.loads(raw)

    def finished(self, execution_id: str) -> bool:
        record = self.get(execution_id)
        return record is None or record.finished

    def liveness(self, execution_id: str) -> Verdict:
        record = self.get(execution_id)
        status = None if record is None else record.status
        return liveness.judge(status, execution_id in self.leases, execution_id in self.queued)

    def verdicts(
        self, execution_ids: list[str]
    ) -> dict[str, tuple[ExecutionRecord | None, Verdict]]:
        return {i: (self.get(i), self.liveness(i)) for i in execution_ids}

    def _header(self, execution_id: str) -> tuple[Status | None, int, str]:
        record = self.get(execution_id)
        return (None, -1, "") if record is None else (record.status, record.rev, record.claim)

    # --- the api's steps ----------------------------------------------------------------------
    def create(self, record: ExecutionRecord, items: bytes | None = None,
               task: tuple[str, bytes] | None = None, join: bool = False, route: Any = None,
               channel: str = "") -> str | None:  # fmt: skip
        if route is not None or channel:
            raise NotImplementedError("the reference has no webhooks and no subscribers")
        line = self.lines.key(record)
        if join and line:
            for other in self.lines.queues.get(line, []):
                found = self.get(other)
                if found and not found.finished and found.response_mode == "responseNodes":
                    return other
        self.records[record.id] = record.encode()
        self.queued.add(record.id)
        if items:
            self.items[record.id] = items
        self._index(record)
        if line:
            self.lines.join(line, record.id)
        if task is not None and task[1]:
            self.tasks.append(task)
        return None

    def _index(self, record: ExecutionRecord) -> None:
        indexed = self.by_workflow.setdefault(record.workflow_id, {})
        indexed.pop(record.id, None)
        indexed[record.id] = None

    def reply(
        self, record: ExecutionRecord, reply: dict[str, Any], *, queue: bool = True
    ) -> tuple[Reply, ExecutionRecord | None]:
        execution_id = record.id
        while True:
            status, rev, _ = self._header(execution_id)
            if status in (Status.NEW, Status.RUNNING):
                if not queue:
                    return Reply.NOT_WAITING, None
                self.replies.setdefault(execution_id, []).append(dumps(reply))
                return Reply.QUEUED, None
            if status != Status.WAITING:
                return Reply.ENDED, None
            if rev == record.rev:
                break
            record = self.get(execution_id)  # type: ignore[assignment]  # it waited again
        if queue and record.wait_for not in (None, "reply"):  # a Wait node's: for a Chat node
            self.replies.setdefault(execution_id, []).append(dumps(reply))
            return Reply.QUEUED, None
        queued = record.next(status=Status.NEW, queued_at=now_ms(), wait_till=None, wait_for=None)
        self.records[execution_id] = queued.encode()
        self.queued.add(execution_id)
        self.waiting_index.pop(execution_id, None)
        return Reply.RESUMED, queued

    # --- a worker's steps ---------------------------------------------------------------------
    def claim(self, record: ExecutionRecord, running: ExecutionRecord, lease: str = "") -> Claimed:
        execution_id = record.id
        status, rev, claim = self._header(execution_id)
        if status == Status.RUNNING and claim == running.claim:  # a retry of this very claim
            self.leases[execution_id] = lease or running.claim
            return self._claimed(execution_id)
        if status != Status.NEW or rev != record.rev:
            return Claimed.NOT
        self.records[execution_id] = running.encode()
        self.leases[execution_id] = lease or running.claim
        self.queued.discard(execution_id)
        self.running_index.add(execution_id)
        return self._claimed(execution_id)

    def _claimed(self, execution_id: str) -> Claimed:
        return Claimed.STOP_ASKED if execution_id in self.stops else Claimed.CLAIMED

    def claim_at_turn(
        self, record: ExecutionRecord, running: ExecutionRecord, line: str, lease: str = ""
    ) -> tuple[Claimed, Turn]:
        turn = self.lines.turn(record.id, line)
        if not turn.mine:
            return Claimed.NOT, turn
        return self.claim(record, running, lease), turn

    def hold(self, execution_id: str, token: str) -> None:
        """core/leases.py `hold`: a worker holds the task while it waits for its turn."""
        self.leases[execution_id] = token
        self.queued.discard(execution_id)
        self.running_index.add(execution_id)

    def renew(self, execution_id: str, token: str) -> None:
        """core/leases.py `renew`: only while the execution is still this token's."""
        status, _, claim = self._header(execution_id)
        held = self.leases.get(execution_id)
        mine = status == Status.RUNNING and claim == token
        holding = status == Status.NEW and held is not None
        if mine or (holding and (held == token or held.startswith(token + "@"))):
            self.leases[execution_id] = token

    def pause(self, running: ExecutionRecord, waiting: ExecutionRecord, resume_state: str,
              attempt: str, turns: Sequence[TurnWrite] = (),
              take_reply: bool = True) -> tuple[str, str | None]:  # fmt: skip
        execution_id = running.id
        status, rev, claim = self._header(execution_id)
        if claim != running.claim:
            return "refused", None
        if status == Status.WAITING and self.records[execution_id] == waiting.encode():
            return "paused", None  # a retry of this very pause
        mark = attempt + ":"
        taken = self.taken.get(execution_id, "")
        if taken.startswith(mark):
            return "reply", taken[len(mark) :]
        if status != Status.RUNNING:
            return "refused", None
        if execution_id in self.stops:
            return "stopped", None
        if take_reply and self.replies.get(execution_id):
            reply = self.replies[execution_id].pop(0)
            self.taken[execution_id] = mark + reply
            self._write_turns(turns)
            return "reply", reply
        if rev != running.rev:
            return "refused", None
        self._write_turns(turns)
        self.records[execution_id] = waiting.encode()
        self.resume_states[execution_id] = resume_state
        self.leases.pop(execution_id, None)
        self.running_index.discard(execution_id)
        if waiting.wait_till is not None:
            self.waiting_index[execution_id] = waiting.wait_till
        return "paused", None

    # --- the end ------------------------------------------------------------------------------
    def end(self, request: EndRequest) -> Ended:
        """core/end_script.py: the final record, its final event, what kept it alive dropped,
        the session's turn handed on, the next execution started with the replies left over."""
        current, execution_id = request.current, request.current.id
        status, rev, claim = self._header(execution_id)
        mine = request.claim != "" and claim == request.claim
        if mine and rev == current.rev + 1 and self.records[execution_id] == request.final.encode():
            return self._already(request)
        if request.reap:
            verdict = self._judge_loss(execution_id, status, rev == current.rev, request.gone)
            if verdict != "lost":
                return Ended(verdict)
        elif rev != current.rev or status not in request.allowed:
            return Ended("refused")  # an execution declared lost stays lost: its worker is fenced
        self.records[execution_id] = request.final.encode()
        for kept in (self.leases, self.suspects, self.resume_states, self.taken, self.items):
            kept.pop(execution_id, None)
        self.queued.discard(execution_id)
        self._write_turns(request.turns)
        # A reap leaves the replies for its worker, should that worker finish it after all.
        leftovers = [] if request.reap else self.replies.pop(execution_id, [])
        started = request.successor if leftovers else None
        if started is not None:
            self._start_successor(current, started, leftovers)
        self._publish_end(request, leftovers, started)
        self.running_index.discard(execution_id)
        self.waiting_index.pop(execution_id, None)
        line = self.lines.key(current)
        if line:
            self.lines.leave(line, execution_id)
        return Ended("ok", leftovers, started)

    def _already(self, request: EndRequest) -> Ended:
        """The end retried after its answer was lost: what it did, and nothing twice."""
        first = self.first_messages.get(request.current.id)
        if first is None:
            return Ended("already")
        return Ended("already", [first], request.successor)

    def _judge_loss(self, execution_id: str, status: Status | None, same: bool, gone: str) -> str:
        """A reap's verdict: 'lost' once seen lost twice, `confirm_ms` apart."""
        if not same:
            return "refused"
        lease = self.leases.get(execution_id)
        if lease is not None and gone and lease.endswith("@" + gone):
            lease = None  # it names a connection that is gone: its process died
        verdict = liveness.judge(status, lease is not None, execution_id in self.queued)
        if verdict == Verdict.ALIVE:
            self.suspects.pop(execution_id, None)
            return "alive"
        if verdict != Verdict.LOST:
            return "refused"
        now, since = now_ms(), self.suspects.get(execution_id)
        if since is None or now - since >= SUSPECT_MS:
            self.suspects[execution_id] = now
            return "suspect"
        confirm_ms = liveness.GONE_CONFIRM_MS if gone else liveness.CONFIRM_MS
        return "suspect" if now - since < confirm_ms else "lost"

    def _start_successor(
        self, current: ExecutionRecord, successor: ExecutionRecord, leftovers: list[str]
    ) -> None:
        """The session's next execution, in its place at once: its first message is the first
        reply left over, the others are its replies already."""
        self.records[successor.id] = successor.encode()
        self.queued.add(successor.id)
        self.replies.setdefault(successor.id, []).extend(leftovers[1:])
        self._index(successor)
        line = self.lines.key(current)
        if line:
            self.lines.insert_after(line, current.id, successor.id)
        self.first_messages[current.id] = leftovers[0]

    def _publish_end(
        self, request: EndRequest, leftovers: list[str], started: ExecutionRecord | None
    ) -> None:
        final, continued = end_script.final_events(request.result, request.event, request.reap)
        if not final:
            return
        execution_id = request.current.id
        self.published.append((execution_id, continued if leftovers else final))
        if started is not None:
            self.published.append((execution_id, events.encode(events.next_execution(started.id))))

    def _write_turns(self, turns: Sequence[TurnWrite]) -> None:
        for turn in turns:
            self.memory[turn.key] = list(reversed(turn.elements)) + self.memory.get(turn.key, [])
