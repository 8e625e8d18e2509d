"""Editor push events for executions started from the editor (they carry a pushRef): the
canvas follows nodes as they run and the chat panel gets the streamed tokens."""

from __future__ import annotations

from typing import Any

from core.execution_record import ExecutionRecord
from engine.hooks import Hooks
from worker.publisher import Outbox


class PushHooks:
    def __init__(self, outbox: Outbox, channel: str, record: ExecutionRecord):
        self.outbox = outbox
        self.channel = channel
        self.execution_id = record.id
        self.workflow_id = record.workflow_id

    def attach(self, hooks: Hooks) -> None:
        hooks.add_handler("workflowExecuteBefore", self._started)
        hooks.add_handler("nodeExecuteBefore", self._node_before)
        hooks.add_handler("nodeExecuteAfter", self._node_after)
        hooks.add_handler("sendChunk", self._chunk)

    def _send(self, event_type: str, data: dict[str, Any]) -> None:
        self.outbox.event(self.channel, event_type, {"executionId": self.execution_id, **data})

    def _started(self, execution) -> None:
        self._send("executionStarted", {"workflowId": self.workflow_id, "mode": execution.mode})

    def _node_before(self, execution, node_name: str, run_index: int) -> None:
        self._send("nodeExecuteBefore", {"nodeName": node_name, "runIndex": run_index})

    def _node_after(self, execution, node_name: str, run_index: int, task: dict[str, Any]) -> None:
        data = task.get("data") or {}
        items = sum(len(branch) for branches in data.values() for branch in branches)
        self._send(
            "nodeExecuteAfter",
            {
                "nodeName": node_name,
                "runIndex": run_index,
                "itemCount": items,
                "executionStatus": task.get("executionStatus"),
                "executionTime": task.get("executionTime"),
                "error": (task.get("error") or {}).get("message"),
            },
        )

    def _chunk(self, chunk: dict[str, Any]) -> None:
        self._send("chatChunk", {"chunk": chunk})
