"""The Celery task's payload (`run_execution`): one type, one encoder, one decoder.

It crosses from the api (or a worker that resumes a wait) to whichever worker takes the task, as
the task's one JSON argument. It carries the record as it was when the task was sent, so the
claim can compare-and-set on its revision without reading it first, and what the engine needs
to start (or continue) the execution.

Items larger than ITEMS_INLINE_BYTES as JSON (a 16 MiB webhook body) are not in the message:
Celery would encode them three times over (JSON, base64, its envelope) on the api's event loop,
holding every other request meanwhile. They are encoded once, in C (orjson), and stored beside
the record (`execution:<id>:items`, written with it); the message says `itemsStored`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.execution_record import ExecutionRecord

# Beyond this, items go to Redis rather than into the task's message (see above).
ITEMS_INLINE_BYTES = 64 * 1024


class PayloadError(ValueError):
    """A task message that is not one of ours."""


@dataclass(slots=True)
class TaskPayload:
    record: ExecutionRecord
    # Where the workflow comes from: a stored version's reference (queue mode: the message
    # stays small, core/workflow_snapshots.py) or the workflow JSON itself (regular mode).
    workflow_ref: dict[str, str] | None = None
    workflow: dict[str, Any] | None = None
    start_node: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    streaming: bool = False
    response_mode: str | None = None
    push_ref: str | None = None  # an editor's push channel, for a run started there
    # The user's reply to a waiting execution: this task continues it rather than starts it.
    reply: dict[str, Any] | None = None
    # A waiting execution whose time limit passed: continued with no reply.
    expired: bool = False
    # The items are stored beside the record (too large for the message): the worker reads them.
    items_stored: bool = False
    # A resumed execution: how many numbered events its channel carried before it waited (its
    # events are numbered on from there).
    events: int = 0
    # False for a run resumed after a Wait node, which left its session's line when it paused
    # (worker/waiting.py): it runs without waiting for a turn in it.
    in_line: bool = True

    @property
    def resumes(self) -> bool:
        return self.reply is not None or self.expired

    def source(self) -> dict[str, Any]:
        """The workflow's source as a resume carries it on (the same version it started with)."""
        if self.workflow_ref is not None:
            return {"workflowRef": self.workflow_ref}
        return {"workflow": self.workflow}

    def encode(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "record": self.record.to_json(),
            "startNode": self.start_node,
            "items": self.items,
            "streaming": self.streaming,
            "responseMode": self.response_mode,
            "pushRef": self.push_ref,
            **self.source(),
        }
        if self.reply is not None:
            message["reply"] = self.reply
        if self.expired:
            message["expired"] = True
        if self.items_stored:
            message["itemsStored"] = True
            message["items"] = []
        if self.events:
            message["events"] = self.events
        if not self.in_line:
            message["inLine"] = False
        return message

    @classmethod
    def decode(cls, message: Any) -> TaskPayload:
        if not isinstance(message, dict) or not isinstance(message.get("record"), dict):
            raise PayloadError("a task payload is an object with a record")
        if "workflowRef" not in message and not isinstance(message.get("workflow"), dict):
            raise PayloadError("a task payload names its workflow")
        return cls(
            record=ExecutionRecord.from_json(message["record"]),
            workflow_ref=message.get("workflowRef"),
            workflow=message.get("workflow"),
            start_node=message.get("startNode"),
            items=list(message.get("items") or []),
            streaming=bool(message.get("streaming")),
            response_mode=message.get("responseMode"),
            push_ref=message.get("pushRef"),
            reply=message.get("reply"),
            expired=bool(message.get("expired")),
            items_stored=bool(message.get("itemsStored")),
            events=int(message.get("events") or 0),
            in_line=message.get("inLine") is not False,
        )

    @classmethod
    def resuming(
        cls, record: ExecutionRecord, saved: dict[str, Any], reply: dict[str, Any] | None
    ) -> TaskPayload:
        """The task that continues a waiting execution, from what its wait saved (the workflow
        version it started with, its trigger, the editor listening, whether it streams, how many
        events it published): with the user's reply (or a resume URL's call), or with none when
        its time came."""
        source = saved.get("source") or {}
        return cls(
            record=record,
            workflow_ref=source.get("workflowRef"),
            workflow=source.get("workflow"),
            start_node=saved.get("trigger"),
            streaming=saved.get("streaming") is True,
            response_mode=record.response_mode,
            push_ref=saved.get("pushRef"),
            reply=reply,
            expired=reply is None,
            events=int(saved.get("events") or 0),
            in_line=saved.get("leftLine") is not True,
        )

    def next_in_session(self, record: ExecutionRecord, message: dict[str, Any]) -> TaskPayload:
        """The task of the session's next execution, started by a message of this one's
        conversation that no Chat node waited for."""
        return TaskPayload(
            record=record,
            workflow_ref=self.workflow_ref,
            workflow=self.workflow,
            start_node=self.start_node,
            items=[message],
            streaming=False,
            response_mode=self.response_mode,
            push_ref=self.push_ref,
        )
