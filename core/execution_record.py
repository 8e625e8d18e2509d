"""The execution record (`execution:<id>`): one type, one encoder, one decoder.

Every process reads and writes records through `ExecutionRecord`. Its JSON always begins with
the same header,

    {"status":"<status>","rev":<revision>,"claim":"<token>",...

so the Redis scripts that guard a transition (core/executions.py) read the status, the revision
and the claim with one string match and never decode the record: no text inside a record (a
lone surrogate, a deep value) can break a script, and a large record costs a script nothing to
check. `header()` is the same reading in Python; tests/core/test_execution_record.py holds the
script's reading to it.

- `rev` counts the writes: every transition is a compare-and-set on it, so a writer that built
  its record from an older one writes nothing.
- `claim` names the attempt that claimed the execution (`new -> running`): a claim or an end
  retried after a timeout recognises its own earlier write and never runs an execution twice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from core.jsontext import dumps


class Status(StrEnum):
    NEW = "new"  # enqueued, not yet started by a worker (or waiting for its session's turn)
    RUNNING = "running"
    # A Chat node waits for the user's reply, or a Wait node for its time or its resume URL: no
    # worker holds it, its state is in Redis (core/waiting.py), and it keeps its place at the
    # head of its session's line.
    WAITING = "waiting"
    SUCCESS = "success"
    ERROR = "error"
    CANCELED = "canceled"
    CRASHED = "crashed"  # its worker was lost, or no worker started it in time


FINISHED = frozenset({Status.SUCCESS, Status.ERROR, Status.CANCELED, Status.CRASHED})
UNFINISHED = frozenset({Status.NEW, Status.RUNNING, Status.WAITING})

# What the scripts match (Lua pattern) and `header` parses: status, revision, claim.
LUA_HEADER = '^{"status":"(%l+)","rev":(%d+),"claim":"(%w*)"'
_HEADER = re.compile(r'\{"status":"([a-z]+)","rev":(\d+),"claim":"([0-9A-Za-z]*)"')
_CLAIM = re.compile(r"[0-9A-Za-z]*")


class RecordError(ValueError):
    """Stored text that is not an execution record."""


@dataclass(frozen=True, slots=True)
class WorkerRef:
    host: str
    pid: int


@dataclass(frozen=True, slots=True)
class Header:
    status: Status
    rev: int
    claim: str


@dataclass(slots=True)
class ExecutionRecord:
    id: str
    workflow_id: str
    status: Status = Status.NEW
    rev: int = 0
    claim: str = ""
    mode: str = "webhook"
    workflow_name: str | None = None
    session_id: str | None = None
    response_mode: str | None = None
    created_at: int = 0
    queued_at: int | None = None  # when it last became `new` (created, or resumed by a reply)
    started_at: int | None = None
    stopped_at: int | None = None
    worker: WorkerRef | None = None
    error: str | None = None
    error_node: str | None = None
    last_node_executed: str | None = None
    run_data: dict[str, Any] = field(default_factory=dict)
    run_data_truncated: bool = False
    waiting_since: int | None = None
    wait_till: int | None = None  # a waiting execution's deadline (ms), if its node set one
    waiting_node: str | None = None
    # What else ends the wait than its time: "reply" (a chat message: a Chat node's), "webhook"
    # (a call of a Wait node's resume URL), "time" (nothing); None: "reply", as before
    wait_for: str | None = None
    # How many numbered events its channel carried, the final one included: a stream that
    # missed only the final event can tell it has every line before it.
    events: int | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def next(self, **changes: Any) -> ExecutionRecord:
        """The record as the next write makes it: one revision later, with `changes`."""
        return replace(self, rev=self.rev + 1, **changes)

    # --- the codec ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The record as JSON (what REST answers): n8n's names."""
        return {
            "status": self.status.value,
            "rev": self.rev,
            "claim": self.claim,
            "id": self.id,
            "workflowId": self.workflow_id,
            "workflowName": self.workflow_name,
            "mode": self.mode,
            "sessionId": self.session_id,
            "responseMode": self.response_mode,
            "createdAt": self.created_at,
            "queuedAt": self.queued_at,
            "startedAt": self.started_at,
            "stoppedAt": self.stopped_at,
            "worker": None
            if self.worker is None
            else {"host": self.worker.host, "pid": self.worker.pid},
            "error": self.error,
            "errorNode": self.error_node,
            "lastNodeExecuted": self.last_node_executed,
            "runData": self.run_data,
            "runDataTruncated": self.run_data_truncated,
            "waitingSince": self.waiting_since,
            "waitTill": self.wait_till,
            "waitingNode": self.waiting_node,
            "waitFor": self.wait_for,
            "events": self.events,
        }

    def encode(self) -> str:
        if not _CLAIM.fullmatch(self.claim):
            raise RecordError(f"a claim token is letters and digits, not {self.claim!r}")
        body = self.to_json()
        head = {k: body.pop(k) for k in ("status", "rev", "claim")}
        # The header first, always in this order and form (see the module docstring).
        return dumps(head)[:-1] + "," + dumps(body, default=str)[1:]

    @classmethod
    def decode(cls, raw: str | bytes) -> ExecutionRecord:
        try:
            data = json.loads(raw)
        except ValueError as err:
            raise RecordError("an execution record is not JSON") from err
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise RecordError("an execution record is a JSON object with an id")
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecutionRecord:
        worker = data.get("worker")
        return cls(
            id=data["id"],
            workflow_id=str(data.get("workflowId") or ""),
            status=Status(data.get("status", Status.NEW)),
            rev=int(data.get("rev") or 0),
            claim=str(data.get("claim") or ""),
            mode=str(data.get("mode") or "webhook"),
            workflow_name=data.get("workflowName"),
            session_id=data.get("sessionId"),
            response_mode=data.get("responseMode"),
            created_at=int(data.get("createdAt") or 0),
            queued_at=_int_or_none(data.get("queuedAt")),
            started_at=_int_or_none(data.get("startedAt")),
            stopped_at=_int_or_none(data.get("stoppedAt")),
            worker=WorkerRef(str(worker["host"]), int(worker["pid"]))
            if isinstance(worker, dict)
            else None,
            error=data.get("error"),
            error_node=data.get("errorNode"),
            last_node_executed=data.get("lastNodeExecuted"),
            run_data=data.get("runData") or {},
            run_data_truncated=bool(data.get("runDataTruncated")),
            waiting_since=_int_or_none(data.get("waitingSince")),
            wait_till=_int_or_none(data.get("waitTill")),
            waiting_node=data.get("waitingNode"),
            wait_for=data.get("waitFor"),
            events=_int_or_none(data.get("events")),
        )


def header(raw: str | bytes) -> Header:
    """Status, revision and claim of stored record text, read as the scripts read them."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    match = _HEADER.match(text)
    if match is None:
        raise RecordError("the record does not begin with its header")
    return Header(Status(match[1]), int(match[2]), match[3])


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
