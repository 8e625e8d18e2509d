"""Workflows: list, get, create, update, delete, activate, deactivate; and a manual chat run,
which the editor's chat panel sends (its answer arrives on the tab's push channel)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from flask import jsonify, request

from api import bodies
from api.chat_trigger import validate_chat_body
from api.conversation import ReplyRefused, deliver, unfinished_in_session
from api.errors import ApiError
from api.rest import bp
from api.runtime import runtime
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatTrigger, chat_settings

PUSH_REF = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # becomes part of a Redis channel name
# Workflow and execution ids become Redis keys and URL segments: n8n's are 16 alphanumerics,
# imports bring UUIDs; nothing needs a slash, a control character or a thousand characters.
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ID_VIEW_ARGS = ("workflow_id", "execution_id")


@bp.url_value_preprocessor
def _check_ids(endpoint, values) -> None:
    for name in ID_VIEW_ARGS:
        if values and name in values:
            check_id(values[name], name.split("_")[0])


def check_id(value: str, what: str) -> None:
    if not ID.match(value):
        raise ApiError(
            400,
            f"A {what} id is 1-128 letters, digits, '.', '_' or '-', and starts with a letter "
            "or digit",
        )


SUMMARY_KEYS = ("id", "name", "active", "tags", "updatedAt")


@bp.get("/workflows")
def list_workflows():
    summaries = [{k: w.get(k) for k in SUMMARY_KEYS if k in w} for w in runtime().workflows.list()]
    summaries.sort(key=lambda w: (str(w.get("name", "")).lower(), w["id"]))
    return jsonify({"data": summaries})


@bp.get("/workflows/<workflow_id>")
def get_workflow(workflow_id: str):
    return jsonify(_stored(workflow_id))


@bp.post("/workflows")
def create_workflow():
    body = _json_object()
    if body.get("id") is not None:
        check_id(str(body["id"]), "workflow")
    if body.get("id") and runtime().workflows.get_json(str(body["id"])) is not None:
        raise ApiError(409, f'a workflow with id "{body["id"]}" already exists')
    workflow = runtime().workflows.save(body)
    return jsonify(_stored(workflow.id)), 201


@bp.route("/workflows/<workflow_id>", methods=["PUT", "PATCH"])
def update_workflow(workflow_id: str):
    body = _json_object()
    if "id" in body and str(body["id"]) != workflow_id:
        raise ApiError(400, f'the body\'s "id" ({body["id"]}) is not the one in the URL')
    # The editor sends the versionId it loaded: a stale one is a 409, nothing is overwritten.
    # Without one the save overwrites, as n8n's PATCH and its public API's PUT do (n8n checks
    # only an `expectedChecksum`, and only with its sharing licence): docs/architecture.md.
    expected = body.get("versionId")
    existing = _stored(workflow_id)
    if request.method == "PATCH":
        body = {**existing, **body}
    runtime().workflows.save({**body, "id": workflow_id}, expected_version=expected)
    return jsonify(_stored(workflow_id))


@bp.delete("/workflows/<workflow_id>")
def delete_workflow(workflow_id: str):
    runtime().workflows.delete(workflow_id)
    return jsonify({"id": workflow_id, "deleted": True})


@bp.post("/workflows/<workflow_id>/activate")
def activate_workflow(workflow_id: str):
    rt = runtime()
    warnings = rt.workflows.activate(workflow_id, queue_mode=rt.settings.executions_mode == "queue")
    return jsonify({**_stored(workflow_id), "warnings": warnings})


@bp.post("/workflows/<workflow_id>/deactivate")
def deactivate_workflow(workflow_id: str):
    runtime().workflows.deactivate(workflow_id)
    return jsonify(_stored(workflow_id))


@bp.post("/workflows/<workflow_id>/chat")
def chat_run(workflow_id: str):
    """A manual run with one chat message. Answers with the execution id at once; everything
    else (node events, streamed tokens, the end) comes over the `pushRef` channel."""
    rt = runtime()
    body = _json_object()
    push_ref = body.get("pushRef")
    if not isinstance(push_ref, str) or not PUSH_REF.match(push_ref):
        raise ApiError(400, '"pushRef" must be 1-64 letters, digits, "-" or "_"')
    session_id = body.get("sessionId") or str(uuid.uuid4())
    message = {"action": "sendMessage", "sessionId": session_id, "chatInput": body.get("chatInput")}
    if body.get("metadata") is not None:
        message["metadata"] = body["metadata"]
    validate_chat_body(message)
    raw, workflow = rt.workflows.load(workflow_id)
    trigger = _chat_trigger(workflow, body.get("triggerNode"))
    # A chat answered by Chat nodes: while one of its executions is unfinished in this session,
    # the message is that execution's (api/conversation.py), as in production.
    replies = chat_settings(workflow.nodes[trigger]).response_mode == "responseNodes"
    current = unfinished_in_session(rt, workflow.id, session_id) if replies else None
    if current is not None:
        try:
            deliver(rt, current, session_id, message)
            return jsonify({"executionId": current.id, "sessionId": session_id, "resumed": True})
        except ReplyRefused:
            pass  # it finished meanwhile: the message starts the next one
    launched = rt.launcher.start(
        raw,
        workflow,
        trigger,
        [{"json": message}],
        mode="manual",
        response_mode="responseNodes" if replies else "onReceived",
        session_id=session_id,
        push_ref=push_ref,
        streaming=True,
    )
    return jsonify({"executionId": launched.execution_id, "sessionId": session_id})


def _chat_trigger(workflow, name: Any) -> str:
    triggers = [n.name for n in workflow.nodes.values() if n.type == ChatTrigger.type]
    if name is not None:
        if name not in triggers:
            raise ApiError(400, f'"{name}" is not a Chat Trigger of this workflow')
        return name
    if not triggers:
        raise ApiError(400, "this workflow has no Chat Trigger to send a message to")
    return triggers[0]


def _stored(workflow_id: str) -> dict[str, Any]:
    data = runtime().workflows.get_json(workflow_id)
    if data is None:
        raise WorkflowNotFound(workflow_id)
    return data


def _json_object() -> dict[str, Any]:
    return bodies.json_object(request)
