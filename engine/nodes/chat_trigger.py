"""Chat Trigger (`@n8n/n8n-nodes-langchain.chatTrigger`): a chat message starts an execution.

The HTTP side (hosted page, CORS, auth, loadPreviousSession) lives in the api; here is what the
engine needs: where the trigger listens and how its options read. Its output is the request
body as the first item, so downstream nodes read `$json.chatInput` and `$json.sessionId`.
"""

from __future__ import annotations

from engine.errors import WorkflowValidationError
from engine.node import NodeOutput, NodeType, SubInput, register
from engine.webhooks import WebhookSpec

RESPONSE_MODES = ("lastNode", "streaming", "responseNode", "responseNodes")


@register
class ChatTrigger(NodeType):
    type = "@n8n/n8n-nodes-langchain.chatTrigger"
    kind = "trigger"
    # Only used when loadPreviousSession is "memory": the trigger reads that memory directly.
    sub_inputs = {"ai_memory": SubInput(required=False, max_connections=1)}
    defaults = {
        "public": False,
        "mode": "hostedChat",
        "authentication": "none",
        "initialMessages": "Hi there! 👋\nMy name is Nathan. How can I assist you today?",
        "options": {
            "responseMode": "lastNode",
            "allowedOrigins": "*",
            "loadPreviousSession": "notSupported",
            "title": "Hi there! 👋",
            "subtitle": "Start a chat. We're here to help you 24/7.",
            "inputPlaceholder": "Type your question..",
            "allowFileUploads": False,
            "allowedFilesMimeTypes": "*",
        },
    }

    def validate(self, node) -> None:
        mode = (node.parameters.get("options") or {}).get("responseMode", "lastNode")
        if mode not in RESPONSE_MODES:
            raise WorkflowValidationError(f'unknown response mode "{mode}"', node=node.name)
        if not chat_path(node):
            raise WorkflowValidationError("needs a webhookId or a path", node=node.name)
        auth = node.parameters.get("authentication", "none")
        if auth not in ("none", "basicAuth", "n8nUserAuth"):
            raise WorkflowValidationError(f'unknown authentication "{auth}"', node=node.name)

    def webhooks(self, node) -> list[WebhookSpec]:
        path = chat_path(node)
        mode = (node.parameters.get("options") or {}).get("responseMode", "lastNode")
        if mode == "responseNodes":  # n8n's HITL chat mode; we answer like responseNode
            mode = "responseNode"
        return [WebhookSpec("GET", path, "onReceived"), WebhookSpec("POST", path, mode)]

    def execute(self, ctx) -> NodeOutput:
        return [ctx.input_items]


def chat_path(node) -> str:
    """n8n's production URL for a chat trigger is <webhookId>/chat; ours may set `path`."""
    path = str(node.parameters.get("path") or "").strip("/")
    if path:
        return path
    return f"{node.webhook_id}/chat" if node.webhook_id else ""
