"""The worker's side of conversations inside one execution (responseNodes mode, Chat node):
publish each Chat-node message, let an execution that waits for its user's reply go (its state
saved in Redis, no worker slot held), and continue a resumed one from that state.

The Redis side is core/waiting.py; the runner (worker/execution_run.py) calls in here at three
points: building the hooks, calling the engine, recording the outcome.
"""

from __future__ import annotations

import logging
from typing import Any

from core.clock import now_ms
from core.executions import ExecutionStore, Status
from core.waiting import WaitingStore
from engine.hooks import Hooks
from engine.run_data import Run

log = logging.getLogger("mini_n8n.worker")


class Conversations:
    def __init__(self, store: ExecutionStore, outbox):
        self.waiting = WaitingStore(store)
        self.keys = store.keys
        self.outbox = outbox
        # A message that waits for a reply, held until its execution is recorded as waiting
        # (execution id -> message): sent earlier, a quick reply could find it still running.
        self._held: dict[str, dict[str, Any]] = {}

    def attach(self, hooks: Hooks, payload: dict[str, Any], record: dict[str, Any]) -> None:
        """Chat-node messages go to the execution's message list and channel (and, for a run
        from the editor, to its push channel, which the chat panel reads)."""
        execution_id = record["id"]

        def send(message: dict[str, Any]) -> None:
            if message.get("wait"):
                self._held[execution_id] = message
            else:
                self._send(payload, execution_id, message)

        hooks.add_handler("sendMessage", send)

    def _send(self, payload: dict[str, Any], execution_id: str, message: dict[str, Any]) -> None:
        n = self.waiting.send_message(execution_id, message)
        if payload.get("pushRef"):
            data = {"executionId": execution_id, "n": n, **message}
            self.outbox.event(self.keys.push(payload["pushRef"]), "chatMessage", data)

    def engine_kwargs(self, payload: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """`resume=` for the engine when the payload carries a reply to a waiting execution."""
        reply = payload.get("reply")
        if reply is None:
            return {}
        saved = self.waiting.resume_state(record["id"])
        if saved is None:
            raise LookupError("the state of this waiting execution is gone (expired?)")
        return {"resume": {"state": saved["engine"], "reply": reply}}

    def pause(self, payload: dict[str, Any], record: dict[str, Any], run: Run, run_data) -> bool:
        """Record a run that waits: `running -> waiting` with its state; False if the record
        was no longer running (stopped or marked lost meanwhile)."""
        state = run.waiting or {}
        waiting = {
            **record,
            "status": Status.WAITING,
            "waitingSince": now_ms(),
            "waitTill": state.get("waitTill"),
            "waitingNode": state.get("node"),
            "lastNodeExecuted": run.last_node,
            **run_data,
        }
        # What a resume needs besides the engine's state: the workflow version it started with,
        # as its task named it (a stored version's reference, or the JSON itself in regular
        # mode), and where the editor (if it started it) listens.
        saved = {
            "engine": state,
            "source": {k: payload[k] for k in ("workflow", "workflowRef") if k in payload},
            "pushRef": payload.get("pushRef"),
        }
        paused = self.waiting.pause(waiting, saved)
        held = self._held.pop(record["id"], None)
        if not paused:
            log.warning("execution %s stopped being ours before it could wait", record["id"])
            return False
        if held is not None:
            self._send(payload, record["id"], held)
        if payload.get("pushRef"):
            data = {"executionId": record["id"], "waitingNode": state.get("node")}
            self.outbox.event(self.keys.push(payload["pushRef"]), "executionWaiting", data)
        return paused

    def ended(self, payload: dict[str, Any], record: dict[str, Any]) -> None:
        """A resumed execution ended: its saved state is of no use any more."""
        self._held.pop(record["id"], None)
        if payload.get("reply") is not None:
            self.waiting.forget(record["id"])
