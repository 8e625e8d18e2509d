"""Run data: what each node received and produced, per run, as n8n keeps it.

run_data[node_name] is a list of task data, one per run (run index = position in the list):
{"startTime", "executionTime", "executionIndex", "executionStatus", "source",
 "data": {"main": [[items]]} (or {"ai_tool": [[{"json": output}]]} for a sub-node),
 "inputOverride": {...} (sub-nodes: what they were called with), "error": {...}?}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.results import last_output


@dataclass
class Run:
    """The result of one execution."""

    status: str  # "success" | "error" | "canceled" | "waiting"
    run_data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    error: str | None = None
    error_node: str | None = None
    last_node: str | None = None
    started_at: int = 0
    stopped_at: int = 0
    streamed: bool = False  # at least one item chunk went out through sendChunk
    # status "waiting": where the execution stands (plain JSON), for run_workflow(resume=...)
    waiting: dict[str, Any] | None = None

    def last_output(self) -> list[dict[str, Any]]:
        """Items of the last executed main node: n8n's lastNode response source."""
        return last_output(self.run_data, self.last_node)

    def first_json(self) -> dict[str, Any] | None:
        items = self.last_output()
        return items[0].get("json") if items else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "errorNode": self.error_node,
            "lastNodeExecuted": self.last_node,
            "startedAt": self.started_at,
            "stoppedAt": self.stopped_at,
            "runData": self.run_data,
        }
