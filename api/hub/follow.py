"""Following a hub reply beyond the request that started it: the conversation's one running
reply (409 for a second), a Chat node's question answered by the next message or by a button's
link, questions left behind when the user goes down another branch, and a reply whose relaying
process died, taken over by whichever process is asked about the conversation next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from api.errors import ApiError
from api.hub.feed import ReplyFeed
from api.hub.state import HubRuntime, hub
from api.relay import Stream
from core.execution_record import ExecutionRecord, Status
from core.hub_records import AI, HubMessage, HubRun, MessageStatus
from core.hub_store import MemoryWrite
from core.stops import request_stop
from runtime.spawn import spawn

log = logging.getLogger("mini_n8n.hub")

BUSY = "This conversation is already answering: wait for the reply, or stop it."


def claim(h: HubRuntime, session_id: str, memory: list[MemoryWrite] | None = None) -> str:
    """The conversation's running reply, claimed (and `memory` written with it); 409 while
    another reply runs. A reply whose execution ended (or waits) without its relay letting go,
    the relay having died, is taken over (and its relaying taken up, so its messages end)."""
    token, held = h.conversations.claim(session_id, memory=memory)
    if token is not None:
        return token
    if held.startswith("claim-"):
        raise ApiError(409, BUSY)
    record = h.rt.executions.get(held)
    if record is not None and not record.finished and record.status != Status.WAITING:
        ensure_relayed(h, session_id)
        raise ApiError(409, BUSY)
    if not h.runs.relayed(held):
        ensure_relayed(h, session_id)
        token, _ = h.conversations.claim(session_id, seen=held, memory=memory)
        if token is not None:
            return token
    raise ApiError(409, BUSY)


def waiting_run(h: HubRuntime, parent: HubMessage | None) -> HubRun | None:
    """The run whose Chat node asked `parent` and still waits for its answer."""
    if parent is None or parent.type != AI or parent.status != MessageStatus.WAITING:
        return None
    record = h.rt.executions.get(parent.execution_id or "")
    found = h.runs.get(parent.execution_id or "")
    if record is None or record.status != Status.WAITING or found is None:
        return None
    return found[0]


def stop_other_waits(h: HubRuntime, session_id: str, messages: dict[str, HubMessage],
                     keep: HubRun | None) -> None:  # fmt: skip
    """A question left behind (the user went down another branch) is not answered any more:
    its execution stops, so the conversation's next execution is not held behind it."""
    for message in messages.values():
        if message.type != AI or message.status != MessageStatus.WAITING:
            continue
        if keep is not None and message.execution_id == keep.execution_id:
            continue
        record = h.rt.executions.get(message.execution_id or "")
        if record is not None and record.status == Status.WAITING:
            stop(h, record)
        h.conversations.update(session_id, message.id, _cancelled)


def stop(h: HubRuntime, record: ExecutionRecord | None) -> None:
    if record is not None:
        request_stop(h.rt.executions, record.id)


def answered(h: HubRuntime, run: HubRun) -> None:
    """The question the run waited on has its answer: no longer waiting."""
    for message_id in run.messages:
        h.conversations.update(run.session_id, message_id, _answered)


def subscribe(h: HubRuntime, execution_id: str) -> Stream:
    """A confirmed stream of the execution's events, from the first one its relay has not
    applied yet (what came meanwhile is read back from what the execution kept)."""
    stream = h.rt.launcher.open_stream(h.rt.keys.execution_events(execution_id))
    found = h.runs.get(execution_id)
    consumed = found[1] if found else -1
    if consumed >= 0:
        stream.next_seq = consumed + 1
        stream.rejoined()  # catch up from the kept events, as after a dropped connection
    return stream


def follow_resume(execution_id: str) -> Callable[[bool], None]:
    """Before a button's link (api/waiting_webhook.py) resumes this execution: if it answers
    a hub conversation, subscribe to it now, so nothing it sends is missed; the returned call,
    told whether the resume went out, relays it from here (or lets go)."""
    h = hub()
    found = h.runs.get(execution_id)
    lease = h.runs.take(execution_id) if found is not None else None
    if found is None or lease is None:
        return lambda resumed: None
    run = found[0]
    stream = subscribe(h, execution_id)

    def go(resumed: bool) -> None:
        if not resumed:
            h.rt.relay().unsubscribe(stream)
            h.runs.release(execution_id, lease)
            return
        token, _ = h.conversations.claim(run.session_id)
        answered(h, run)
        run.reply_to = run.last_message
        run.messages, run.open, run.retry_of = [], {}, None
        if token is not None:
            h.conversations.hand_over(run.session_id, token, execution_id)
        h.runs.save(run)
        spawn(ReplyFeed(h, run, stream, lease))

    return go


def ensure_relayed(h: HubRuntime, session_id: str) -> None:
    """If the conversation's running reply has no live relay (its process died), relay it
    from here."""
    held = h.conversations.active(session_id)
    if not held or held.startswith("claim-") or h.runs.relayed(held):
        return
    found = h.runs.get(held)
    if found is not None:
        _relay(h, found[0])


def _relay(h: HubRuntime, run: HubRun) -> None:
    lease = h.runs.take(run.execution_id)
    if lease is None:
        return  # another process relays it
    try:
        stream = subscribe(h, run.execution_id)
    except Exception:
        h.runs.release(run.execution_id, lease)
        raise
    h.runs.save(run)
    spawn(ReplyFeed(h, run, stream, lease))


def _cancelled(message: HubMessage) -> bool:
    if message.status != MessageStatus.WAITING:
        return False
    message.status = MessageStatus.CANCELLED
    return True


def _answered(message: HubMessage) -> bool:
    if message.status != MessageStatus.WAITING:
        return False
    message.status = MessageStatus.SUCCESS
    return True
