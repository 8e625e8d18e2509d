"""Starting a hub reply: a message sent, edited or regenerated becomes an execution, on the same
path as every chat message (api/launcher.py: the record, the relay's confirmed subscription and
the task in one step; api/conversation.py to answer a Chat node that waits), and a relay of its
events (api/hub/feed.py) in this process.

In order, as n8n's: the checks (agent, model, files: 4xx, nothing written), the conversation's
one running reply claimed (409 when it has one), the human message stored and announced
(`chatHubHumanMessageCreated`, or `chatHubMessageEdited`), `chatHubExecutionBegin`, then the
execution: a Chat node's waiting question answered when the message follows it, else a new
execution, its memory written first from the branch shown (api/hub/branch_memory.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from api.conversation import JOIN_ATTEMPTS, ReplyRefused, deliver
from api.errors import ApiError
from api.hub import attachments, branch_memory, follow
from api.hub.feed import ReplyFeed
from api.hub.responders import Responder
from api.hub.state import HubRuntime
from api.hub_identity import HubUser
from core.clock import now_ms
from core.hub_batch import Batch
from core.hub_records import HUMAN, HubMessage, HubRun, HubSession, MessageStatus, branch
from core.hub_store import MemoryWrite
from runtime.spawn import spawn


@dataclass
class Turn:
    """One reply to start: the conversation, what answers, the human message it answers."""

    session: HubSession
    responder: Responder
    human: HubMessage
    files: list[attachments.File]
    messages: dict[str, HubMessage]  # the tree, the human message included
    retry_of: str | None = None
    title_after: bool = False
    claim: str = field(default="")
    new_session: bool = False  # the conversation is stored with the reply's start
    announce: str | None = None  # "created" or "edited": the human message is new
    memory: list[str] = field(default_factory=list)  # the memory lists the run was given


def human_message(session: HubSession, user: HubUser, message_id: str, text: str,
                  previous: str | None, files: list[attachments.File]) -> HubMessage:  # fmt: skip
    at = now_ms()
    return HubMessage(
        id=message_id, session_id=session.id, type=HUMAN, name=user.first_name or "User",
        content=text, status=MessageStatus.SUCCESS, created_at=at, updated_at=at,
        previous_message_id=previous, attachments=[f.record() for f in files],
    )  # fmt: skip


def start(h: HubRuntime, user: HubUser, turn: Turn) -> str:
    """Claim the conversation's running reply (409 when it has one), with the memory written
    from the branch shown; begin the execution that answers `turn.human`; then store and
    announce what the turn adds (the conversation, the human message, the claim handed to the
    execution, the run) in one round trip while a worker takes it; and relay it. The
    execution's id."""
    parent = turn.messages.get(turn.human.previous_message_id or "")
    waiting = follow.waiting_run(h, parent) if turn.retry_of is None else None
    memory = [] if waiting is not None else _memory(h, turn)
    turn.claim = follow.claim(h, turn.session.id, memory)
    turn.memory = [m.key for m in memory]
    try:
        follow.stop_other_waits(h, turn.session.id, turn.messages, keep=waiting)
        if waiting is not None:
            run, stream = _answer_wait(h, turn, waiting)
        else:
            run, stream = _launch(h, user, turn)
        # The relay starts now, so the worker's first events find it reading; it tells
        # nothing before the turn is written.
        ready = threading.Event()
        feed = ReplyFeed(h, run, stream, "", ready=ready)
        spawn(feed)
        try:
            feed.lease = _record(h, user, turn, run)
        except BaseException:
            feed.abandoned = True
            raise
        finally:
            ready.set()
        time.sleep(0)  # the relay reads from now on, not once this request is answered
    finally:
        h.conversations.release(turn.session.id, turn.claim)  # nothing, once handed over
    return run.execution_id


def _memory(h: HubRuntime, turn: Turn) -> list[MemoryWrite]:
    shown = branch(turn.messages, turn.human.previous_message_id)
    return branch_memory.writes(turn.responder.workflow, h.rt.keys, turn.session.id, shown)


