"""The Chat Trigger's webhook handler, run in the api, in n8n's order: public? -> origin (CORS)
-> authentication -> the hosted page (GET) or the message (POST): validate it, answer
`loadPreviousSession` from memory without running anything, and start an execution for the rest.

Every answer, errors included, carries the CORS headers of an allowed origin, so an embedded
widget can read it. A request refused here changes nothing: no execution, no memory write.
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import urlencode

from flask import Request, Response, jsonify, redirect
from werkzeug.exceptions import HTTPException

from api import bodies, cors
from api.auth import check_webhook_auth, signed_in_user
from api.body_limit import Door
from api.chat_files import multipart_item
from api.chat_page import page_response
from api.errors import ApiError
from core.users import User
from engine.errors import EngineError, SessionKeyRefused
from engine.nodes.chat_trigger import ChatSettings, chat_settings
from engine.previous_session import previous_session as load_previous_session
from engine.workflow import Node, Workflow

MAX_SESSION_ID = 256
# Session ids become Redis keys and header values: no control characters, no lone surrogates.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
ACTIONS = ("sendMessage", "loadPreviousSession")


def _not_registered(request: Request) -> ApiError:
    # The same answer as an unknown path: a private chat does not reveal that it exists.
    method = "GET" if request.method == "HEAD" else request.method
    path = str((request.view_args or {}).get("path", "")).strip("/")
    return ApiError(404, f'The requested webhook "{method} {path}" is not registered.')


def chat_preflight(node: Node, request: Request, methods: list[str]) -> Response:
    chat = chat_settings(node)
    if not chat.public:
        raise _not_registered(request)
    return cors.preflight(chat.allowed_origins, request, methods)


def handle_chat(rt, workflow: Workflow, node: Node, request: Request, start) -> Response:
    """`start(items, response_mode, session_id, headers)` launches the execution and answers."""
    chat = chat_settings(node)
    if not chat.public:
        raise _not_registered(request)
    cors_headers = cors.cors_headers(chat.allowed_origins, request)
    try:
        response = _answer(rt, workflow, node, chat, request, start)
    except ApiError as err:
        err.headers = {**cors_headers, **err.headers}
        raise
    except HTTPException as err:  # e.g. 413 from the body limit while reading
        raise ApiError(err.code or 500, err.description or err.name, headers=cors_headers) from None
    for name, value in cors_headers.items():
        response.headers.setdefault(name, value)
    return response


def _answer(rt, workflow, node, chat: ChatSettings, request: Request, start) -> Response:
    if request.method in ("GET", "HEAD"):
        return _page(rt, workflow, node, chat, request)
    user = check_webhook_auth(rt, node, chat.authentication, request)
    item = chat_item(request, rt.settings, chat.allowed_file_types)
    body = item["json"]
    if chat.authentication == "n8nUserAuth" and user is not None:
        with_user(body, user, chat.include_user)
    headers: dict[str, str] = {}
    if body.get("sessionId") is None:
        # Never fall back to a shared default session: a fresh one, returned to the client.
        body["sessionId"] = headers["X-Session-Id"] = str(uuid.uuid4())
    if body.get("action", "sendMessage") == "loadPreviousSession":
        return previous_session(rt, workflow, node, chat, body, headers)
    return start([item], chat.response_mode, body["sessionId"], headers)


def with_user(body: dict[str, Any], user: User, include: bool) -> None:
    """Who sent an n8nUserAuth message, as n8n 2.41 writes it: `user` ({id, email, firstName,
    lastName}) is the server's key, a client's own `user` dropped, set when the trigger includes
    the user (`includeUserInOutput`). n8n's hosted page also sends `metadata.user` from its
    script; here the server writes that one too, from the session, so no client can claim it."""
    body.pop("user", None)
    if include:
        body["user"] = user.identity()
    body["metadata"] = {**(body.get("metadata") or {}), "user": user.identity()}


def _page(rt, workflow, node, chat: ChatSettings, request: Request):
    """The hosted page. n8nUserAuth: a browser that is not signed in is sent to sign in, and
    back here after (n8n's page does it from its script; here the server does, before any)."""
    if chat.authentication == "n8nUserAuth":
        try:
            signed_in_user(request, navigation=True)
        except ApiError:
            return redirect("/signin?" + urlencode({"redirect": request.full_path.rstrip("?")}))
    else:
        check_webhook_auth(rt, node, chat.authentication, request)
    if not chat.hosted_page:
        raise ApiError(404, "This chat has no hosted page (it is in Embedded Chat mode)")
    return page_response(workflow, chat)


def chat_item(request: Request, settings, file_types: list[str]) -> dict[str, Any]:
    """The trigger's output item: the JSON body, or the form fields plus files. Any content type
    but multipart is read as JSON: some clients send text/plain to skip the CORS preflight, and
    the origin is checked either way."""
    bodies.limit(request, Door.CHAT)  # set before the body came, unless the route changed since
    if request.mimetype == "multipart/form-data":
        item = multipart_item(request, settings, file_types)
    else:
        item = {"json": bodies.json_object(request, settings.json_max_values)}
    validate_chat_body(item["json"])
    return item


def validate_chat_body(body: dict[str, Any]) -> None:
    action = body.get("action", "sendMessage")
    if action not in ACTIONS:
        raise ApiError(400, f'"action" must be one of {", ".join(ACTIONS)}')
    session_id = body.get("sessionId")
    if session_id is not None:
        if not isinstance(session_id, str) or not session_id:
            raise ApiError(400, '"sessionId" must be a non-empty string')
        if len(session_id) > MAX_SESSION_ID:
            raise ApiError(400, f'"sessionId" must be at most {MAX_SESSION_ID} characters')
        if CONTROL_CHARS.search(session_id):
            raise ApiError(
                400, '"sessionId" must not contain control characters or lone surrogates'
            )
    if action == "sendMessage" and not isinstance(body.get("chatInput"), str):
        raise ApiError(400, '"chatInput" must be a string')
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise ApiError(400, '"metadata" must be an object')


def previous_session(rt, workflow, node, chat: ChatSettings, body, headers) -> Response:
    """n8n answers from the memory connected to the trigger, without running the workflow; the
    engine finds and reads it exactly as an execution would (engine/previous_session.py)."""
    data: list[dict[str, Any]] = []
    if chat.options.get("loadPreviousSession") == "memory":
        try:
            data = load_previous_session(workflow, node, body, rt.engine_services())
        except SessionKeyRefused as err:  # the client's session id names one of our own keys
            raise ApiError(400, str(err)) from None
        except EngineError as err:  # the workflow's configuration: nothing the client can fix
            raise ApiError(500, str(err)) from None
    response = jsonify({"data": data})
    response.headers.update(headers)
    return response
