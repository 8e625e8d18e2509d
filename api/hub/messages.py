"""The message routes: send, edit (a new branch), regenerate (another answer), stop. Each
answers at once, `{"data": {"status": "streaming"}}` as n8n's; the reply follows as push events
(api/hub/feed.py)."""

from __future__ import annotations

from flask import Response, jsonify

from api.errors import ApiError
from api.hub import attachments, bp, requests
from api.hub.conversations import NOT_FOUND, apply_responder, bodies_object, owned
from api.hub.replies import Turn, announce_human, claimed, human_message, start
from api.hub.responders import responder
from api.hub.state import HubRuntime, hub
from api.hub.titles import NEW_CHAT
from api.hub_identity import HubUser, current_user
from core.clock import now_ms
from core.hub_records import AI, HUMAN, HubMessage, HubSession, MessageStatus
from core.hub_store import HubLimit, IdTaken
from core.stops import request_stop

STREAMING = {"data": {"status": "streaming"}}


@bp.post("/conversations/send")
def send():
    h, user = hub(), current_user()
    req = requests.send(bodies_object())
    session = h.conversations.get(req.session_id, user.id)
    if session is None and h.conversations.exists(req.session_id):
        raise ApiError(404, NOT_FOUND)  # another user's
    credential = req.credential_id or (session.credential_id if session else None)
    found = responder(h, user, req.model, credential, req.time_zone)
    attachments.check(req.files, found.file_types, h.rt.settings)
    messages = h.conversations.messages(session.id) if session else {}
    if req.previous_message_id is not None and req.previous_message_id not in messages:
        raise ApiError(400, "The previous message is not in this conversation")
    with claimed(h, req.session_id) as claim:
        session = session or _new_session(h, user, req.session_id)
        apply_responder(session, found)
        human = human_message(session, user, req.message_id, req.text,
                              req.previous_message_id, req.files)  # fmt: skip
        _store(h, session, human, [f.data for f in req.files])
        announce_human(h, user, human, edited=False)
        messages[human.id] = human
        first = req.previous_message_id is None and session.title == NEW_CHAT
        start(h, user, Turn(session, found, human, req.files, messages, title_after=first,
                            claim=claim))  # fmt: skip
    return jsonify(STREAMING)


@bp.post("/conversations/<session_id>/messages/<message_id>/edit")
def edit(session_id: str, message_id: str):
    h, user = hub(), current_user()
    session = owned(session_id)
    req = requests.edit(bodies_object())
    messages = h.conversations.messages(session.id)
    old = _message(messages, message_id)
    if old.type != HUMAN:
        raise ApiError(400, "Editing AI messages is not supported")
    kept = _kept_files(h, session, old, req.keep)
    files = kept + req.files
    found = responder(h, user, req.model, req.credential_id or session.credential_id,
                      req.time_zone)  # fmt: skip
    attachments.check(files, found.file_types, h.rt.settings)  # the new ones too (n8n: not)
    with claimed(h, session.id) as claim:
        apply_responder(session, found)
        human = human_message(session, user, req.message_id, req.text,
                              old.previous_message_id, files)  # fmt: skip
        human.revision_of_message_id = old.revision_of_message_id or old.id
        _store(h, session, human, [f.data for f in files])
        announce_human(h, user, human, edited=True)
        messages[human.id] = human
        start(h, user, Turn(session, found, human, files, messages, claim=claim))
    return jsonify(STREAMING)


@bp.post("/conversations/<session_id>/messages/<message_id>/regenerate")
def regenerate(session_id: str, message_id: str):
    h, user = hub(), current_user()
    session = owned(session_id)
    req = requests.regenerate(bodies_object())
    messages = h.conversations.messages(session.id)
    old = _message(messages, message_id)
    if old.type != AI:
        raise ApiError(400, "Can only regenerate AI messages")
    human = _asked(messages, old)
    files = _kept_files(h, session, human, list(range(len(human.attachments))))
    found = responder(h, user, req.model, req.credential_id or session.credential_id,
                      req.time_zone)  # fmt: skip
    attachments.check(files, found.file_types, h.rt.settings)
    with claimed(h, session.id) as claim:
        apply_responder(session, found)
        h.conversations.save(session)
        retry_of = old.retry_of_message_id or old.id
        start(h, user, Turn(session, found, human, files, messages, retry_of=retry_of,
                            claim=claim))  # fmt: skip
    return jsonify(STREAMING)


@bp.post("/conversations/<session_id>/messages/<message_id>/stop")
def stop(session_id: str, message_id: str):
    h = hub()
    session = owned(session_id)
    message = h.conversations.message(session.id, message_id)
    if message is None:
        raise ApiError(404, "Message not found")
    if message.type != AI:
        raise ApiError(400, "Can only stop AI messages")
    if not message.execution_id:
        raise ApiError(400, "Message is not associated with a workflow execution")
    if message.status != MessageStatus.RUNNING:
        raise ApiError(400, "Can only stop messages that are currently running")
    request_stop(h.rt.executions, message.execution_id)
    h.conversations.update(session.id, message.id, _cancel)
    return Response(status=204)


def _new_session(h: HubRuntime, user: HubUser, session_id: str) -> HubSession:
    at = now_ms()
    session = HubSession(session_id, user.id, NEW_CHAT, at, at, at)
    try:
        created = h.conversations.create(session)
    except HubLimit as err:
        raise ApiError(409, str(err)) from None
    if not created:
        raise ApiError(404, NOT_FOUND)  # taken meanwhile, by another user or tab
    return session


def _store(h: HubRuntime, session: HubSession, message: HubMessage, files: list[str]) -> None:
    try:
        h.conversations.add(session, message, files)
    except (HubLimit, IdTaken) as err:
        raise ApiError(409, str(err)) from None


def _message(messages: dict[str, HubMessage], message_id: str) -> HubMessage:
    found = messages.get(message_id)
    if found is None:
        raise ApiError(404, "Message not found")
    return found


def _asked(messages: dict[str, HubMessage], answer: HubMessage) -> HubMessage:
    """The human message an AI message answers: its nearest human ancestor."""
    current = messages.get(answer.previous_message_id or "")
    seen: set[str] = set()
    while current is not None and current.type != HUMAN and current.id not in seen:
        seen.add(current.id)
        current = messages.get(current.previous_message_id or "")
    if current is None or current.type != HUMAN:
        raise ApiError(400, "This answer has no question to ask again")
    return current


def _kept_files(h: HubRuntime, session: HubSession, message: HubMessage,
                indexes: list[int]) -> list[attachments.File]:  # fmt: skip
    files = []
    for index in indexes:
        data = h.conversations.file(session.id, message.id, index)
        if index >= len(message.attachments) or data is None:
            raise ApiError(400, f"The message has no attachment {index}")
        meta = message.attachments[index]
        files.append(attachments.File(meta.file_name, meta.mime_type, data))
    return files


def _cancel(message: HubMessage) -> bool:
    if message.status != MessageStatus.RUNNING:
        return False
    message.status = MessageStatus.CANCELLED
    return True
