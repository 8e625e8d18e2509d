"""The relay of one hub reply: an execution's events, read as a webhook's stream reads them
(api/responses.py `Outcome`: the relay's confirmed subscription, missed events caught up,
quiet intervals checking the execution is alive), turned into the conversation's AI messages
and n8n's push events.

- streaming: an AI message per Agent run (n8n keys them by node, run and item index), begun by
  its `begin` chunk, its text appended per `item` (core/hub_stream.py: in Redis before the
  browser is told), ended by `end`; an `error` chunk ends it with status error.
- lastNode: one AI message, begun at once, holding the output when the execution ends.
- responseNodes: an AI message per Chat node message; one that waits for an answer (free text,
  or approval buttons) ends with status waiting, and so does the relay: the answer (the hub's
  next message, or a button's link) resumes the execution and a new relay follows it.

The execution's end ends every message still open with its status and sends
chatHubExecutionEnd; a conversation's first reply is then given its title (api/hub/titles.py).
The process relaying holds the run's lease (core/hub_runs.py), renewed as it goes; another
process takes over only once it ran out.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Any

from api.hub import titles
from api.hub.state import HubRuntime
from api.launcher import Launch
from api.relay import Stream
from api.responses import Outcome
from core.answers import output_text
from core.chat_node_message import ChatNodeMessage
from core.clock import now_ms
from core.events import Event, Kind
from core.execution_record import Status
from core.hub_batch import Batch
from core.hub_records import AI, HubMessage, HubRun, MessageStatus
from core.hub_stream import TooLong
from core.public_errors import public_error
from core.results import FinalResult
from core.stops import request_stop
from core.waiting import WaitingStore

log = logging.getLogger("mini_n8n.hub")

STATUS = {
    Status.SUCCESS: MessageStatus.SUCCESS,
    Status.CANCELED: MessageStatus.CANCELLED,
    Status.WAITING: MessageStatus.WAITING,
}
LAST_NODE = "lastNode"


def joined(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive `item` chunks of one Agent run as one: what came together (the worker's
    outbox sends what accumulated in one message) is appended and announced together."""
    out: list[dict[str, Any]] = []
    for chunk in chunks:
        last = out[-1] if out else None
        if (
            last is not None
            and chunk.get("type") == last.get("type") == "item"
            and isinstance(chunk.get("content"), str)
            and isinstance(last.get("content"), str)
            and _run_of(chunk) == _run_of(last)
        ):
            out[-1] = {**last, "content": last["content"] + chunk["content"]}
        else:
            out.append(chunk)
    return out


def _key(chunk: dict[str, Any]) -> str:
    """Which AI message a chunk belongs to: n8n's aggregator keys them by node, run and item."""
    meta = chunk.get("metadata") or {}
    return f"{meta.get('nodeId')}|{meta.get('runIndex', 0)}|{meta.get('itemIndex', 0)}"


def _first_text(chunks: list[dict[str, Any]], index: int) -> str | None:
    """The text of the item right after a begin at `index`, of the same message; else None."""
    if index + 1 >= len(chunks) or chunks[index].get("type") != "begin":
        return None
    item = chunks[index + 1]
    content = item.get("content")
    if item.get("type") != "item" or not isinstance(content, str) or not content:
        return None
    return content if _key(item) == _key(chunks[index]) else None


def _run_of(chunk: dict[str, Any]) -> tuple[Any, ...]:
    meta = chunk.get("metadata") or {}
    return meta.get("nodeId"), meta.get("runIndex", 0), meta.get("itemIndex", 0)


def answers_at_end(run: HubRun) -> bool:
    """Whether the execution's output is the answer when nothing streamed (not Chat nodes')."""
    return run.response_mode != "responseNodes"


class Gone(Exception):
    """The conversation was deleted while it answered."""


