"""A Wait node's resume URL: `/webhook-waiting/<executionId>[/<webhookSuffix>]?signature=<token>`,
n8n's `$execution.resumeUrl` (engine/nodes/wait.py). A call with the node's method resumes the
waiting execution, whichever worker takes it, with the request as the Wait node's item.

Checked and answered as n8n 2.41.1 does (tried on it):
- an unknown execution: 404; a signature that is not the execution's resume token (made when the
  URL was first read, kept in its waiting state): 401 `{"error": "Invalid token"}`; an
  execution that is running (or was just resumed by another call): 409; one that finished: 409;
  another method or suffix than the node's, or a wait that is not a Wait node's: 404;
- the node's `incomingAuthentication` basicAuth, as the Chat Trigger's (api/auth.py);
- `responseMode`: onReceived answers at once (`responseCode`, `{"message": "Workflow was
  started"}`, or the node's own response data, or no body); lastNode answers with the first
  item's JSON of the execution's last node once it ends (or waits again), and responseNode with
  its Respond to Webhook node's answer: for those two the call subscribes to the execution's
  channel before the resume is queued, so it misses nothing.
"""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, Response, jsonify, request

from api.auth import check_webhook_auth
from api.errors import ApiError
from api.launcher import Launch, LaunchError
from api.relay import RelayError
from api.responses import Outcome, last_node_response, response_node_response
from api.runtime import runtime
from api.webhooks import webhook_item
from core.execution_outcomes import Reply
from core.execution_record import ExecutionRecord, Status
from core.waiting import WaitingStore
from core.workflow_snapshots import WorkflowSnapshots
from core.workflow_store import WEBHOOK_METHODS
from engine.errors import EngineError
from engine.nodes.wait import ResumeWebhook, resume_webhook
from engine.workflow import Node, load_workflow

bp = Blueprint("wait_webhook", __name__)

PATH = "/webhook-waiting/"
CALL_METHODS = [m for m in WEBHOOK_METHODS if m not in ("GET", "HEAD")]
# n8n's waiting webhooks allow any origin (its applyCors), preflights included.
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, GET, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type",
}


# A GET of `<id>/<suffix>` reaches api/waiting_webhook.py's approval links first, which hand
# it here when it is no approval.
@bp.route(f"{PATH}<execution_id>", methods=[*WEBHOOK_METHODS, "OPTIONS"])
@bp.route(f"{PATH}<execution_id>/<path:suffix>", methods=[*CALL_METHODS, "OPTIONS"])
def resume_call(execution_id: str, suffix: str = "") -> Response:
    if request.method == "OPTIONS":  # a browser's preflight: n8n's CORS
        return Response(status=204, headers=CORS)
    return resume(runtime(), execution_id, suffix)


def resume(rt, execution_id: str, suffix: str) -> Response:
    if request.method == "HEAD":  # a link checker's look: it resumes nothing
        return Response(status=200, headers=CORS)
    record = rt.executions.get(execution_id) if len(execution_id) <= 64 else None
    if record is None:
        raise ApiError(404, f'The execution "{execution_id}" does not exist.')
    saved = WaitingStore(rt.executions).resume_state(execution_id)
    state = (saved or {}).get("engine") or {}
    if saved is not None and not _token_matches(state):
        response = jsonify({"error": "Invalid token"})  # n8n's answer, not our usual one
        response.status_code = 401
        return response
    _check_status(record)
    if saved is None or record.wait_for != "webhook":
        raise _no_such_webhook(execution_id)
    node = _waiting_node(rt, saved, state)
    spec = resume_webhook(node)
    if request.method != spec.method or suffix.strip("/") != spec.suffix:
        raise _no_such_webhook(execution_id)
    check_webhook_auth(rt, node, "basicAuth" if spec.basic_auth else "none", request)
    item = {"json": _item(node)}
    with rt.admission.turn():
        launch = _resume(rt, record, saved, item, spec)
    return _answer(rt, launch, spec)


