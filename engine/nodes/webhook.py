"""Webhook (`n8n-nodes-base.webhook`): an HTTP request starts an execution.

The api turns the request into the first item ({headers, params, query, body, webhookUrl,
executionMode}, as n8n's node outputs it); the engine passes it on.
"""

from __future__ import annotations

from core.workflow_store import WEBHOOK_METHODS
from engine.description import NodeDescription, Option, Property
from engine.errors import WorkflowValidationError
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register
from engine.webhooks import WebhookSpec
from engine.workflow import Node


@register
class Webhook(NodeType):
    type = "n8n-nodes-base.webhook"
    description = NodeDescription(
        display_name="Webhook",
        group="trigger",
        description="Starts the workflow when an HTTP request arrives.",
        version=2,
        subtitle="http webhook trigger",
        webhook=True,
        inputs=(),
        properties=(
            Property(
                "httpMethod",
                "HTTP Method",
                "options",
                "GET",
                options=tuple(Option(m, m) for m in WEBHOOK_METHODS),
            ),
            Property("path", "Path", "string", "", placeholder="webhook"),
            Property(
                "responseMode",
                "Respond",
                "options",
                "onReceived",
                options=(
                    Option("onReceived", "Immediately"),
                    Option("lastNode", "When Last Node Finishes"),
                    Option("responseNode", "Using 'Respond to Webhook' Node"),
                    Option("streaming", "Streaming"),
                ),
            ),
            Property(
                "responseData",
                "Response Data",
                "options",
                "firstEntryJson",
                options=(
                    Option("allEntries", "All Entries"),
                    Option("firstEntryJson", "First Entry JSON"),
                    Option("firstEntryBinary", "First Entry Binary"),
                    Option("noData", "No Response Body"),
                ),
                display_options={"show": {"responseMode": ("lastNode",)}},
            ),
            Property("options", "Options", "collection", {}, placeholder="Add Option"),
        ),
    )

    def validate(self, node: Node) -> None:
        # Method and response mode are checked from the description (engine/description.py).
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
