"""The links of a Chat node's approval buttons: `GET /webhook-waiting/<executionId>/<nodeId>
?approved=true|false&signature=…`, n8n's send-and-wait webhook (a Wait node's resume URL, the
same path without `approved`, is api/wait_webhook.py's). `@n8n/chat` renders a frame
`{"type": "with-buttons", …}` as buttons and, on a click, GETs the button's `link`; that resumes
the waiting execution with `{"data": {"approved", "respondedAt"}}`, the node's output as in n8n.

- The engine writes each link as a path with a random signature and keeps signature -> query in
  the execution's waiting state (ExecuteContext.resume_url). A click counts only when that
  execution waits at that node and the signature was issued with exactly that query: knowing an
  execution id is not enough, and an "approve" link cannot be turned into a "decline" one.
- The chat socket writes the links absolute, as n8n writes them (`http://host/webhook-waiting/…`),
  on the origin the client reached it by (`link_base`, `absolute_links`): the widget shows only
  buttons whose link is on its page's or its webhook's origin, and fetches them from there.
- Answers as n8n's: 200 with a "Got it, thanks" page; 200 "No action required" once the
  execution finished; 401 for a link that was not issued; 404 for an unknown execution; 409 when
  the execution is not waiting (running, failed, stopped).
- Bots do not click, as in n8n (api/bots.py): a User-Agent holding "bot" gets 204 before
  anything is looked at (n8n's server does this on every path); a valid link fetched by a bot
  isbot knows (a link preview, a crawler, a headless browser), by Microsoft's preview service
  or with no User-Agent gets an empty 200, and the execution goes on waiting.
"""

from __future__ import annotations

import hmac
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

from flask import Blueprint, Request, Response, request

from api.bots import ignored_click, says_bot
from api.cors import cors_headers
from api.errors import ApiError
from api.hub.follow import follow_resume
from api.launcher import LaunchError
from api.runtime import runtime
from core.chat_node_message import Approval
from core.execution_outcomes import Reply
from core.execution_record import ExecutionRecord, Status
from core.waiting import WaitingStore
from core.workflow_store import WorkflowNotFound
from engine.nodes.chat_trigger import ChatTrigger, chat_settings

bp = Blueprint("waiting_webhook", __name__)

PATH = "/webhook-waiting/"

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{tab}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;background:#fbfcfe;margin:0}}
.card{{margin:24px auto;max-width:28rem;padding:24px;background:#fff;border:1px solid #dbdfe7;
border-radius:8px;text-align:center}}h1{{font-size:20px;font-weight:400;color:#525356}}
p{{color:#7e8186}}</style></head>
<body><div class="card"><h1>{title}</h1><p>{text}</p></div></body></html>
"""
# n8n's ACTION_RECORDED_PAGE, without its web fonts and logo.
RECORDED = _PAGE.format(
    tab="Action recorded", title="Got it, thanks", text="This page can be closed now"
)
NO_ACTION = _PAGE.format(
    tab="No action required",
    title="No action required",
    text="This request has already been answered",
)


@bp.route(f"{PATH}<execution_id>/<node_id>", methods=["GET"])
def waiting_webhook(execution_id: str, node_id: str) -> Response:
    if "approved" not in request.args:  # a Wait node's resume URL with its suffix, as n8n's
        from api import wait_webhook  # (its own module, and its own routes for other paths)

        return wait_webhook.resume(runtime(), execution_id, node_id)
    if request.method == "HEAD":  # a link checker's look at the page: it answers nothing
        return _page("", 200, {})
    user_agent = request.headers.get("User-Agent")
    if says_bot(user_agent):
        return _page("", 204, {})
    rt = runtime()
    record = rt.executions.get(execution_id) if len(execution_id) <= 64 else None
    if record is None:
        raise ApiError(404, f'The execution "{execution_id}" does not exist.')
    headers = _cors(rt, record)
    if record.status == Status.SUCCESS:
        return _page(NO_ACTION, 200, headers)
    if record.finished:
        raise ApiError(409, f'The execution "{execution_id}" has finished with error.', headers)
    saved = WaitingStore(rt.executions).resume_state(execution_id)
    state = (saved or {}).get("engine") or {}
    if saved is None or record.status != Status.WAITING or state.get("nodeId") != node_id:
        raise ApiError(409, f'The execution "{execution_id}" is not waiting here.', headers)
    if not issued(state, request.args.to_dict()):
        raise ApiError(401, "This link is not valid (its signature does not match).", headers)
    if ignored_click(user_agent):  # a preview's fetch is nobody's answer
        return _page("", 200, headers)
    reply = {"json": {"data": {"approved": request.args.get("approved") == "true",
                               "respondedAt": _now_iso()}}}  # fmt: skip
    outcome, queued = rt.executions.reply(record, reply, queue=False)
    if outcome != Reply.RESUMED or queued is None:  # another click or reply won
        return _page(NO_ACTION, 200, headers)
    follow = follow_resume(execution_id)  # a Chat Hub conversation's: relayed from here
    try:
        rt.launcher.resume(queued, saved, reply)
    except LaunchError as err:
        follow(False)
        raise ApiError(503, str(err), headers) from None
    follow(True)
    return _page(RECORDED, 200, headers)


def issued(state: dict[str, Any], query: dict[str, str]) -> bool:
    """Whether `query` (with its signature) is one the waiting node handed out."""
    signature = query.pop("signature", "")
    for known, issued_query in (state.get("resumeLinks") or {}).items():
        if hmac.compare_digest(known, signature):
            return bool(issued_query == query)
    return False


def link_base(request: Request) -> str:
    """The origin a client reached us by, with the scheme it used: behind a TLS proxy this
    process sees http, and the proxy's X-Forwarded-Proto says https (believing it changes only
    the links that client is given)."""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    secure = request.is_secure or forwarded in ("https", "wss")
    return f"{'https' if secure else 'http'}://{request.host}"


def absolute_links(frame: str, base_url: str) -> str:
    """A Chat node's message with buttons, its links made absolute on `base_url` (the origin
    the chat client reached us by); any other frame as it is."""
    approval = Approval.from_frame(frame)
    if approval is None:
        return frame
    buttons = tuple(replace(b, link=urljoin(base_url, b.link)) for b in approval.buttons)
    return replace(approval, buttons=buttons).frame()


def _cors(rt, record: ExecutionRecord) -> dict[str, str]:
    """A click from an embedded widget is a cross-origin GET: it may read the answer when the
    chat's allowedOrigins let its page in (as for the chat's own requests)."""
    if request.headers.get("Origin") is None:
        return {}
    try:
        _, workflow = rt.workflows.load(record.workflow_id)
    except WorkflowNotFound:
        return {}
    allowed = [
        origin
        for node in workflow.nodes.values()
        if node.type == ChatTrigger.type
        for origin in chat_settings(node).allowed_origins
    ]
    return cors_headers(allowed, request)


def _page(html: str, status: int, headers: dict[str, str]) -> Response:
    response = Response(html, status=status, mimetype="text/html")
    response.headers.update(headers)
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


def _now_iso() -> str:
    """n8n's `new Date().toISOString()`: UTC with milliseconds and a Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
