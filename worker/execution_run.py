"""Running one execution on a worker: wait for the session's turn, claim it (`new -> running`),
run the engine with hooks that publish to the execution's channel, and end it.

The claim is what makes delivery at most once (core/executions.py): a redelivered or duplicated
task, or one whose execution was stopped or reaped meanwhile, finds the record no longer the one
its task carried and is dropped without running anything.

From the moment it takes the task the worker keeps the execution alive with its lease (renewed
by worker/leases.py): while it waits for its session's turn, while it runs. The end is one step
(core/execution_transitions.py `finish`): once the outbox has published every chunk, the outcome is
recorded and the final event published together, and the lease dropped with them. Each Redis
step is retried while Redis is briefly unreachable (core/retry.py); all of them are idempotent.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from core import events, jsontext
from core.clock import now_ms
from core.execution_outcomes import Claimed, Ended
from core.execution_record import ExecutionRecord, Status, WorkerRef
from core.executions import ExecutionStore
from core.leases import LeaseStore
from core.public_errors import public_chunk
from core.redis_clients import publish
from core.redis_errors import error_text
from core.results import FinalResult
from core.retention import REDIS_FULL, Retention
from core.retry import retrying
from core.settings import Settings
from core.stops import STOPPED_WAITING
from core.task import TaskPayload
from core.workflow_snapshots import WorkflowSnapshots
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.run_data import Run
from engine.services import Services
from runtime.timers import call_later
from worker.metrics import Claim, WorkerMetrics
from worker.push import PushHooks
from worker.run_memory import RunMemory
from worker.stops import Stops
from worker.waiting import Conversations
from worker.workflow_cache import WorkflowCache

log = logging.getLogger("mini_n8n.worker")

MAX_RUN_DATA_BYTES = 512 * 1024  # run data beyond this keeps node metadata only
# How long a waiting execution blocks for its wake-up before it looks at its session again.
TURN_CHECK_SECONDS = 1.0
# How long the end waits for the outbox to publish the chunks before the final event: it
# retries for as long itself (worker/publisher.py), so this is only a backstop.
FLUSH_SECONDS = 90.0


class ExecutionRunner:
    def __init__(
        self,
        settings: Settings,
        store: ExecutionStore,
        leases: LeaseStore,
        outbox,
        services: Services,
        stops: Stops,
        *,
        engine: Callable[..., Run] = run_workflow,
        metrics: WorkerMetrics | None = None,
        send_task: Callable[[TaskPayload], None] | None = None,
    ):
        self.store = store
        self.send_task = send_task  # sends another execution's task (a session's next one)
        self.leases = leases
        self.keys = store.keys
        self.outbox = outbox
        self.services = services
        self.stops = stops
        self.engine = engine
        self.metrics = metrics or WorkerMetrics()
        self.timeout_seconds = settings.execution_timeout_seconds
        self.identity = WorkerRef(socket.gethostname(), os.getpid())
        self.workflows = WorkflowCache()
        self.conversations = Conversations(store, outbox)
        self.snapshots = WorkflowSnapshots(store.client, store.keys, settings.executions_ttl)
        self.retention = Retention(store, settings)

    def run(self, message: dict[str, Any]) -> str:
        """Run the task's execution; its final status, or "dropped" if it was not ours to run."""
        payload = TaskPayload.decode(message)
        record = payload.record
        token = secrets.token_hex(8)  # this attempt's claim: a retried step knows its own
        cancel = self.stops.add(record.id, token)  # renewed from now on, once it holds a lease
        try:
            # A run resumed after a Wait node left its session's line when it paused.
            line = self.store.lines.key(record) if payload.in_line else None
            claimed, running = self._claim_in_turn(record, token, line)
            if not claimed:
                return "dropped"  # stopped, or lost and reaped, before it could start
            claim = self.metrics.claimed(running)
            memory = RunMemory(self.store.client, self.store.cluster)
            try:
                if claimed == Claimed.STOP_ASKED:
                    cancel.set()
                return self._run_claimed(payload, running, cancel, claim, memory)
            except Exception as err:  # a bug, or Redis gone for good: end it if it still can
                log.exception("execution %s failed in the worker", record.id)
                return self._fail(payload, running, claim, memory, err)
            finally:
                claim.close()
        finally:
            self.stops.remove(record.id)

    def _claim_in_turn(
        self, record: ExecutionRecord, token: str, line: str | None
    ) -> tuple[Claimed, ExecutionRecord]:
        """Claim the execution once it heads its session's `line`: at once, in one step with
        the look at the line, when nothing is ahead of it (on one Redis); else once its turn
        came. Claimed.NOT when it stopped being the task's to run."""
        if line and not self.store.cluster:
            running = self._running(record, token)
            lease = self.leases.owner.lease(token)
            at_turn = self._step(
                lambda: self.store.claim_at_turn(record, running, line, lease), "claim"
            )
            claimed, turn = at_turn
            if turn.mine:
                return claimed, running
        if not self._wait_for_turn(record, token, line):
            return Claimed.NOT, record
        running = self._running(record, token)
        lease = self.leases.owner.lease(token)
        return self._step(lambda: self.store.claim(record, running, lease), "claim"), running

    def _running(self, record: ExecutionRecord, token: str) -> ExecutionRecord:
        return record.next(status=Status.RUNNING, claim=token, started_at=now_ms(),
                           worker=self.identity)  # fmt: skip

    def _step(self, step: Callable[[], Any], what: str) -> Any:
        return retrying(step, what, log)

    def _wait_for_turn(self, record: ExecutionRecord, token: str, line: str | None) -> bool:
        """Wait until the execution heads its session's line, holding it with this worker's
        lease meanwhile; False if it stopped being the `new` record its task carried (stopped,
        or reaped)."""
        if not line:
            return True
        held = False
        while True:
            turn = self._step(lambda: self.store.lines.turn(record.id, line), "session turn")
            if turn.mine:
                return True
            if turn.lost_head is not None:  # ends it once its loss is confirmed
                self._reap(turn.lost_head)
            current = self._step(lambda: self.store.get(record.id), "record")
            if current is None or current.rev != record.rev:
                return False
            if not held:
                self._step(lambda: self.leases.hold(record.id, token), "lease")
                held = True
            self._step(lambda: self.store.lines.wait(record.id, TURN_CHECK_SECONDS), "turn wait")

    def _fail(self, payload: TaskPayload, running: ExecutionRecord, claim: Claim,
              memory: RunMemory, err: Exception) -> str:  # fmt: skip
        error = f"The execution failed in its worker: {error_text(err)}"
        run = Run(status=Status.ERROR, error=error)
        try:
            return self._finish(payload, running, run, claim, memory)
        except Exception:  # the lease runs out, and a reaper ends it
            log.exception("execution %s could not be ended", running.id)
            return Status.CRASHED

    def _successor(self, payload: TaskPayload, running: ExecutionRecord) -> ExecutionRecord | None:
        """The record of the session's next execution, should this one end with messages no
        Chat node waited for (a conversation's): the end starts it in its own step."""
        if payload.response_mode != "responseNodes" or not running.session_id:
            return None
        if self.send_task is None or not payload.start_node:
            return None
        now = now_ms()
        return ExecutionRecord(
            id=secrets.token_hex(8),
            workflow_id=running.workflow_id,
            workflow_name=running.workflow_name,
            mode=running.mode,
            created_at=now,
            queued_at=now,
            session_id=running.session_id,
            response_mode=running.response_mode,
        )

    def _next_in_session(self, payload: TaskPayload, ended: ExecutionRecord, outcome: Ended,
                         successor: ExecutionRecord | None) -> None:  # fmt: skip
        """Messages that came while the conversation ran and that no Chat node waited for: the
        first starts the session's next execution, as if it had come just after the end, and
        the others are its replies, in order. None is lost. On one Redis the end itself put the
        next execution in place (a message coming meanwhile is its reply); in a cluster it is
        started here, in steps."""
        first, *rest = _leftover_messages(outcome.leftovers)
        record = outcome.successor or successor
        if self.send_task is None or record is None:
            log.error("execution %s: %d message(s) of its session were not answered",
                      ended.id, len(outcome.leftovers))  # fmt: skip
            return
        try:
            if outcome.successor is None:
                self._step(lambda: self.store.create(record), "the session's next execution")
                for message in rest:
                    self._reply(record, message)
                # The ended one's chat socket was told it continues: here is where.
                channel = self.keys.execution_events(ended.id)
                next_event = events.encode(events.next_execution(record.id))
                publish(self.store.client, channel, next_event)
            self.send_task(payload.next_in_session(record, first))
        except Exception as err:
            log.exception("execution %s: the session's next execution did not start", ended.id)
            self.store.fail_start(record, f"could not start: {error_text(err)}")

    def _reply(self, record: ExecutionRecord, message: dict[str, Any]) -> None:
        self._step(lambda: self.store.reply(record, message), "the next execution's replies")

    def _stored_items(self, execution_id: str) -> list[dict[str, Any]]:
        items = self._step(lambda: self.store.stored_items(execution_id), "the items")
        if items is None:
            raise LookupError("the items of this execution are gone (expired?)")
        return items

    def _reap(self, execution_id: str) -> None:
        self._step(lambda: self.store.reap(execution_id), "reaping the session's head")

    def _run_claimed(self, payload: TaskPayload, running: ExecutionRecord, cancel, claim: Claim,
                     memory: RunMemory) -> str:  # fmt: skip
        deadline = time.monotonic() + self.timeout_seconds
        try:
            resume = self.conversations.resume(payload, running)
            self.conversations.continue_numbering(payload, running)
            if payload.items_stored:  # too large for the task's message (core/task.py)
                payload.items = self._stored_items(running.id)
        except LookupError as err:
            run = Run(status=Status.ERROR, error=str(err))
            return self._finish(payload, running, run, claim, memory)
        while True:
            run = self._execute(payload, running, cancel, resume, deadline, memory)
            if run.status != Status.WAITING:
                return self._finish(payload, running, run, claim, memory)
            outcome, reply = self.conversations.pause(
                payload, running, run, _bounded_run_data(run.run_data), memory.take(running.id)
            )
            if outcome != "stopped":  # (stopped: its turns go with the end, next)
                memory.step_done()
            if outcome == "stopped":  # asked while it was about to wait
                run.status, run.error = Status.CANCELED, STOPPED_WAITING
                return self._finish(payload, running, run, claim, memory)
            if outcome != "reply":
                claim.ended(Status.WAITING if outcome == "paused" else Status.CRASHED)
                return Status.WAITING
            # The user had answered already: go on here, with that reply.
            resume = {"state": run.waiting, "reply": reply}

    def _execute(self, payload: TaskPayload, record: ExecutionRecord, cancel,
                 resume: dict[str, Any] | None, deadline: float,
                 memory: RunMemory) -> Run:  # fmt: skip
        timed_out = threading.Event()

        def time_out() -> None:
            timed_out.set()
            cancel.set()

        cancel_timer = call_later(max(deadline - time.monotonic(), 0), time_out)
        try:
            run = self.engine(
                self._workflow(payload),
                payload.items,
                start_node=payload.start_node,
                hooks=self._hooks(payload, record),
                services=memory.services(self.services),
                execution_id=record.id,
                mode=record.mode,
                streaming=payload.streaming,
                cancel=cancel,
                resume=resume,
            )
        except Exception as err:
            # A snapshot that no longer loads, or a bug: the record must still say it failed
            # rather than stay `running` until a reaper calls the worker lost.
            log.exception("execution %s could not run", record.id)
            run = Run(status=Status.ERROR, error=f"The execution could not run: {error_text(err)}")
        finally:
            cancel_timer()
        if run.status == Status.CANCELED and timed_out.is_set():
            run.status = Status.ERROR
            run.error = (f"The execution timed out after {self.timeout_seconds:g} s "
                         "(MINI_N8N_EXECUTION_TIMEOUT).")  # fmt: skip
        return run

    def _workflow(self, payload: TaskPayload):
        if payload.workflow_ref is not None:  # queue mode: a version stored once (api/launcher)
            return self.workflows.get_ref(payload.workflow_ref, self.snapshots.load)
        return self.workflows.get(payload.workflow or {})

    def _hooks(self, payload: TaskPayload, record: ExecutionRecord) -> Hooks:
        channel = self.keys.execution_events(record.id)
        hooks = Hooks()
        if payload.streaming and payload.response_mode != "onReceived":
            # The channel's reader is a public client: a failed node's text stays in the record.
            hooks.add_handler(
                "sendChunk",
                lambda chunk: self.outbox.chunk(channel, public_chunk(chunk, record.id)),
            )
        hooks.add_handler("sendResponse", lambda resp: self.outbox.response(channel, resp))
        if payload.push_ref:
            PushHooks(self.outbox, self.keys.push(payload.push_ref), record).attach(hooks)
        self.conversations.attach(hooks, payload, record)
        return hooks

    def _finish(self, payload: TaskPayload, running: ExecutionRecord, run: Run, claim: Claim,
                memory: RunMemory) -> str:  # fmt: skip
        """Once every chunk is out, record the outcome and publish the final event in one step
        (counted crashed when Redis never took it)."""
        self.conversations.forget(running.id)
        channel = self.keys.execution_events(running.id)
        if not self.outbox.flush(channel).wait(FLUSH_SECONDS):
            log.warning("execution %s: its chunks are not all published yet", running.id)
        result = FinalResult(
            status=Status(run.status),
            error=run.error,
            error_node=run.error_node,
            output=run.first_json(),
            streamed=run.streamed,
        )
        event, seq = self.outbox.final(channel, result)
        final = running.next(
            status=Status(run.status),
            stopped_at=now_ms(),
            error=run.error,
            error_node=run.error_node,
            last_node_executed=run.last_node,
            events=seq + 1,
            **_bounded_run_data(run.run_data),
        )
        published = event if self.outbox.publishes_final else ""
        successor = self._successor(payload, running)
        turns = memory.take(running.id)
        try:
            ended = self._step(
                lambda: self.store.finish(running, final, published, successor, turns), "the end"
            )
        except Exception as err:  # Redis stayed away: the lease runs out and a reaper ends it
            log.error("execution %s: outcome not recorded: %s", running.id, err)
            if isinstance(err, redis.OutOfMemoryError):  # its stream is told why, at once
                self.outbox.refused(channel, seq, REDIS_FULL)
            claim.ended(Status.CRASHED)
            return Status.CRASHED
        memory.step_done()
        if not ended.written:
            log.warning("execution %s ended elsewhere before it finished here (declared lost, "
                        "or stopped): its outcome and memory turns are dropped", running.id)  # fmt: skip
        else:
            self.outbox.delivered(channel, event)
            self.retention.ended(final, lambda: self._workflow(payload).settings)
        status = Status(run.status) if ended.written else Status.CRASHED
        claim.ended(status)
        if ended.written and ended.leftovers:
            self._next_in_session(payload, running, ended, successor)
        if payload.push_ref:
            self._push_finished(payload.push_ref, running, run if ended.written else None)
        return status

    def _push_finished(self, push_ref: str, running: ExecutionRecord, run: Run | None) -> None:
        """The editor's executionFinished: this run's outcome, or (None) what ended it
        elsewhere, as the record says."""
        if run is not None:
            status, error = run.status, run.error
        else:
            record = self.store.get(running.id)
            status = record.status if record else Status.CRASHED
            error = record.error if record else "The execution record is gone."
        finished = {"executionId": running.id, "status": status, "error": error}
        self.outbox.event(self.keys.push(push_ref), "executionFinished", finished)


def _leftover_messages(leftovers: list[str]) -> list[dict[str, Any]]:
    return [jsontext.loads(raw) for raw in leftovers]


def _bounded_run_data(run_data: dict[str, Any]) -> dict[str, Any]:
    text = jsontext.dumps_bytes(run_data, default=str)  # as the record will write it
    if len(text) <= MAX_RUN_DATA_BYTES:
        return {"run_data": run_data}
    slim = {
        name: [
            {k: v for k, v in task.items() if k not in ("data", "inputOverride")} for task in tasks
        ]
        for name, tasks in run_data.items()
    }
    return {"run_data": slim, "run_data_truncated": True}
