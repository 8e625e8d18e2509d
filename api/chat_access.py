"""Who may talk on a chat WebSocket: the chat's own authentication, as its POST checks it
(public, allowedOrigins, basic auth), and the execution's resumeToken (`&token=`, which that
POST answered with: api/resume_tokens.py), so knowing ids is not enough."""

from __future__ import annotations

from flask import request

from api import resume_tokens
from api.auth import check_webhook_auth
from api.conversation import ReplyRefused
from api.cors import origin_allowed
from api.errors import ApiError
from core.execution_record import ExecutionRecord
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatSettings, ChatTrigger, chat_settings
from engine.workflow import Node


def check_access(rt, record: ExecutionRecord, execution_id: str, token: str) -> ChatSettings:
    """As the Chat Trigger's POST: public, allowedOrigins (browsers apply no CORS to
    WebSockets; the api's own origin, the hosted page, always), its authentication; then the
    resumeToken that POST answered with. The chat's settings; ReplyRefused says why not."""
    node = _trigger(rt, record)
    chat = chat_settings(node)
    if not chat.public:
        raise ReplyRefused("There is no such execution in this chat session.")
    origin = request.headers.get("Origin")
    if origin is not None and not origin_allowed(origin, chat.allowed_origins, request):
        raise ReplyRefused(f"Origin {origin} is not allowed")
    try:
        check_webhook_auth(rt, node, chat.authentication, request)
    except ApiError as err:
        raise ReplyRefused(err.message) from None
    if not token or not resume_tokens.valid(rt, execution_id, token):
        raise ReplyRefused("This chat needs the resumeToken its message was answered with.")
    return chat


def _trigger(rt, record: ExecutionRecord) -> Node:
    try:
        _, workflow = rt.workflows.load(record.workflow_id)
    except WorkflowNotFound:
        raise ReplyRefused("The workflow of this execution is gone.") from None
    triggers = [n for n in workflow.nodes.values() if n.type == ChatTrigger.type]
    if not triggers:
        raise ReplyRefused("The workflow of this execution has no chat.")
    return triggers[0]
