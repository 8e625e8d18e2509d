"""The Chat Trigger's webhook handler, run in the api: validate the chat message, answer
loadPreviousSession from memory without running anything, and start an execution for the rest.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from flask import Request, Response, jsonify

from api.errors import ApiError
from engine.context import merged_parameters
from engine.expressions import ExpressionData, resolve
from engine.nodes.chat_trigger import ChatTrigger
from engine.workflow import Node, Workflow

MAX_SESSION_ID = 256
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
ACTIONS = ("sendMessage", "loadPreviousSession")


def chat_options(node: Node) -> dict[str, Any]:
    return merged_parameters(node, ChatTrigger.defaults)


def handle_chat(rt, raw: dict, workflow: Workflow, node: Node, request: Request, start) -> Response:
    """`start(items, response_mode, session_id)` launches the execution and answers."""
    params = chat_options(node)
    if not params.get("public"):
        raise ApiError(404, "This chat is not public")
    body = chat_body(request)
    headers: dict[str, str] = {}
    session_id = body.get("sessionId")
    if session_id is None:
        # Never fall back to a shared default session: a fresh one, returned to the client.
        session_id = body["sessionId"] = str(uuid.uuid4())
        headers["X-Session-Id"] = session_id
    action = body.get("action", "sendMessage")
    if action == "loadPreviousSession":
        return previous_session(rt, workflow, node, params, body, headers)
    response_mode = params["options"].get("responseMode", "lastNode")
    if response_mode == "responseNodes":
        response_mode = "responseNode"
    return start([{"json": body}], response_mode, session_id, headers)


def chat_body(request: Request) -> dict[str, Any]:
    body = request.get_json(silent=True)
    if body is None:
        if request.content_type and request.content_type.startswith("multipart/form-data"):
            body = request.form.to_dict()
        else:
            raise ApiError(400, "The request body must be a JSON object")
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    validate_chat_body(body)
    return body


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
            raise ApiError(400, '"sessionId" must not contain control characters')
    if action == "sendMessage" and not isinstance(body.get("chatInput"), str):
        raise ApiError(400, '"chatInput" must be a string')
    if (
        "metadata" in body
        and body["metadata"] is not None
        and not isinstance(body["metadata"], dict)
    ):
        raise ApiError(400, '"metadata" must be an object')


def previous_session(rt, workflow, node, params, body, headers) -> Response:
    """n8n answers from the memory connected to the trigger, without running the workflow."""
    data: list[dict[str, Any]] = []
    if params["options"].get("loadPreviousSession") == "memory":
        memory_node = next(iter(workflow.sub_nodes(node.name, "ai_memory")), None)
        if memory_node is None:
            raise ApiError(500, "loadPreviousSession is set to memory but no memory is connected")
        backend = memory_backend(rt, memory_node)
        if backend is not None:
            key = memory_session_key(memory_node, body)
            data = [m.to_serialized() for m in backend.messages(key)]
    response = jsonify({"data": data})
    response.headers.update(headers)
    return response


def memory_backend(rt, memory_node: Node):
    if memory_node.type == "@n8n/n8n-nodes-langchain.memoryRedisChat":
        return rt.memory
    # Simple Memory lives inside the workers; the api process cannot read it.
    return None


def memory_session_key(memory_node: Node, body: dict[str, Any]) -> str:
    params = memory_node.parameters
    if params.get("sessionIdType") == "customKey":
        value = resolve(params.get("sessionKey", ""), ExpressionData(json=body))
        return str(value or "")
    return str(body.get("sessionId") or "")
