"""Chat sessions kept by Redis Chat Memory: list, show, clear. (Simple Memory lives inside the
workers and cannot be read from here.)"""

from __future__ import annotations

from flask import jsonify

from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime


@bp.get("/sessions")
def list_sessions():
    return jsonify({"data": runtime().memory.sessions()})


@bp.get("/sessions/<path:session_id>")
def show_session(session_id: str):
    messages = runtime().memory.messages(session_id)
    if not messages:
        raise ApiError(404, f"chat session {session_id} not found")
    return jsonify(
        {
            "id": session_id,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
    )


@bp.delete("/sessions/<path:session_id>")
def clear_session(session_id: str):
    runtime().memory.clear(session_id)
    return jsonify({"id": session_id, "cleared": True})
