"""A Code node's run as it crosses to the process that runs its JavaScript (sandbox/), and what
comes back. Both are JSON, one encoder and one decoder each: nothing but data crosses into the
isolate or out of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

MODES = ("runOnceForAllItems", "runOnceForEachItem")


@dataclass
class CodeTask:
    """What the JavaScript may see: the code, its input items and the items of the nodes it
    names, who runs it (execution, workflow) and where ($now's time zone)."""

    code: str
    mode: str  # one of MODES
    items: list[dict[str, Any]]
    # node name -> the items of its latest run, for `$('Name')`; absent: not executed
    nodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    node_names: list[str] = field(default_factory=list)  # every node of the workflow
    previous_node: str | None = None
    execution: dict[str, Any] = field(default_factory=dict)  # {"id", "mode"}
    workflow: dict[str, Any] = field(default_factory=dict)  # {"id", "name", "active"}
    timezone: str = "America/New_York"  # n8n's GENERIC_TIMEZONE default

    def to_js(self) -> dict[str, Any]:
        """The object the isolate's harness reads (sandbox/harness.js `run`)."""
        return {
            "code": self.code,
            "mode": self.mode,
            "items": self.items,
            "nodes": self.nodes,
            "nodeNames": self.node_names,
            "previousNode": self.previous_node,
            "execution": self.execution,
            "workflow": self.workflow,
            "timezone": self.timezone,
        }

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, data: bytes | str) -> CodeTask:
        return cls(**orjson.loads(data))


# How a run ended: the code returned (ok) or threw (error); or it was stopped from outside the
# code: past its time (timeout), its memory (memory), its process gone (crashed), or its
# execution stopped (canceled).
STATUSES = ("ok", "error", "timeout", "memory", "crashed", "canceled")


@dataclass
class CodeOutcome:
    status: str  # one of STATUSES
    result: Any = None  # what the code returned, as JSON (status ok)
    undefined_result: bool = False  # the code returned nothing (JSON has no undefined)
    # {"message", "name", "lineNumber", "itemIndex"} for an error; a text for the others
    error: dict[str, Any] | None = None
    logs: list[str] = field(default_factory=list)  # console.log lines, formatted as n8n does
    cpu_seconds: float = 0.0  # what the run cost its process, charged to the execution

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, data: bytes | str) -> CodeOutcome:
        return cls(**orjson.loads(data))

    @classmethod
    def from_harness(cls, text: str) -> CodeOutcome:
        """What sandbox/harness.js `run` answered (its JSON text)."""
        data = orjson.loads(text)
        if data.get("ok"):
            return cls(
                "ok",
                result=data.get("result"),
                undefined_result=bool(data.get("undefinedResult")),
                logs=data.get("logs") or [],
            )
        return cls("error", error=data.get("error") or {}, logs=data.get("logs") or [])

    @classmethod
    def stopped(cls, status: str, message: str, logs: list[str] | None = None) -> CodeOutcome:
        return cls(status, error={"message": message}, logs=logs or [])
