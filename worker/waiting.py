"""The worker's side of conversations inside one execution (responseNodes mode, Chat node):
publish each Chat-node message, let an execution that waits for its user's reply go (its state
saved in Redis, no worker slot held), and continue a resumed one from that state.

A reply that came before the Chat node waited is already queued for it (core/execution_transitions.py
`reply`): the pause takes it instead, and the execution goes on here at once. So no message of
the session is ever refused or run beside the conversation, however quick.

The Redis side is core/waiting.py and core/executions.py; the runner (worker/execution_run.py)
calls in here at three points: building the hooks, calling the engine, and when a run waits.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from typing import Any

from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore
from core.jsontext import dumps
from core.memory_turns import TurnWrite
from core.retry import retrying
from core.task import TaskPayload
from core.waiting import WaitingStore
from engine.hooks import Hooks
from engine.run_data import Run

log = logging.getLogger("mini_n8n.worker")

# How long a wait waits for the outbox to publish what the run streamed before it: it retries
# for as long itself (worker/publisher.py), so this is only a backstop.
FLUSH_SECONDS = 90.0


class StateGone(LookupError):
    """A resumed execution whose saved state expired."""


class Conversations:
    def __init__(self, store: ExecutionStore, outbox):
        self.store = store
        self.waiting = WaitingStore(store)
        self.keys = store.keys
        self.outbox = outbox
        # A message that waits for a reply, held until its wait is recorded (execution id ->
        # message).
        self._held: dict[str, ChatNodeMessage] = {}

    def attach(self, hooks: Hooks, payload: TaskPayload, record: ExecutionRecord) -> None:
        """Chat-node messages go to the execution's message list and channel (and, for a run
        from the editor, to its push channel, which the chat panel reads). A message that waits
        for a reply goes once the wait is recorded (`pause`): whoever reads it may then find the
        execution waiting."""
        execution_id = record.id

        def send(message: ChatNodeMessage) -> None:
            if message.wait:
                self._held[execution_id] = message
            else:
                self._send(payload, execution_id, message)

        hooks.add_handler("sendMessage", send)

    def _send(self, payload: TaskPayload, execution_id: str, message: ChatNodeMessage) -> None:
        n = retrying(lambda: self.waiting.send_message(execution_id, message), "chat message", log)
        if payload.push_ref:
            data = {"executionId": execution_id, **message.numbered(n).to_json()}
            self.outbox.event(self.keys.push(payload.push_ref), "chatMessage", data)

    def _line_left(
        self, payload: TaskPayload, running: ExecutionRecord, wait_for: str
    ) -> str | None:
        """The session's line a Wait node's wait leaves, so that the session's next message runs
        meanwhile, as in n8n (a wait may last hours, and the message would hold a worker slot
        all along); None when it keeps its place: a Chat node's wait, whose session's messages
        are its replies, and every wait of a conversation (responseNodes), whose messages are
        its own. Resumed, it runs without waiting for a turn."""
        if wait_for == "reply" or payload.response_mode == "responseNodes":
            return None
        return self.store.lines.key(running)

    def _published(self, execution_id: str) -> int:
        """How many numbered events the execution's channel carried, once everything it handed
        the outbox is out: the resumed run numbers its events on from there, so a stream that
        stays open across the wait sees no repeat and no gap."""
        channel = self.keys.execution_events(execution_id)
        if not self.outbox.flush(channel).wait(FLUSH_SECONDS):
            log.warning("execution %s: its chunks are not all published yet", execution_id)
        return int(self.outbox.numbered_so_far(channel))

    def continue_numbering(self, payload: TaskPayload, record: ExecutionRecord) -> None:
        """A resumed run numbers its channel's events on from where its wait left them."""
        if payload.resumes and payload.events:
            self.outbox.continue_at(self.keys.execution_events(record.id), payload.events)

    def forget(self, execution_id: str) -> None:
        """The run ended: a message it held (it failed before it could wait) is dropped."""
        self._held.pop(execution_id, None)

    def resume(self, payload: TaskPayload, record: ExecutionRecord) -> dict[str, Any] | None:
        """The engine's `resume=` when the task continues a waiting execution: its saved state
        and the user's reply (or none: its time limit passed)."""
        if not payload.resumes:
            return None
        saved = retrying(lambda: self.waiting.resume_state(record.id), "resume state", log)
        if saved is None:
            raise StateGone("the state of this waiting execution is gone (expired?)")
        resume: dict[str, Any] = {"state": saved["engine"], "reply": payload.reply}
        if payload.expired:
            resume["expired"] = True
        return resume

    def pause(
        self,
        payload: TaskPayload,
        running: ExecutionRecord,
        run: Run,
        run_data: dict[str, Any],
        turns: Sequence[TurnWrite] = (),
    ) -> tuple[str, dict[str, Any] | None]:
        """The run waits for its user's reply: ("reply", the reply item) when one already came
        (the run goes on at once), ("paused", None) once it waits in Redis, ("stopped", None)
        when a stop was asked for, or ("refused", None) if the record stopped being this
        worker's (reaped). The run's memory `turns` are written with the reply taken or the
        wait."""
        state = run.waiting or {}
        wait_for = state.get("waitFor") or "reply"
        line = self._line_left(payload, running, wait_for)
        waiting = running.next(
            status=Status.WAITING,
            waiting_since=now_ms(),
            wait_till=state.get("waitTill"),
            waiting_node=state.get("node"),
            wait_for=wait_for,
            last_node_executed=run.last_node,
            **run_data,
        )
        # What a resume needs besides the engine's state: the workflow version it started with,
        # as its task named it, its trigger, where the editor (if it started it) listens, whether
        # it streams and how many events its channel carried (the resumed run numbers on).
        saved = dumps({"engine": state, "source": payload.source(), "trigger": payload.start_node,
                       "pushRef": payload.push_ref, "streaming": payload.streaming,
                       "events": self._published(running.id),
                       "leftLine": line is not None})  # fmt: skip
        attempt = secrets.token_hex(8)  # its retries get the answer its first try got
        outcome, reply = retrying(
            lambda: self.store.pause(running, waiting, saved, attempt, turns, wait_for == "reply"),
            "waiting for a reply",
            log,
        )
        held = self._held.pop(running.id, None)
        if held is not None and outcome in ("paused", "reply"):
            self._send(payload, running.id, held)
        if outcome in ("paused", "refused"):  # it left this worker: no numbering kept for it
            self.outbox.forget(self.keys.execution_events(running.id))
        if outcome == "paused" and line is not None:
            retrying(lambda: self.store.lines.leave(line, running.id), "the session's line", log)
        if outcome == "refused":
            log.warning("execution %s stopped being ours before it could wait", running.id)
        elif outcome == "paused" and payload.push_ref:
            data = {"executionId": running.id, "waitingNode": state.get("node")}
            self.outbox.event(self.keys.push(payload.push_ref), "executionWaiting", data)
        return outcome, (json.loads(reply) if reply else None)
