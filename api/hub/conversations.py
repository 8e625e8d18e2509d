"""The conversation routes: list (cursor pages), read, rename or switch agent, delete, a
message's file, and a reconnect's catch-up."""

from __future__ import annotations

import base64

from flask import Response, jsonify, request

from api import bodies
from api.errors import ApiError
from api.hub import bp, follow, requests
from api.hub.dto import message_dto, session_dto
from api.hub.responders import responder
from api.hub.state import hub
from api.hub_identity import current_user
from core.hub_records import AI, HubSession, MessageStatus
from core.stops import request_stop

MAX_PAGE = 100
NOT_FOUND = "Chat session not found"
# Files a browser may show inline: images that run nothing. Anything else downloads.
VIEWABLE = ("image/png", "image/jpeg", "image/gif", "image/webp")


def owned(session_id: str) -> HubSession:
    session = hub().conversations.get(session_id, current_user().id)
    if session is None:
        raise ApiError(404, NOT_FOUND)
    return session


@bp.get("/conversations")
def list_conversations():
    limit = request.args.get("limit", "")
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
        raise ApiError(400, f'"limit" must be a number from 1 to {MAX_PAGE}')
    if request.args.get("type", "production") not in ("production", "manual"):
        raise ApiError(400, '"type" must be production or manual')
    cursor = request.args.get("cursor") or None
    if request.args.get("type") == "manual":  # canvas chats are the editor's, not the hub's
        return jsonify({"data": {"data": [], "nextCursor": None, "hasMore": False}})
    sessions, more = hub().conversations.page(current_user().id, int(limit), cursor)
    page = [session_dto(s) for s in sessions]
    next_cursor = sessions[-1].id if more and sessions else None
    return jsonify({"data": {"data": page, "nextCursor": next_cursor, "hasMore": more}})


@bp.get("/conversations/<session_id>")
def get_conversation(session_id: str):
    session = owned(session_id)
    follow.ensure_relayed(hub(), session.id)
    return jsonify({"data": conversation(session)})


def conversation(session: HubSession) -> dict:
    messages = hub().conversations.messages(session.id)
    ordered = sorted(messages.values(), key=lambda m: (m.created_at, m.id))
    return {
        "session": session_dto(session),
        "conversation": {"messages": {m.id: message_dto(m) for m in ordered}},
    }


@bp.patch("/conversations/<session_id>")
def update_conversation(session_id: str):
    owned(session_id)
    h, user = hub(), current_user()
    changes = requests.conversation_update(bodies_object())
    found = None
    if "agent" in changes:
        current = owned(session_id)
        found = responder(h, user, changes["agent"], current.credential_id, None)

    def change(session: HubSession) -> bool:
        if "title" in changes:
            session.title = changes["title"]
        if "credentialId" in changes:
            session.credential_id = changes["credentialId"]
        if "toolIds" in changes:
            session.tool_ids = changes["toolIds"]
        if found is not None:
            apply_responder(session, found)
        return True

    session = h.conversations.change(session_id, user.id, change)
    if session is None:
        raise ApiError(404, NOT_FOUND)
    return jsonify({"data": conversation(session)})


def apply_responder(session: HubSession, found) -> None:
    """The conversation is now answered by `found` (n8n resets the model columns so)."""
    ref = found.ref
    session.provider, session.model = ref.provider, ref.model
    session.workflow_id, session.agent_id = ref.workflow_id, ref.agent_id
    session.agent_name, session.agent_icon = found.name, found.icon
    if found.credential_id:
        session.credential_id = found.credential_id


@bp.delete("/conversations/<session_id>")
def delete_conversation(session_id: str):
    session = owned(session_id)
    h = hub()
    for message in h.conversations.messages(session.id).values():
        running = (MessageStatus.RUNNING, MessageStatus.WAITING)
        if message.type == AI and message.status in running and message.execution_id:
            request_stop(h.rt.executions, message.execution_id)
    h.conversations.delete(session)
    return Response(status=204)


@bp.get("/conversations/<session_id>/messages/<message_id>/attachments/<int:index>")
def attachment(session_id: str, message_id: str, index: int):
    session = owned(session_id)
    h = hub()
    message = h.conversations.message(session.id, message_id)
    data = h.conversations.file(session.id, message_id, index)
    if message is None or data is None or index >= len(message.attachments):
        raise ApiError(404, "Attachment not found")
    meta = message.attachments[index]
    disposition = "inline" if meta.mime_type in VIEWABLE else "attachment"
    name = meta.file_name.replace('"', "").replace("\\", "")
    return Response(
        base64.b64decode(data),
        mimetype=meta.mime_type if meta.mime_type in VIEWABLE else "application/octet-stream",
        headers={
            "Content-Disposition": f'{disposition}; filename="{name}"',
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, no-store",
        },
    )


@bp.post("/conversations/<session_id>/reconnect")
def reconnect(session_id: str):
    """What the browser missed since `lastSequence`: n8n's fields (`pendingChunks`, the chunks'
    text), and ours, `pendingEvents`, every event (begin, end and the rest) in order."""
    session = owned(session_id)
    last = request.args.get("lastSequence", "0")
    if not last.isdigit():
        raise ApiError(400, '"lastSequence" must be a whole number of 0 or more')
    h = hub()
    follow.ensure_relayed(h, session.id)
    missed = h.events.since(session.id, int(last))
    running = [
        m for m in h.conversations.messages(session.id).values()
        if m.type == AI and m.status == MessageStatus.RUNNING
    ]  # fmt: skip
    current = max(running, key=lambda m: (m.created_at, m.id)).id if running else None
    chunks = [
        {"sequenceNumber": e["data"]["sequenceNumber"], "content": e["data"]["content"]}
        for e in missed
        if e["type"] == "chatHubStreamChunk"
    ]
    return jsonify(
        {
            "data": {
                "hasActiveStream": bool(h.conversations.active(session.id)),
                "currentMessageId": current,
                "pendingChunks": chunks,
                "lastSequenceNumber": h.events.last(session.id),
                "pendingEvents": missed,
            }
        }
    )


def bodies_object() -> dict:
    """The request's JSON object, parsed by the body rules of every door."""
    return bodies.json_object(request, hub().rt.settings.json_max_values)