class ReplyFeed:
    def __init__(self, h: HubRuntime, run: HubRun, stream: Stream, lease: str,
                 ready: threading.Event | None = None):  # fmt: skip
        """`ready`: set once what the reply's start writes is written (the relay may begin at
        once and read its first events meanwhile, but tells nothing before); `abandoned` then
        says the start failed."""
        self.h = h
        self.rt = h.rt
        self.run = run
        self.lease = lease
        self.ready = ready
        self.abandoned = False
        self.outcome = Outcome(Launch(run.execution_id, stream), self.rt.executions,
                               self.rt.relay(), self.rt.settings, self.rt.liveness)  # fmt: skip
        self.renewed = time.monotonic()
        # The text of each message this relay began, as it appended it: its end needs no read.
        self.texts: dict[str, list[str]] = {}

    # --- the loop ---------------------------------------------------------------------------
    def __call__(self) -> None:
        if self.ready is not None:
            self.ready.wait()
            if self.abandoned:
                self.outcome.close()
                return
        ended: MessageStatus | None = None
        try:
            ended = self._relay()
        except Gone:
            request_stop(self.rt.executions, self.run.execution_id)
        except Exception:
            log.exception("hub reply %s: the relay failed", self.run.execution_id)
            ended = self._done(FinalResult(Status.ERROR, "The reply's relay failed.", public=True))
        finally:
            self.outcome.close()
            self.h.runs.release(self.run.execution_id, self.lease)
        if ended == MessageStatus.SUCCESS and self.run.title_after:
            titles.give_title(self.h, self.run)

    def _relay(self) -> MessageStatus | None:
        if self.run.response_mode == "responseNodes":
            waited = self._pending_chat_messages()
            if waited:
                return MessageStatus.WAITING
        elif self.run.response_mode == LAST_NODE and not self.run.messages:
            self._begin(LAST_NODE)
        while True:
            event = self.outcome.next_event()
            if not self._kept_lease():
                return None  # another process relays it now
            if event is None:
                continue
            ended = self._event(event)
            if ended is not None:
                return ended

    def _event(self, event: Event) -> MessageStatus | None:
        if event.kind == Kind.LINES:
            lines = joined([json.loads(line) for line in event.body.splitlines() if line.strip()])
            index = 0
            while index < len(lines):
                seq = event.seq if index == len(lines) - 1 else None
                first = _first_text(lines, index)
                if first is not None:  # a begin and its first text: begun and shown together
                    key = _key(lines[index])
                    if key not in self.run.open:
                        self._begin(key, event.seq if index + 1 == len(lines) - 1 else None,
                                    first=first)  # fmt: skip
                        index += 2
                        continue
                self._chunk(lines[index], seq)
                index += 1
        elif event.kind == Kind.MESSAGE:
            if self._chat_message(ChatNodeMessage.from_json(event.body)):
                return MessageStatus.WAITING
        elif event.kind == Kind.DONE:
            result = event.body
            if not isinstance(result, FinalResult):
                result = FinalResult.from_json(result)
            return self._done(result)
        return None

    def _kept_lease(self) -> bool:
        if time.monotonic() - self.renewed < self.rt.settings.keepalive_seconds:
            return True
        self.renewed = time.monotonic()
        return self.h.runs.renew(self.run.execution_id, self.lease)

    # --- streaming ----------------------------------------------------------------------------
    def _chunk(self, chunk: dict[str, Any], seq: int | None) -> None:
        kind = chunk.get("type")
        key = _key(chunk)
        if kind == "begin":
            if key not in self.run.open:  # a begin read again after a takeover is not new
                self._begin(key, seq)
        elif kind == "item":
            content = chunk.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if text:
                message_id = self.run.open.get(key) or self._begin(key)
                self._text(message_id, text, seq)
        elif kind == "end":
            message_id = self.run.open.pop(key, "")
            if message_id:
                self._end(message_id, MessageStatus.SUCCESS, seq=seq)
        elif kind == "error":
            content = chunk.get("content")
            message_id = self.run.open.pop(key, "") or self._begin(key)
            self._fail(message_id, str(content or "The workflow could not answer."), seq)

    def _begin(self, key: str, seq: int | None = None, first: str | None = None) -> str:
        """A new AI message, stored with the run and announced in one round trip (with its
        first text, when that came with its begin)."""
        run, h = self.run, self.h
        message = HubMessage(
            id=str(uuid.uuid4()), session_id=run.session_id, type=AI, name="AI", content="",
            status=MessageStatus.RUNNING, created_at=now_ms(), updated_at=now_ms(),
            previous_message_id=run.last_message,
            retry_of_message_id=None if run.messages else run.retry_of,
            execution_id=run.execution_id, provider=run.model.get("provider"),
            model=run.model.get("model"), workflow_id=run.model.get("workflowId"),
            agent_id=run.model.get("agentId"),
        )  # fmt: skip
        run.open[key] = message.id
        run.messages.append(message.id)
        self.texts[message.id] = []
        batch = Batch(self.rt.redis)
        batch.call("EXISTS", self.rt.keys.hub_conversation(run.session_id))
        h.conversations.queue_message(batch, message, [])
        h.runs.queue_save(batch, run, consumed=seq)
        data = {"messageId": message.id, "previousMessageId": message.previous_message_id,
                "retryOfMessageId": message.retry_of_message_id, "executionId": run.execution_id}  # fmt: skip
        after = [h.events.queue(batch, run.user_id, run.session_id, "chatHubStreamBegin", data)]
        if first:
            after.append(h.events.queue(
                batch, run.user_id, run.session_id, "chatHubStreamChunk",
                {"messageId": message.id, "content": first}, append=(message.id, first),
            ))  # fmt: skip
        replies = batch.execute()
        shown = bool(first)
        for told in after:
            try:
                told(replies)
            except TooLong:
                shown = False
                log.warning("hub reply %s: past its size bound", run.execution_id)
        if shown and first:
            self.texts[message.id].append(first)
            time.sleep(0)  # this process's tabs write it before the relay goes on
        if not replies[0]:  # deleted while it answered: what was just written goes too
            self.rt.redis.delete(self.rt.keys.hub_messages(run.session_id))
            raise Gone()
        return message.id

    def _text(self, message_id: str, text: str, seq: int | None) -> None:
        try:
            self._emit("chatHubStreamChunk", message_id, seq, append=text, content=text)
            if message_id in self.texts:
                self.texts[message_id].append(text)
            time.sleep(0)  # this process's tabs write it before the relay goes on
        except TooLong:
            log.warning("hub reply %s: past its size bound, the rest is dropped",
                        self.run.execution_id)  # fmt: skip

    def _end(self, message_id: str, status: MessageStatus, seq: int | None = None,
             text: str | None = None) -> None:  # fmt: skip
        if text is None and message_id in self.texts:
            text = "".join(self.texts[message_id])
        stored = self.h.conversations.finish(self.run.session_id, message_id, status, text)
        final = MessageStatus(stored.status) if stored is not None else status
        self._emit("chatHubStreamEnd", message_id, seq, status=final.value)

    def _fail(self, message_id: str, error: str, seq: int | None = None) -> None:
        streamed = self.h.conversations.message(self.run.session_id, message_id)
        text = None if streamed is not None and streamed.content else error
        self._emit("chatHubStreamError", message_id, None, error=error)
        self._end(message_id, MessageStatus.ERROR, seq, text)

    # --- Chat nodes (responseNodes) -----------------------------------------------------------
    def _pending_chat_messages(self) -> bool:
        """The Chat-node messages sent before this relay subscribed; True if one waits."""
        waits = WaitingStore(self.rt.executions)
        for message in waits.messages(self.run.execution_id, self.run.chat_messages):
            if self._chat_message(message):
                return True
        return False

    def _chat_message(self, message: ChatNodeMessage) -> bool:
        """One Chat node message as an AI message; True when it waits for the user."""
        if message.n is None or message.n < self.run.chat_messages:
            return False  # relayed already
        self.run.chat_messages = message.n + 1
        message_id = self._begin(f"chat|{message.n}")
        self.run.open.pop(f"chat|{message.n}", None)
        self._text(message_id, message.text, None)
        status = MessageStatus.WAITING if message.wait else MessageStatus.SUCCESS
        self._end(message_id, status)
        if message.wait:
            self._execution_end(MessageStatus.SUCCESS)
        else:
            self.h.runs.save(self.run)
        return message.wait

    # --- the end ------------------------------------------------------------------------------
    def _done(self, result: FinalResult) -> MessageStatus:
        run = self.run
        status = STATUS.get(result.status, MessageStatus.ERROR)
        error = None
        if status == MessageStatus.ERROR:
            error = public_error(result.status, result.error, run.execution_id, ours=result.public)
        answer = output_text(result.output) if result.ok else ""
        if status == MessageStatus.SUCCESS and not run.messages and answers_at_end(run):
            self._begin(LAST_NODE)  # nothing streamed: the output as one message
        for key, message_id in list(run.open.items()):
            run.open.pop(key)
            if error is not None:
                self._fail(message_id, error)
            elif key == LAST_NODE or (result.read_from_record and not result.complete):
                self._whole(message_id, answer, status)
            else:
                self._end(message_id, status)
        if error is not None and not run.messages:
            self._fail(self._begin("error"), error)
            run.open.pop("error", None)
        self._execution_end(status)
        return status

    def _whole(self, message_id: str, text: str, status: MessageStatus) -> None:
        """The output as the message's text (lastNode; or a stream whose relay missed part)."""
        stored = self.h.conversations.message(self.run.session_id, message_id)
        if text and stored is not None and stored.content != text:
            rest = text[len(stored.content) :] if text.startswith(stored.content) else None
            if rest is not None:
                self._text(message_id, rest, None)
                self._end(message_id, status)
                return
        self._end(message_id, status, text=text or None)

    def _execution_end(self, status: MessageStatus) -> None:
        """The run saved, the conversation's running reply let go, chatHubExecutionEnd: one
        round trip."""
        run, h = self.run, self.h
        batch = Batch(self.rt.redis)
        h.runs.queue_save(batch, run)
        h.conversations.queue_release(batch, run.session_id, run.execution_id)
        after = h.events.queue(batch, run.user_id, run.session_id, "chatHubExecutionEnd",
                               {"status": status.value})  # fmt: skip
        after(batch.execute())

    # --- events -------------------------------------------------------------------------------
    def _emit(self, event_type: str, message_id: str | None, seq: int | None,
              append: str | None = None, **data: Any) -> int:  # fmt: skip
        if message_id is not None:
            data = {"messageId": message_id, **data}
        return self.h.events.emit(
            self.run.user_id, self.run.session_id, event_type, data,
            append=(message_id, append) if append is not None and message_id else None,
            consumed=(self.run.execution_id, seq) if seq is not None else None,
        )  # fmt: skip