def _record(h: HubRuntime, user: HubUser, turn: Turn, run: HubRun) -> str:
    """Everything the turn writes, in one batch; the relay's lease. A conversation gone or a
    message id taken meanwhile (it was checked before) stops the execution."""
    batch = Batch(h.rt.redis)
    saved = h.conversations.queue_save(batch, turn.session, create=turn.new_session)
    stored = None
    if turn.announce is not None:
        data = [f.data for f in turn.files]
        stored = h.conversations.queue_message(batch, turn.human, data)
    after = [h.events.queue(batch, user.id, turn.session.id, *event)
             for event in _announced(turn)]  # fmt: skip
    handed = h.conversations.queue_hand_over(batch, turn.session.id, turn.claim, run.execution_id)
    h.runs.queue_save(batch, run)
    taken, lease = h.runs.queue_take(batch, run.execution_id)
    for key in turn.memory:  # deleted with the conversation
        batch.call("SADD", h.rt.keys.hub_memory(turn.session.id), key)
    replies = batch.execute()
    for publish in after:
        publish(replies)
    if not replies[saved] or (stored is not None and not replies[stored]) or not replies[handed]:
        follow.stop(h, h.rt.executions.get(run.execution_id))
        raise ApiError(409, "This conversation changed meanwhile; send the message again.")
    return lease if replies[taken] else ""


def _announced(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    """The human message's event (n8n's chatHubHumanMessageCreated or chatHubMessageEdited;
    none for a regenerate), then chatHubExecutionBegin."""
    message = turn.human
    events: list[tuple[str, dict[str, Any]]] = []
    if turn.announce is not None:
        files = [
            {"id": f"{message.id}:{i}", "fileName": a.file_name, "mimeType": a.mime_type}
            for i, a in enumerate(message.attachments)
        ]
        data: dict[str, Any] = {"messageId": message.id, "content": message.content,
                                "attachments": files}  # fmt: skip
        if turn.announce == "edited":
            events.append(("chatHubMessageEdited",
                           {**data, "revisionOfMessageId": message.revision_of_message_id}))  # fmt: skip
        else:
            events.append(("chatHubHumanMessageCreated",
                           {**data, "previousMessageId": message.previous_message_id}))  # fmt: skip
    events.append(("chatHubExecutionBegin", {}))
    return events


def _launch(h: HubRuntime, user: HubUser, turn: Turn):
    rt, responder, session = h.rt, turn.responder, turn.session
    text = turn.human.content
    if responder.generated:
        text = attachments.inline(text, turn.files)
    body = {"sessionId": session.id, "action": "sendMessage", "chatInput": text}
    if responder.generated:
        body["systemMessage"] = responder.system_message
    files = [] if responder.generated else turn.files
    item = attachments.trigger_item(body, files)
    launched = None
    for _ in range(JOIN_ATTEMPTS):
        launched = rt.launcher.start(
            responder.raw, responder.workflow, responder.trigger, [item], mode="webhook",
            response_mode=responder.response_mode, session_id=session.id, subscribe=True,
        )  # fmt: skip
        if not launched.joined:
            break
        record = rt.executions.get(launched.execution_id)  # a conversation left unfinished
        with contextlib.suppress(ReplyRefused):
            follow.stop(h, record)
    if launched is None or launched.stream is None:
        raise ApiError(503, "This conversation is busy; send the message again.")
    model = responder.ref.to_json()
    run = HubRun(
        execution_id=launched.execution_id, user_id=user.id, session_id=session.id,
        response_mode=responder.response_mode, reply_to=turn.human.id, model=model,
        retry_of=turn.retry_of, title_after=turn.title_after,
        title_with={"provider": responder.title.provider, "model": responder.title.model,
                    "credential": responder.title.credential or {}},
    )  # fmt: skip
    return run, launched.stream


def _answer_wait(h: HubRuntime, turn: Turn, waiting: HubRun):
    """The message answers a Chat node's question: the waiting execution resumes with it."""
    rt = h.rt
    stream = follow.subscribe(h, waiting.execution_id)
    record = rt.executions.get(waiting.execution_id)
    body = {"chatInput": turn.human.content, "files": []}
    try:
        if record is None:
            raise ReplyRefused("The conversation's state is gone.")
        deliver(rt, record, turn.session.id, body)
    except ReplyRefused as err:
        rt.relay().unsubscribe(stream)
        raise ApiError(409, str(err)) from None
    follow.answered(h, waiting)
    waiting.reply_to, waiting.messages, waiting.open = turn.human.id, [], {}
    waiting.retry_of = None
    return waiting, stream


def new_message_id() -> str:
    return str(uuid.uuid4())
