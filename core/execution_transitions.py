"""Every transition of an execution record but the reaper's: create (the api), claim, pause and
finish (a worker), reply, cancel and a failed start (the api), each one script (or, in a
cluster, the execution's slot's script and then steps of their own: core/executions.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core import end_script, events, execution_scripts, liveness
from core.clock import now_ms
from core.end_script import EndCall
from core.execution_outcomes import Claimed, Ended, EndRequest, NotSubscribed, Reply, RouteChanged
from core.execution_queries import ExecutionQueries
from core.execution_record import ExecutionRecord, Status
from core.execution_scripts import (
    ClaimAtTurnCall,
    ClaimCall,
    CreateCall,
    PauseCall,
    ReplyCall,
    own_keys,
)
from core.jsontext import dumps
from core.keys import history_member
from core.memory_turns import TurnWrite, append_turns
from core.redis_clients import publish_command, script
from core.results import FinalResult
from core.session_line import Turn

if TYPE_CHECKING:
    from core.workflow_store import RouteCheck


class ExecutionTransitions(ExecutionQueries):
    def __init__(self, client, keys, ttl_seconds: int = 7 * 24 * 3600, **limits: float):
        super().__init__(client, keys, ttl_seconds, **limits)
        self._create = script(client, execution_scripts.CREATE)
        self._claim = script(client, execution_scripts.CLAIM)
        self._claim_at_turn = script(client, execution_scripts.CLAIM_AT_TURN)
        self._end = script(client, end_script.END)
        self._pause = client.register_script(execution_scripts.PAUSE)
        self._reply = client.register_script(execution_scripts.REPLY)

    def load_scripts(self) -> None:
        """Have Redis hold the Lua scripts now, so no execution pays for a NOSCRIPT round trip
        (in a cluster, SCRIPT LOAD goes to every primary)."""
        scripts = (self._create, self._claim, self._claim_at_turn, self._end, self._pause,
                   self._reply)  # fmt: skip
        for each in scripts:
            self.client.script_load(each.script)
        self.lines.load_scripts()

    # --- the api's steps ------------------------------------------------------------------
    def create(
        self,
        record: ExecutionRecord,
        items: bytes | None = None,
        task: tuple[str, bytes] | None = None,
        join: bool = False,
        route: RouteCheck | None = None,
        channel: str = "",
    ) -> str | None:
        """Store a `new` record, waiting in the broker's queue for at most the queue timeout,
        and take a place in its session's line; `items`: its first items as JSON, when too large
        for the task's message (core/task.py). `task`: (queue, message) when the broker is this
        Redis (worker/celery_app.py `redis_message`): the task is enqueued in the same
        transaction, so no execution is ever recorded without its task, nor the reverse.
        `join` (a conversation, responseNodes): if its session has an unfinished conversation
        already, nothing is created and that one's id is answered (in a cluster, decided in the
        step in the session's slot: core/session_line.py `enter`). `route`: the route the
        api remembered, checked in the same step; RouteChanged (nothing created) if stale.
        `channel`: the execution's events' channel, which must have a subscriber before the
        task is enqueued; NotSubscribed (nothing created) if it has none yet."""
        if self.cluster:
            if task is not None:
                raise ValueError("a cluster cannot be the broker: its tasks go through Celery")
            return self._create_in_steps(record, items, join)
        call = self._create_call(record, items, task, join, route, channel)
        created = self._create(keys=call.keys(), args=call.args())
        if created == 0:
            raise RouteChanged(route.field if route is not None else "")
        if created == -1:
            raise NotSubscribed(channel)
        return None if created == 1 else _text(created)

    def _create_call(
        self,
        record: ExecutionRecord,
        items: bytes | None,
        task: tuple[str, bytes] | None,
        join: bool,
        route: RouteCheck | None,
        channel: str,
    ) -> CreateCall:
        execution_id, keys = record.id, self.keys
        line = self.lines.key(record)
        queue, message = task if task is not None else (keys.queued(), b"")
        head, tail = keys.execution("\0").split("\0")
        now = now_ms()
        return CreateCall(
            **own_keys(keys, CreateCall, execution_id),
            queued_index=keys.queued(),
            workflow_index=keys.workflow_executions(record.workflow_id),
            line_key=line or keys.queued(),  # not touched without a line
            task_queue=queue,
            history_index=keys.executions_history(),
            webhooks_key=None if route is None else keys.webhooks(),
            workflow_key=None if route is None else keys.workflow(route.workflow_id),
            record=record.encode(),
            ttl=self.ttl,
            queue_timeout_ms=self.queue_timeout_ms,
            execution_id=execution_id,
            queue_deadline=now + self.queue_timeout_ms,
            now=now,
            items=items or b"",
            in_line=int(bool(line)),
            task=message,
            join=int(join),
            record_key_head=head,
            record_key_tail=tail,
            channel=channel,
            history_member=history_member(execution_id, record.workflow_id),
            route_field=None if route is None else route.field,
            route_workflow_id=None if route is None else route.workflow_id,
            route_digest=None if route is None else route.digest,
        )

    def _create_in_steps(
        self, record: ExecutionRecord, items: bytes | None, join: bool
    ) -> str | None:
        """`create` on a cluster: the record's slot first (a line's head with no record is
        dropped as gone), then its place in the session's line, in the line's slot, where a
        conversation may find it is to join the session's unfinished one instead (then the
        record goes again, and that one's id is answered), then the indexes."""
        execution_id = record.id
        created = [self.keys.execution(execution_id), self.keys.execution_queued(execution_id),
                    self.keys.execution_items(execution_id)]  # fmt: skip
        own = self.client.pipeline(transaction=False)
        own.set(created[0], record.encode(), ex=self.ttl)
        own.set(created[1], "1", px=self.queue_timeout_ms)
        if items is not None:
            own.set(created[2], items, ex=self.ttl)
        own.execute()
        line = self.lines.key(record)
        if line:
            joined = self.lines.enter(line, record, self.ttl, join, self.finished)
            if joined is not None:
                self.client.delete(*created)  # one slot: the record never started
                return joined
        own = self.client.pipeline(transaction=False)
        own.zadd(self.keys.queued(), {execution_id: now_ms() + self.queue_timeout_ms})
        own.zadd(self.keys.workflow_executions(record.workflow_id), {execution_id: now_ms()})
        own.expire(self.keys.workflow_executions(record.workflow_id), self.ttl)
        member = history_member(execution_id, record.workflow_id)
        own.zadd(self.keys.executions_history(), {member: now_ms()})
        own.execute()
        return None

    def fail_start(self, record: ExecutionRecord, error: str) -> bool:
        """A `new` execution whose task could not be sent: failed at once (it would otherwise
        hold its session's line until the queue timeout)."""
        failed = record.next(status=Status.ERROR, error=error, stopped_at=now_ms())
        result = FinalResult(Status.ERROR, error)
        return self.end(EndRequest(record, failed, frozenset({Status.NEW}), result)).written

    def reply(
        self, record: ExecutionRecord, reply: dict[str, Any], *, queue: bool = True
    ) -> tuple[Reply, ExecutionRecord | None]:
        """Hand a chat message to an unfinished execution of its session: queued as its next
        reply, or, when it waits for a reply (a Chat node), the reply it resumes with (then the
        `new` record to enqueue); a Wait node's wait it leaves alone, queued for the next Chat
        node. Without `queue`, only a waiting execution takes it, whatever it waits for: an
        approval button's click, a Wait node's resume URL, a deadline."""
        while True:
            queued = record.next(status=Status.NEW, queued_at=now_ms(), wait_till=None,
                                 wait_for=None)  # fmt: skip
            resumes = not queue or record.wait_for in (None, "reply")
            call = self._reply_call(record, queued, reply, queue, resumes)
            outcome = self._reply(keys=call.keys(), args=call.args())
            if outcome == "stale":  # it waited again meanwhile (a later Chat node)
                current = self.get(record.id)
                if current is None:
                    return Reply.ENDED, None
                record = current
                continue
            if outcome == Reply.RESUMED and self.cluster:
                pipe = self.client.pipeline(transaction=False)
                pipe.zadd(self.keys.queued(), {record.id: call.queue_deadline})
                pipe.zrem(self.keys.waiting(), record.id)
                pipe.execute()
            return Reply(outcome), queued if outcome == Reply.RESUMED else None

    def _reply_call(
        self, record: ExecutionRecord, queued: ExecutionRecord, reply: dict[str, Any], queue: bool,
        resumes: bool = True,
    ) -> ReplyCall:  # fmt: skip
        execution_id, keys = record.id, self.keys
        return ReplyCall(
            **own_keys(keys, ReplyCall, execution_id),
            queued_index=None if self.cluster else keys.queued(),
            waiting_index=None if self.cluster else keys.waiting(),
            reply=dumps(reply),
            expected_rev=record.rev,
            queued_record=queued.encode(),
            ttl=self.ttl,
            queue_timeout_ms=self.queue_timeout_ms,
            execution_id=execution_id,
            queue_deadline=now_ms() + self.queue_timeout_ms,
            may_queue=int(queue),
            may_resume=int(resumes),
        )

    def resume_expired(self, record: ExecutionRecord) -> ExecutionRecord | None:
        """A wait whose time limit passed goes on without a reply, as n8n's does: `waiting ->
        new`, the record to enqueue; None if it stopped waiting meanwhile."""
        outcome, queued = self.reply(record, {}, queue=False)
        return queued if outcome == Reply.RESUMED else None

    def cancel(self, record: ExecutionRecord, why: str) -> bool:
        """Stop an execution that is not running (`new` or `waiting`): canceled, and its
        stream told at once."""
        canceled = record.next(status=Status.CANCELED, error=why, stopped_at=now_ms())
        result = FinalResult(Status.CANCELED, why)
        allowed = frozenset({Status.NEW, Status.WAITING})
        return self.end(EndRequest(record, canceled, allowed, result)).written

    # --- a worker's steps -----------------------------------------------------------------
    def claim(self, record: ExecutionRecord, running: ExecutionRecord, lease: str = "") -> Claimed:
        """`new -> running` with this worker's lease (its value `lease`, by default the claim
        token), if the record is still the `record` the task carried (same revision); claimed
        again for a retry of this very claim. Whether a stop was asked for already comes with
        it (falsy: not claimed)."""
        call = self._claim_call(record, running, lease)
        claimed = Claimed(self._claim(keys=call.keys(), args=call.args()))
        if claimed and self.cluster:
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(self.keys.running(), {record.id: call.lease_deadline})
            pipe.zrem(self.keys.queued(), record.id)
            pipe.execute()
        return claimed

    def _claim_call(
        self, record: ExecutionRecord, running: ExecutionRecord, lease: str
    ) -> ClaimCall:
        """The claim's KEYS and ARGV (the indexes too, on one Redis)."""
        return ClaimCall(**self._claim_fields(record, running, lease))

    def _claim_fields(
        self, record: ExecutionRecord, running: ExecutionRecord, lease: str
    ) -> dict[str, Any]:
        execution_id, keys = record.id, self.keys
        return dict(
            **own_keys(keys, ClaimCall, execution_id),
            running_index=None if self.cluster else keys.running(),
            queued_index=None if self.cluster else keys.queued(),
            expected_rev=record.rev,
            running_record=running.encode(),
            ttl=self.ttl,
            lease_ms=self.lease_ms,
            claim_token=running.claim,
            execution_id=execution_id,
            lease_deadline=now_ms() + self.lease_ms,
            lease_value=lease or running.claim,
        )

    def claim_at_turn(
        self, record: ExecutionRecord, running: ExecutionRecord, line: str, lease: str = ""
    ) -> tuple[Claimed, Turn]:
        """`claim`, if it is the execution's turn in its session's `line`: one step for the
        common case, where nothing is ahead of it (one Redis only; a cluster turns, then
        claims)."""
        fields = self._claim_fields(record, running, lease)
        call = ClaimAtTurnCall(**fields, line_key=line, halves=tuple(self.lines.key_halves()))
        mine, answer = self._claim_at_turn(keys=call.keys(), args=call.args())
        if not mine:
            return Claimed.NOT, Turn(False, _text(answer) or None)
        return Claimed(answer), Turn(True)

    def pause(
        self,
        running: ExecutionRecord,
        waiting: ExecutionRecord,
        resume_state: str,
        attempt: str,
        turns: Sequence[TurnWrite] = (),
        take_reply: bool = True,
    ) -> tuple[str, str | None]:
        """A Chat node waits: ("reply", the reply JSON) when one is already queued (the run goes
        on), ("paused", None) once recorded `waiting`, ("stopped", None) when a stop was asked
        for (it is to end canceled), ("refused", None) if it stopped being this worker's
        (reaped). `attempt` names this pause (letters and digits): a
        retry with the same one gets the same answer. Without `take_reply` (a Wait node) no
        queued reply ends the wait: they stay for the next Chat node."""
        execution_id = running.id
        call = self._pause_call(running, waiting, resume_state, attempt, take_reply)
        keys, args = call.keys(), call.args()
        append_turns(keys, args, turns, self.cluster)
        if self.cluster and waiting.wait_till is not None:
            # Before the wait is recorded: a wait whose deadline nobody knows would last forever.
            self.client.zadd(self.keys.waiting(), {execution_id: waiting.wait_till})
        outcome, *rest = self._pause(keys=keys, args=args)
        if outcome == "paused" and self.cluster:
            self.client.zrem(self.keys.running(), execution_id)
        return outcome, (rest[0] if rest else None)

    def _pause_call(
        self, running: ExecutionRecord, waiting: ExecutionRecord, resume_state: str, attempt: str,
        take_reply: bool = True,
    ) -> PauseCall:  # fmt: skip
        execution_id, keys = running.id, self.keys
        return PauseCall(
            **own_keys(keys, PauseCall, execution_id),
            running_index=None if self.cluster else keys.running(),
            waiting_index=None if self.cluster else keys.waiting(),
            claim_token=running.claim,
            waiting_record=waiting.encode(),
            ttl=self.ttl,
            resume_state=resume_state,
            wait_deadline="" if waiting.wait_till is None else waiting.wait_till,
            execution_id=execution_id,
            expected_rev=running.rev,
            attempt=attempt,
            take_reply=int(take_reply),
            turns_at="",
        )

    def end_wait(
        self, waiting: ExecutionRecord, final: ExecutionRecord, result: FinalResult
    ) -> bool:
        """End a waiting execution (its time limit passed), its stream told."""
        return self.end(EndRequest(waiting, final, frozenset({Status.WAITING}), result)).written

    def finish(
        self,
        running: ExecutionRecord,
        final: ExecutionRecord,
        event: str,
        successor: ExecutionRecord | None = None,
        turns: Sequence[TurnWrite] = (),
    ) -> Ended:
        """Record the outcome and publish the final event (`event`, '' when the outbox delivers
        it itself) in one step, with the run's memory `turns` (one Redis only: in a cluster
        they are other slots'). Refused once a reaper declared it lost: its stream was told
        so. `successor`: the session's next execution, started in the same step if replies
        were left over (one Redis only)."""
        allowed = frozenset({Status.RUNNING})
        return self.end(EndRequest(running, final, allowed, event=event, claim=running.claim,
                                   successor=successor, turns=turns))  # fmt: skip

    # --- the end, in one step -------------------------------------------------------------
    def end(self, request: EndRequest) -> Ended:
        """Write the final record, publish the final event, drop what kept it alive, and hand
        its session's turn on (core/end_script.py)."""
        execution_id = request.current.id
        if self.cluster:  # the successor's keys are in other slots: started in steps of its own
            request = replace(request, successor=None)
        call = self._end_call(request)
        keys, args = call.keys(), call.args()
        append_turns(keys, args, request.turns, self.cluster)
        outcome, started, *leftovers = self._end(keys=keys, args=args)
        if outcome == "ok" and self.cluster:
            pipe = self.client.pipeline(transaction=False)
            for index in (self.keys.running(), self.keys.queued(), self.keys.waiting()):
                pipe.zrem(index, execution_id)
            pipe.execute()
            line = self.lines.key(request.current)
            if line:
                self.lines.leave(line, execution_id)
        return Ended(outcome, leftovers, request.successor if started else None)

    def _end_call(self, request: EndRequest) -> EndCall:
        current, successor, keys = request.current, request.successor, self.keys
        execution_id = current.id
        event, continued = end_script.final_events(request.result, request.event, request.reap)
        head, tail = keys.execution_turn("\0").split("\0")
        now = now_ms()
        return EndCall(
            **self._end_keys(current, successor),
            expected_rev=current.rev,
            allowed=",".join(sorted(request.allowed)),
            final_record=request.final.encode(),
            ttl=self.ttl,
            final_event=event,
            publish=publish_command(self.client),
            claim_token=request.claim,
            reap=int(request.reap),
            execution_id=execution_id,
            turn_key_head=head,
            turn_key_tail=tail,
            confirm_ms=liveness.GONE_CONFIRM_MS if request.gone else liveness.CONFIRM_MS,
            successor_record="" if successor is None else successor.encode(),
            successor_id="" if successor is None else successor.id,
            queue_timeout_ms=self.queue_timeout_ms,
            now=now,
            queue_deadline=now + self.queue_timeout_ms,
            gone=request.gone,
            successor_member=""
            if successor is None
            else history_member(successor.id, successor.workflow_id),
            continued_event=continued,
            next_event=""
            if successor is None
            else events.encode(events.next_execution(successor.id)),
            turns_at="",
        )

    def _end_keys(
        self, current: ExecutionRecord, successor: ExecutionRecord | None
    ) -> dict[str, Any]:
        """The end's KEYS: the execution's own, then on one Redis the indexes and its line, and
        the successor's keys when it is to start in the same step."""
        execution_id, keys = current.id, self.keys
        own = own_keys(keys, EndCall, execution_id)
        if self.cluster:
            return own
        indexes = dict(
            running_index=keys.running(),
            queued_index=keys.queued(),
            waiting_index=keys.waiting(),
            line_key=self.lines.key(current) or "",
        )
        if successor is None:
            return {**own, **indexes}
        return {
            **own,
            **indexes,
            "successor_key": keys.execution(successor.id),
            "successor_queued_key": keys.execution_queued(successor.id),
            "successor_replies_key": keys.execution_replies(successor.id),
            "workflow_index": keys.workflow_executions(successor.workflow_id),
            "history_index": keys.executions_history(),
        }


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
