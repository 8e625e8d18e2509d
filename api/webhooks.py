"""Production webhooks under /webhook/<path>: find the active workflow, run its trigger's
webhook handler here in the api, start the execution and answer in the trigger's response mode."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Request, Response, g, request

from api import bodies
from api.body_limit import Door
from api.chat_trigger import chat_preflight, handle_chat
from api.conversation import start_or_reply
from api.errors import ApiError
from api.responses import (
    Outcome,
    last_node_response,
    response_node_response,
    started_response,
    stop_on_client_disconnect,
    streaming_response,
)
from api.runtime import runtime
from core.execution_outcomes import RouteChanged
from core.workflow_store import WEBHOOK_METHODS, Route
from engine.context import merged_parameters
from engine.nodes.chat_trigger import ChatTrigger
from engine.nodes.webhook import Webhook
from engine.webhooks import workflow_webhooks

bp = Blueprint("webhooks", __name__)

ALL_METHODS = [*WEBHOOK_METHODS, "OPTIONS"]


@bp.route("/webhook/<path:path>", methods=ALL_METHODS)
@bodies.received_by_view
def webhook(path: str) -> Response:
    rt = runtime()
    request = bodies.current_request()  # read here often: the request, not its proxy
    door = _door(rt, request, path)
    bodies.limit(request, door)  # 413 from Content-Length, before a byte is read
    bodies.receive(request)  # holding no turn: a slow sender keeps nobody else waiting
    # A large body waits for its own turn (one at a time): parsed and enqueued, it holds
    # several copies of itself, and a handful at once would outgrow the api's memory.
    with rt.admission.turn() as turn, rt.admission.body_turn(bodies.is_large(request)):
        g.start_turn = turn  # given back once the execution started (see launch)
        return _webhook(rt, request, path)


def _door(rt, request: Request, path: str) -> Door:
    """A chat message's door for a Chat Trigger's route, else a webhook's."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return Door.WEBHOOK
    path = path.strip("/")
    route = rt.workflows.remembered_route(request.method, path)
    if route is None:
        with rt.admission.turn():  # the route, in one round trip
            route = rt.workflows.route(request.method, path, remembered=True)
    if route.found is None:
        return Door.WEBHOOK
    try:
        node = _trigger_for(route.found[1], request.method, path)
    except ApiError:
        return Door.WEBHOOK
    return Door.CHAT if node.type == ChatTrigger.type else Door.WEBHOOK


def _webhook(rt, request: Request, path: str) -> Response:
    """Routed from what the api remembers, when it found the route before: the execution's
    create confirms it in the same step, and an answer that starts none confirms it after.
    A route gone stale (the webhook moved, the workflow changed) is routed again."""
    path = path.strip("/")
    method = "GET" if request.method in ("HEAD",) else request.method
    if request.method != "OPTIONS":
        route = rt.workflows.route(method, path, remembered=True)
        g.route_check = route.check
        try:
            response = _routed(rt, request, path, method, route)
        except RouteChanged:
            response = None
        except ApiError:
            if _route_held(rt):
                raise
            response = None
        if response is not None and _route_held(rt):
            return response
        rt.workflows.forget_routes()
    g.route_check = None
    return _routed(rt, request, path, method, rt.workflows.route(method, path))


def _route_held(rt) -> bool:
    """Whether the route this request was answered on holds: read just now, confirmed by the
    execution's create (`launch`), or confirmed here."""
    check = g.pop("route_check", None)
    return check is None or rt.workflows.confirm(check)


def _routed(rt, request: Request, path: str, method: str, route: Route) -> Response:
    workflow_id, allowed, found, _ = route
    if request.method == "OPTIONS":
        return _options(rt, path, allowed)
    if workflow_id is None:
        if allowed:
            raise ApiError(
                405,
                f"This webhook is not registered for {method}",
                headers={"Allow": ", ".join(allowed)},
            )
        raise ApiError(404, f'The requested webhook "{method} {path}" is not registered.')
    assert found is not None  # loaded with its route (a workflow gone meanwhile raised)
    raw, workflow = found
    node = _trigger_for(workflow, method, path)

    def start(items, response_mode, session_id=None, headers=None):
        return launch(rt, raw, workflow, node.name, items, response_mode, session_id, headers or {})

    if node.type == ChatTrigger.type:
        return handle_chat(rt, workflow, node, request, start)
    params = merged_parameters(node, Webhook.defaults)
    return start([{"json": webhook_item(path)}], params["responseMode"])


