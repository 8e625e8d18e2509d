"""Chat sessions kept by Redis Chat Memory: list, show, clear. (Simple Memory lives inside the
workers and cannot be read from here.)

Public chats' sessions are addressed by their session key. A protected chat's (basic auth, or
not public) live in its workflow's own namespace: the list gives them under "protected" as
`{"workflowId", "id"}`, and show and clear reach them with `?workflowId=<id>`.
"""

from __future__ import annotations

from flask import jsonify, request

from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime
from core.keys import ReservedKeyError
from memory.redis import RedisMemory, protected_sessions


@bp.get("/sessions")
def list_sessions():
    rt = runtime()
    protected = [
        {"workflowId": workflow_id, "id": session}
        for workflow_id, session in protected_sessions(rt.redis, rt.keys)
    ]
    return jsonify({"data": rt.memory.sessions(), "protected": protected})


@bp.get("/sessions/<path:session_id>")
def show_session(session_id: str):
    workflow_id = request.args.get("workflowId")
    try:
        messages = _memory(workflow_id).messages(session_id)
    except ReservedKeyError as err:
        raise ApiError(400, str(err)) from None
    if not messages:
        raise ApiError(404, f"chat session {session_id} not found")
    found = [{"role": m.role, "content": m.content} for m in messages]
    return jsonify({**_session(session_id, workflow_id), "messages": found})


@bp.delete("/sessions/<path:session_id>")
def clear_session(session_id: str):
    workflow_id = request.args.get("workflowId")
    try:
        _memory(workflow_id).clear(session_id)
    except ReservedKeyError as err:
        raise ApiError(400, str(err)) from None
    return jsonify({**_session(session_id, workflow_id), "cleared": True})


def _memory(workflow_id: str | None) -> RedisMemory:
    rt = runtime()
    if workflow_id is None:
        return rt.memory
    return RedisMemory(rt.redis, rt.keys, workflow_id=workflow_id)


def _session(session_id: str, workflow_id: str | None) -> dict[str, str]:
    return (
        {"id": session_id} if workflow_id is None else {"workflowId": workflow_id, "id": session_id}
    )
