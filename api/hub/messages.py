"""The message routes: send, edit (a new branch), regenerate (another answer), stop. Each
answers at once, `{"data": {"status": "streaming"}}` as n8n's; the reply follows as push events
(api/hub/feed.py)."""

from __future__ import annotations

from flask import Response, jsonify

from api.errors import ApiError
from api.hub import attachments, bp, requests
from api.hub.conversations import NOT_FOUND, apply_responder, bodies_object, owned
from api.hub.replies import Turn, human_message, start
from api.hub.responders import responder
from api.hub.state import HubRuntime, hub
from api.hub.titles import NEW_CHAT
from api.hub_identity import HubUser, current_user
from core.clock import now_ms
from core.hub_records import AI, HUMAN, HubMessage, HubSession, MessageStatus
from core.stops import request_stop

STREAMING = {"data": {"status": "streaming"}}


def streaming(execution_id: str) -> Response:
    """n8n's answer, and the execution that replies: the access log (api/access_log.py) names
    it on this request's line, so the process that relays a reply can be told."""
    response = jsonify(STREAMING)
    response.headers["X-Execution-Id"] = execution_id
    return response


@bp.post("/conversations/send")
def send():
    h, user = hub(), current_user()
    req = requests.send(bodies_object())
    also = [h.rt.keys.workflow(req.model.workflow_id)] if req.model.workflow_id else []
    found = h.conversations.lookup(req.session_id, user.id, also)
    if found.taken:
        raise ApiError(404, NOT_FOUND)  # another user's
    session, messages = found.session, found.messages
    if session is None and found.conversations >= h.settings.max_conversations:
        raise ApiError(409, f"You have {h.settings.max_conversations} conversations, the most "
                       "one user may keep: delete some to start a new one.")  # fmt: skip
    _room(h, messages, req.message_id)
    credential = req.credential_id or (session.credential_id if session else None)
    stored = found.also[0] if also else False
    answers = responder(h, user, req.model, credential, req.time_zone, stored)
    attachments.check(req.files, answers.file_types, h.rt.settings)
    if req.previous_message_id is not None and req.previous_message_id not in messages:
        raise ApiError(400, "The previous message is not in this conversation")
    new = session is None
    if session is None:
        at = now_ms()
        session = HubSession(req.session_id, user.id, NEW_CHAT, at, at, at)
    apply_responder(session, answers)
    human = human_message(session, user, req.message_id, req.text, req.previous_message_id,
                          req.files)  # fmt: skip
    session.last_message_at = human.created_at
    first = req.previous_message_id is None and session.title == NEW_CHAT
    turn = Turn(session, answers, human, req.files, {**messages, human.id: human},
                title_after=first, new_session=new, announce="created")  # fmt: skip
    return streaming(start(h, user, turn))


@bp.post("/conversations/<session_id>/messages/<message_id>/edit")
def edit(session_id: str, message_id: str):
    h, user = hub(), current_user()
    req = requests.edit(bodies_object())
    session, messages = _conversation(h, user, session_id)
    old = _message(messages, message_id)
    if old.type != HUMAN:
        raise ApiError(400, "Editing AI messages is not supported")
    _room(h, messages, req.message_id)
    files = _kept_files(h, session, old, req.keep) + req.files
    answers = responder(h, user, req.model, req.credential_id or session.credential_id,
                        req.time_zone)  # fmt: skip
    attachments.check(files, answers.file_types, h.rt.settings)  # the new ones too (n8n: not)
    apply_responder(session, answers)
    human = human_message(session, user, req.message_id, req.text, old.previous_message_id,
                          files)  # fmt: skip
    human.revision_of_message_id = old.revision_of_message_id or old.id
    session.last_message_at = human.created_at
    turn = Turn(session, answers, human, files, {**messages, human.id: human}, announce="edited")
    return streaming(start(h, user, turn))


@bp.post("/conversations/<session_id>/messages/<message_id>/regenerate")
def regenerate(session_id: str, message_id: str):
    h, user = hub(), current_user()
    req = requests.regenerate(bodies_object())
    session, messages = _conversation(h, user, session_id)
    old = _message(messages, message_id)
    if old.type != AI:
        raise ApiError(400, "Can only regenerate AI messages")
    _room(h, messages, None)
    human = _asked(messages, old)
    files = _kept_files(h, session, human, list(range(len(human.attachments))))
    answers = responder(h, user, req.model, req.credential_id or session.credential_id,
                        req.time_zone)  # fmt: skip
    attachments.check(files, answers.file_types, h.rt.settings)
    apply_responder(session, answers)
    retry_of = old.retry_of_message_id or old.id
    turn = Turn(session, answers, human, files, messages, retry_of=retry_of)
    return streaming(start(h, user, turn))


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


def _conversation(h: HubRuntime, user: HubUser,
                  session_id: str) -> tuple[HubSession, dict[str, HubMessage]]:  # fmt: skip
    found = h.conversations.lookup(session_id, user.id)
    if found.session is None:
        raise ApiError(404, NOT_FOUND)
    return found.session, found.messages


def _room(h: HubRuntime, messages: dict[str, HubMessage], new_id: str | None) -> None:
    """The conversation may take another message (its bound, and an id not in use)."""
    if len(messages) >= h.settings.max_messages:
        raise ApiError(409, f"This conversation has {h.settings.max_messages} messages, the "
                       "most one may keep: start a new one.")  # fmt: skip
    if new_id is not None and new_id in messages:
        raise ApiError(409, f"The message id {new_id} is taken.")


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