def _token_matches(state: dict[str, Any]) -> bool:
    """n8n's validateToken: the `signature` (before any `/suffix` in it) is the execution's
    resume token. Without one nobody was handed the URL: refused too."""
    given = request.args.get("signature", "").split("/", 1)[0]
    expected = state.get("resumeToken") or ""
    return bool(given and expected) and hmac.compare_digest(given.encode(), expected.encode())


def _check_status(record: ExecutionRecord) -> None:
    if record.status in (Status.NEW, Status.RUNNING):
        raise ApiError(409, f'The execution "{record.id}" is running already.', CORS)
    if record.status == Status.SUCCESS:
        raise ApiError(409, f'The execution "{record.id}" has finished already.', CORS)
    if record.finished:
        raise ApiError(409, f'The execution "{record.id}" has finished with error.', CORS)


def _no_such_webhook(execution_id: str) -> ApiError:
    return ApiError(
        404,
        f'The workflow for execution "{execution_id}" does not contain a waiting webhook with '
        "a matching path/method.",
        CORS,
    )


def _waiting_node(rt, saved: dict[str, Any], state: dict[str, Any]) -> Node:
    """The Wait node, in the workflow version the execution started with."""
    source = saved.get("source") or {}
    data = source.get("workflow")
    if data is None and source.get("workflowRef"):
        snapshots = WorkflowSnapshots(rt.redis, rt.keys, rt.settings.executions_ttl)
        data = snapshots.load(source["workflowRef"])
    try:
        workflow = load_workflow(data)
        return workflow.nodes[state["node"]]
    except (EngineError, KeyError, TypeError):
        raise ApiError(404, "The workflow of this waiting execution is gone.") from None


def _item(node: Node) -> dict[str, Any]:
    """The Webhook node's item, as n8n's Wait node gives it: its URL is the node's webhook."""
    item = webhook_item(request.path)
    item["webhookUrl"] = f"{request.host_url}webhook/{node.webhook_id or node.id}"
    return item


def _resume(rt, record: ExecutionRecord, saved: dict[str, Any], item: dict[str, Any],
            spec: ResumeWebhook) -> Launch:  # fmt: skip
    """`waiting -> new` with the call's item, and its task queued: after the execution's
    channel is subscribed when the answer waits for the outcome."""
    stream = None
    if spec.response_mode in ("lastNode", "responseNode"):
        try:
            stream = rt.launcher.open_stream(rt.keys.execution_events(record.id))
        except RelayError:  # the request that started it has not been answered yet
            raise ApiError(409, f'The execution "{record.id}" is still answering the request '
                           "that started it; call again in a moment.", CORS) from None  # fmt: skip
        stream.next_seq = int(saved.get("events") or 0)  # the resumed run numbers on from there
    outcome, queued = rt.executions.reply(record, item, queue=False)
    if outcome != Reply.RESUMED or queued is None:  # another call (or its deadline) won
        if stream is not None:
            rt.relay().unsubscribe(stream)
        raise ApiError(409, f'The execution "{record.id}" is running already.', CORS)
    try:
        rt.launcher.resume(queued, saved, item)
    except LaunchError:
        if stream is not None:
            rt.relay().unsubscribe(stream)
        raise
    return Launch(record.id, stream)


def _answer(rt, launch: Launch, spec: ResumeWebhook) -> Response:
    if launch.stream is None:
        if spec.no_body:
            response = Response(status=spec.response_code)
        elif spec.response_data:
            response = Response(spec.response_data, status=spec.response_code)
        else:
            response = jsonify({"message": "Workflow was started"})
            response.status_code = spec.response_code
        response.headers.update(CORS)
        return response
    outcome = Outcome(launch, rt.executions, rt.relay(), rt.settings, rt.liveness)
    if spec.response_mode == "responseNode":
        return response_node_response(outcome, CORS)
    response = last_node_response(outcome, CORS)
    if response.status_code == 200:
        if spec.response_data == "noData":
            response.set_data(b"")
        response.status_code = spec.response_code
    return response
