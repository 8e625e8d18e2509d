"""Ending lost executions: whoever looks (an api stream, a chat socket, a worker's reaper, an
execution waiting for its turn) judges an unfinished execution by its liveness keys
(core/liveness.py) and, once the loss is confirmed, ends it `crashed` in the end's own step
(core/end_script.py), which publishes its final event and hands its session's turn on."""

from __future__ import annotations

import builtins

from core import liveness
from core.clock import now_ms
from core.execution_queries import decoded
from core.execution_record import ExecutionRecord, Status
from core.execution_transitions import EndRequest, ExecutionTransitions
from core.liveness import Verdict
from core.results import FinalResult


class ExecutionReaping(ExecutionTransitions):
    def reap(self, execution_id: str, gone: str = "") -> ExecutionRecord | None:
        """End the execution `crashed` if it is lost (core/liveness.py), once the loss is
        confirmed; the record as it now stands (None if gone). `gone`: a worker connection
        that no longer exists (core/presence.py): a lease that names it holds nothing."""
        record = self.get(execution_id)
        if record is None or record.finished:
            return record
        reason = self.lost_reason(record, died=bool(gone))
        crashed = record.next(status=Status.CRASHED, error=reason, stopped_at=now_ms())
        result = FinalResult(Status.CRASHED, crashed.error)
        request = EndRequest(record, crashed, frozenset(), result, reap=True, gone=gone)
        ended = self.end(request)
        if ended.outcome == "ok":
            return crashed
        if ended.outcome == "refused":  # written meanwhile by someone else: as it stands
            return self.get(execution_id)
        return record

    def lost_reason(self, record: ExecutionRecord, died: bool = False) -> str:
        if record.status == Status.RUNNING and died:
            return "The worker running this execution died (its process is gone)."
        if record.status == Status.RUNNING:
            return "The worker running this execution was lost (it stopped renewing its lease)."
        if died:
            return "The worker that took this execution died before it could start it."
        waited = now_ms() - (record.queued_at or record.created_at)
        if waited >= self.queue_timeout_ms:
            return f"No worker started this execution within {self.queue_timeout_ms / 1000:g} s."
        return "The worker that took this execution was lost before it could start it."

    def verdicts(
        self, execution_ids: builtins.list[str]
    ) -> dict[str, tuple[ExecutionRecord | None, Verdict]]:
        """Each execution's record and liveness, read in one round trip (the api's batched
        quiet-stream checks). A lost one is only judged here: `reap` ends it."""
        pipe = self.client.pipeline(transaction=False)
        for execution_id in execution_ids:
            pipe.get(self.keys.execution(execution_id))
            pipe.exists(self.keys.execution_lease(execution_id))
            pipe.exists(self.keys.execution_queued(execution_id))
        replies = pipe.execute()
        answers = {}
        for i, execution_id in enumerate(execution_ids):
            record = decoded(replies[3 * i])
            status = record.status if record is not None else None
            verdict = liveness.judge(status, bool(replies[3 * i + 1]), bool(replies[3 * i + 2]))
            answers[execution_id] = record, verdict
        return answers
