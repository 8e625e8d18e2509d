"""Conversations inside one execution, on the api's side (responseNodes mode): starting one (the
POST answers at once with the execution id) and delivering the user's reply to the execution
that waits for it (from the chat WebSocket, or from a POST of the same session).

A reply moves the record `waiting -> new` by compare-and-set (core/waiting.py), so exactly one
reply resumes a wait, and is enqueued like any execution: whichever worker takes it continues
from the state in Redis. The session's order holds: a waiting execution keeps the head of its
session's line, and a message POSTed to that session while it waits is its reply, never a new
execution that would run beside it.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from api import resume_tokens
from api.launcher import LaunchError
from core.executions import FINISHED, Status
from core.waiting import WaitingStore


class ReplyRefused(Exception):
    """The reply cannot be delivered; the message says why, for the chat user."""


def start_or_reply(rt, raw, workflow, trigger, items, session_id, headers) -> Response:
    """The POST of a Chat Trigger in responseNodes mode."""
    # If it stopped waiting meanwhile (expired, stopped, another reply won), a new one starts.
    resumed = reply_to_waiting(rt, workflow.id, session_id, items[0]["json"])
    if resumed is not None:
        return _started(rt, resumed, headers)
    launched = rt.launcher.start(
        raw,
        workflow,
        trigger,
        items,
        mode="webhook",
        response_mode="responseNodes",
        session_id=session_id,
    )
    return _started(rt, launched.execution_id, headers)


def reply_to_waiting(rt, workflow_id: str, session_id: str, body: dict[str, Any]) -> str | None:
    """If an execution of the session waits for a reply, deliver `body` as that reply and
    return its id; None when none waits (or it stopped waiting meanwhile)."""
    waiting_id = waiting_in_session(rt, workflow_id, session_id)
    if waiting_id is None:
        return None
    try:
        deliver_reply(rt, waiting_id, session_id, body)
    except ReplyRefused:
        return None
    return waiting_id


def _started(rt, execution_id: str, headers: dict[str, str]) -> Response:
    # n8n's resumeToken (api/resume_tokens.py): the chat socket requires it.
    token = resume_tokens.mint(rt, execution_id)
    response = jsonify(
        {"executionStarted": True, "executionId": execution_id, "resumeToken": token}
    )
    response.headers.update({**headers, "X-Execution-Id": execution_id})
    return response


def waiting_in_session(rt, workflow_id: str, session_id: str | None) -> str | None:
    """The execution at the head of the session's line, if it waits for a reply."""
    if not session_id:
        return None
    head = rt.redis.lindex(rt.keys.session_queue(workflow_id, session_id), 0)
    if head is None:
        return None
    record = rt.executions.get(head)
    return head if record is not None and record["status"] == Status.WAITING else None


def check_execution(record: dict[str, Any] | None, session_id: str) -> dict[str, Any]:
    """The record, if this chat session may talk to it (an id of another session reads as
    unknown, so ids of other people's chats reveal nothing)."""
    if record is None or record.get("sessionId") != session_id:
        raise ReplyRefused("There is no such execution in this chat session.")
    return record


def deliver_reply(rt, execution_id: str, session_id: str, body: dict[str, Any]) -> None:
    """Resume the waiting execution with the user's reply; ReplyRefused if it is not waiting."""
    record = check_execution(rt.executions.get(execution_id), session_id)
    if record["status"] != Status.WAITING:
        raise ReplyRefused(not_waiting(record))
    waits = WaitingStore(rt.executions)
    saved = waits.resume_state(execution_id)
    queued = waits.claim_reply(execution_id) if saved is not None else None
    if saved is None or queued is None:
        raise ReplyRefused(not_waiting(rt.executions.get(execution_id) or record))
    reply = {
        "json": {
            "action": "sendMessage",
            "chatInput": body.get("chatInput", ""),
            "sessionId": session_id,
            "files": body.get("files") or [],
        }
    }
    try:
        rt.launcher.resume(queued, saved["source"], reply, push_ref=saved.get("pushRef"))
    except LaunchError as err:
        raise ReplyRefused(str(err)) from None


def not_waiting(record: dict[str, Any]) -> str:
    status = record["status"]
    if status in FINISHED:
        return f"This execution has already finished ({status}); it takes no more replies."
    return "This execution is not waiting for a reply right now."