def _options(rt, path: str, allowed: list[str]) -> Response:
    """A CORS preflight or a plain OPTIONS; a Chat Trigger answers by its allowedOrigins."""
    if not allowed:
        raise ApiError(404, f'The requested webhook "OPTIONS {path}" is not registered.')
    wanted = request.headers.get("Access-Control-Request-Method", "").upper()
    method = wanted if wanted in allowed else allowed[0]
    workflow_id, _ = rt.workflows.lookup(method, path)
    _, workflow = rt.workflows.load(workflow_id)
    node = _trigger_for(workflow, method, path)
    if node.type == ChatTrigger.type:
        return chat_preflight(node, request, allowed)
    return Response(status=204, headers={"Allow": ", ".join(["OPTIONS", *allowed])})


# The trigger node last found for a route, with the workflow object it was found in: a request
# that finds the same (remembered) workflow skips the walk over its webhooks.
_TRIGGERS: dict[tuple[str, str], tuple[Any, Any]] = {}
MAX_TRIGGERS = 10_000


def _trigger_for(workflow, method: str, path: str):
    known = _TRIGGERS.get((method, path))
    if known is not None and known[0] is workflow:
        return known[1]
    for name, spec in workflow_webhooks(workflow):
        if spec.method == method and spec.path == path:
            if len(_TRIGGERS) >= MAX_TRIGGERS:
                _TRIGGERS.clear()
            _TRIGGERS[(method, path)] = (workflow, workflow.nodes[name])
            return workflow.nodes[name]
    raise ApiError(404, f'The requested webhook "{method} {path}" is not registered.')


def webhook_item(path: str) -> dict[str, Any]:
    """The Webhook node's output item, as n8n builds it from the request."""
    request = bodies.current_request()
    settings = runtime().settings
    if request.is_json:
        body = bodies.json_value(request, settings.json_max_values)
    elif request.mimetype == "application/x-www-form-urlencoded":
        body = bodies.form_fields(request)
    elif request.mimetype == "multipart/form-data":
        body = request.form.to_dict()  # files go to temporary files
    else:
        body = bodies.read(request).decode("utf-8", "replace") or {}
    return {
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "params": {},
        "query": request.args.to_dict(),
        "body": body if body is not None else {},
        "webhookUrl": request.base_url,
        "executionMode": "production",
    }


def launch(rt, raw, workflow, trigger, items, response_mode, session_id, headers) -> Response:
    route = g.get("route_check")  # a remembered route: the create confirms it
    try:
        if response_mode == "responseNodes":
            # A reply may be delivered before anything is created: confirmed first.
            if route is not None and not rt.workflows.confirm(route):
                raise RouteChanged(route.field)
            g.route_check = None
            return start_or_reply(rt, raw, workflow, trigger, items, session_id, headers)
        launched = rt.launcher.start(
            raw,
            workflow,
            trigger,
            items,
            mode="webhook",
            response_mode=response_mode,
            session_id=session_id,
            route=route,
        )
        g.route_check = None  # confirmed
    finally:
        turn = g.pop("start_turn", None)
        if turn is not None:
            turn.release()  # started (or refused): what follows only waits
        bodies.release()  # its bytes are in the execution now, or nowhere
    if launched.stream is None:
        return started_response(launched.execution_id, headers)
    outcome = Outcome(launched, rt.executions, rt.relay(), rt.settings, rt.liveness)
    if response_mode == "streaming":
        return streaming_response(outcome, headers, stop_on_client_disconnect(raw))
    if response_mode == "responseNode":
        return response_node_response(outcome, headers)
    return last_node_response(outcome, headers)
