"""An execution's final result: what its channel's last event (`done`) carries and what a stream
answers from. One type, one encoder, one decoder.

Built by the worker from the run, or, when a stream missed the final event, from the record
(`from_record`); a stop of an execution that never ran and a reaper's verdict carry only a
status and an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.execution_record import ExecutionRecord, Status


@dataclass(frozen=True, slots=True)
class FinalResult:
    status: Status
    error: str | None = None
    error_node: str | None = None
    output: Any = None  # the first item's JSON of the last node run (lastNode answers)
    streamed: bool = False  # at least one item chunk went out while it ran
    # Read from the record because the final event never came: `complete` says whether the
    # stream had every line before it (the record counts its events).
    read_from_record: bool = False
    complete: bool = True
    expired: bool = False  # a Chat node's wait ran out
    # The session's conversation goes on in a next execution (core/events.py `next`).
    continues: bool = False
    # The api wrote `error` itself, for whoever waits on the stream (Redis unreachable, the end
    # lost): a public client may read it (core/public_errors.py). Never sent between processes.
    public: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status.value, "error": self.error}
        if self.error_node is not None:
            body["errorNode"] = self.error_node
        if self.output is not None:
            body["output"] = self.output
        if self.streamed:
            body["streamed"] = True
        if self.expired:
            body["expired"] = True
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> FinalResult:
        try:
            status = Status(str(body.get("status")))
        except ValueError:
            status = Status.ERROR
        error = body.get("error")
        return cls(
            status=status,
            error=error if isinstance(error, str) else None,
            error_node=body.get("errorNode"),
            output=body.get("output"),
            streamed=body.get("streamed") is True,
            expired=body.get("expired") is True,
            continues=body.get("continues") is True,
        )

    @classmethod
    def from_record(cls, record: ExecutionRecord, events_seen: int | None = None) -> FinalResult:
        """What the record says of a finished execution whose final event a stream missed;
        `events_seen` is how many numbered events that stream had."""
        complete = record.events is not None and events_seen == record.events - 1
        return cls(
            status=record.status,
            error=record.error,
            error_node=record.error_node,
            output=_first_json(record),
            read_from_record=True,
            complete=complete,
        )

    @property
    def ok(self) -> bool:
        return self.status == Status.SUCCESS


def _first_json(record: ExecutionRecord) -> Any:
    items = last_output(record.run_data, record.last_node_executed)
    return items[0].get("json") if items else None


def last_output(run_data: dict[str, Any], last_node: str | None) -> list[dict[str, Any]]:
    """Items of the last executed main node (n8n's lastNode answer), from run data as n8n
    keeps it (engine/run_data.py)."""
    runs = run_data.get(last_node) if last_node else None
    if not runs:
        return []
    for branch in (runs[-1].get("data") or {}).get("main", []):
        if branch:
            return branch
    return []
