"""Conversations inside one execution, on the api's side (responseNodes mode): starting one (the
POST answers at once with the execution id) and handing the user's messages to it.

A session has at most one unfinished responseNodes execution, and every message of the session
goes to it while it is unfinished, in order (core/execution_transitions.py `reply`):
- it waits for a reply: the message resumes it (`waiting -> new`, compare-and-set, so exactly
  one message resumes one wait), and is enqueued like any execution: whichever worker takes it
  continues from the state in Redis; a Wait node's wait is not a Chat node's, and a message
  coming meanwhile is queued for the next Chat node, as for a running execution;
- it is new or running: the message is queued as its next reply, which its next Chat node takes
  when it waits. Two quick messages (`hello`, then at once `Ada`) are one conversation, never
  two executions where the first waits for a reply the second holds.
Only a message that finds no unfinished execution in its session starts a new one. It makes no
difference whether a message comes by POST or over the chat WebSocket.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from api import resume_tokens
from api.chat_files import reply_binary
from api.errors import ApiError
from api.launcher import LaunchError
from core.answers import finished_text
from core.execution_outcomes import Reply
from core.execution_record import ExecutionRecord
from core.waiting import WaitingStore

# A message finds the session's conversation, which ends before the message reaches it, so it
# starts one, which another message started meanwhile...: a few times at most, in practice once.
JOIN_ATTEMPTS = 5


class ReplyRefused(Exception):
    """The reply cannot be delivered; the message says why, for the chat user."""


def start_or_reply(rt, raw, workflow, trigger, items, session_id, headers) -> Response:
    """The POST of a Chat Trigger in responseNodes mode: the next reply of the session's
    unfinished conversation, or the start of a new one. The start itself checks again, in the
    same step (core/execution_transitions.py `create`): two messages at once start one conversation."""
    current = unfinished_in_session(rt, workflow.id, session_id)
    for _ in range(JOIN_ATTEMPTS):
        if current is not None:
            try:
                deliver(rt, current, session_id, items[0]["json"], items[0].get("binary"))
                return _started(rt, current.id, headers)
            except ReplyRefused:
                pass  # it finished meanwhile: the message starts the next one
        launched = rt.launcher.start(
            raw,
            workflow,
            trigger,
            items,
            mode="webhook",
            response_mode="responseNodes",
            session_id=session_id,
        )
        if not launched.joined:
            return _started(rt, launched.execution_id, headers)
        current = rt.executions.get(launched.execution_id)  # started by a message beside this
    raise ApiError(503, "This chat session is busy; send the message again.")


def _started(rt, execution_id: str, headers: dict[str, str]) -> Response:
    # n8n's resumeToken (api/resume_tokens.py): the chat socket requires it.
    token = resume_tokens.mint(rt, execution_id)
    response = jsonify(
        {"executionStarted": True, "executionId": execution_id, "resumeToken": token}
    )
    response.headers.update({**headers, "X-Execution-Id": execution_id})
    return response


def unfinished_in_session(rt, workflow_id: str, session_id: str | None) -> ExecutionRecord | None:
    """The session's unfinished responseNodes execution, if it has one."""
    if not session_id:
        return None
    ids = rt.redis.lrange(rt.keys.session_queue(workflow_id, session_id), 0, -1)
    for execution_id in ids:
        record = rt.executions.get(execution_id)
        if record is not None and not record.finished and record.response_mode == "responseNodes":
            return record
    return None


def check_execution(record: ExecutionRecord | None, session_id: str) -> ExecutionRecord:
    """The record, if this chat session may talk to it (an id of another session reads as
    unknown, so ids of other people's chats reveal nothing)."""
    if record is None or record.session_id != session_id:
        raise ReplyRefused("There is no such execution in this chat session.")
    return record


def deliver_reply(rt, execution_id: str, session_id: str, body: dict[str, Any]) -> None:
    """Hand the user's message to the execution (the chat socket's path, its files checked by
    api/chat_files.py reply_files); ReplyRefused if it has finished."""
    record = check_execution(rt.executions.get(execution_id), session_id)
    deliver(rt, record, session_id, body, reply_binary(body.get("files")))


def deliver(
    rt,
    record: ExecutionRecord,
    session_id: str,
    body: dict[str, Any],
    binary: dict[str, Any] | None = None,
) -> None:
    """The reply item as n8n's chat service builds it: `{sessionId, action, chatInput}`, and the
    files as binary data (the socket's as `data_0`, ...; a POST's as the trigger read them)."""
    reply: dict[str, Any] = {
        "json": {
            "sessionId": session_id,
            "action": "sendMessage",
            "chatInput": body.get("chatInput", ""),
        }
    }
    if binary:
        reply["binary"] = binary
    outcome, queued = rt.executions.reply(record, reply)
    if outcome == Reply.QUEUED:
        return
    if outcome == Reply.ENDED or queued is None:
        raise ReplyRefused(not_waiting(rt.executions.get(record.id) or record))
    saved = WaitingStore(rt.executions).resume_state(record.id)
    if saved is None:
        rt.executions.fail_start(queued, "The state of this waiting execution is gone.")
        raise ReplyRefused("This conversation's state is gone (it expired); start a new one.")
    try:
        rt.launcher.resume(queued, saved, reply)
    except LaunchError as err:
        raise ReplyRefused(str(err)) from None


def not_waiting(record: ExecutionRecord) -> str:
    if record.finished:
        return finished_text(record.status)
    return "This execution is not waiting for a reply right now."
