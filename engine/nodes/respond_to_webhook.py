"""Respond to Webhook (`n8n-nodes-base.respondToWebhook`): decides the HTTP answer of a webhook
in responseNode mode. The answer leaves through the sendResponse hook; the items pass on."""

from __future__ import annotations

import json

from engine.errors import NodeExecutionError
from engine.node import NodeOutput, NodeType, register


@register
class RespondToWebhook(NodeType):
    type = "n8n-nodes-base.respondToWebhook"
    defaults = {"respondWith": "firstIncomingItem", "responseBody": "", "options": {}}

    def execute(self, ctx) -> NodeOutput:
        items = ctx.input_items
        respond_with = ctx.get_parameter("respondWith")
        status = int(ctx.get_parameter("options.responseCode", 200) or 200)
        headers = {
            str(h.get("name")): str(h.get("value", ""))
            for h in ctx.get_parameter("options.responseHeaders.entries", []) or []
            if h.get("name")
        }
        body, content_type = _body(ctx, respond_with, items)
        if content_type and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = content_type
        ctx.send_response({"status": status, "headers": headers, "body": body})
        return [items]


def _body(ctx, respond_with: str, items) -> tuple[str, str | None]:
    if respond_with == "firstIncomingItem":
        return _json(items[0].get("json", {}) if items else {})
    if respond_with == "allIncomingItems":
        return _json([i.get("json", {}) for i in items])
    if respond_with == "json":
        body = ctx.get_parameter("responseBody", "")
        if isinstance(body, str):
            try:
                body = json.loads(body) if body.strip() else {}
            except ValueError as err:
                raise NodeExecutionError(
                    "Response Body is not valid JSON", node=ctx.node.name
                ) from err
        return _json(body)
    if respond_with == "text":
        return str(ctx.get_parameter("responseBody", "")), "text/plain; charset=utf-8"
    if respond_with == "noData":
        return "", None
    raise NodeExecutionError(f'unsupported "Respond With": {respond_with}', node=ctx.node.name)


def _json(value) -> tuple[str, str]:
    return json.dumps(value, ensure_ascii=False), "application/json; charset=utf-8"
