"""Webhook (`n8n-nodes-base.webhook`): an HTTP request starts an execution.

The api turns the request into the first item ({headers, params, query, body, webhookUrl,
executionMode}, as n8n's node outputs it); the engine passes it on.
"""

from __future__ import annotations

from core.workflow_store import WEBHOOK_METHODS
from engine.errors import WorkflowValidationError
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register
from engine.webhooks import RESPONSE_MODES, WebhookSpec
from engine.workflow import Node


@register
class Webhook(NodeType):
    type = "n8n-nodes-base.webhook"
    kind = "trigger"
    defaults = {
        "httpMethod": "GET",
        "path": "",
        "responseMode": "onReceived",
        "responseData": "firstEntryJson",
        "options": {},
    }

    def validate(self, node: Node) -> None:
        params = {**self.defaults, **node.parameters}
        if str(params["httpMethod"]).upper() not in WEBHOOK_METHODS:
            raise WorkflowValidationError(
                f'unsupported HTTP method "{params["httpMethod"]}"', node=node.name
            )
        if params["responseMode"] not in RESPONSE_MODES:
            raise WorkflowValidationError(
                f'unknown response mode "{params["responseMode"]}"', node=node.name
            )
        if not webhook_path(node):
            raise WorkflowValidationError("needs a path or a webhookId", node=node.name)

    def webhooks(self, node: Node) -> list[WebhookSpec]:
        params = {**self.defaults, **node.parameters}
        method = str(params["httpMethod"]).upper()
        return [WebhookSpec(method, webhook_path(node), params["responseMode"])]

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [ctx.input_items]


def webhook_path(node: Node) -> str:
    return str(node.parameters.get("path") or node.webhook_id or "").strip("/")
