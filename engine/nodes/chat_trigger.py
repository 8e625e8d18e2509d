"""Chat Trigger (`@n8n/n8n-nodes-langchain.chatTrigger`): a chat message starts an execution.

The HTTP side (hosted page, CORS, auth, loadPreviousSession) lives in the api; the rules live
here: where the trigger listens, how its options read, whether it serves a page, which response
mode answers a message (`chat_settings`) and whose memory its conversations are (`memory_scope`).
Its output is the request body as the first item, so downstream nodes read `$json.chatInput`
and `$json.sessionId`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.context import merged_parameters
from engine.description import (
    CredentialSlot,
    FieldGroup,
    Input,
    NodeDescription,
    Option,
    Property,
)
from engine.errors import WorkflowValidationError
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register
from engine.webhooks import WebhookSpec
from engine.workflow import Node, Workflow

# The form's start for Custom Chat Styling: n8n's default, cut to the @n8n/chat theme variables
# the hosted page reads (api/static/chat/chat.css), with its one class rule. Only what the
# workflow sets is applied: without the option, the page has no custom CSS (as in n8n).
CUSTOM_CSS_TEMPLATE = """:root {
  --chat--color--primary: #e74266;
  --chat--color--secondary: #20b69e;
  --chat--color-white: #fff;
  --chat--color-light: #f2f4f8;
  --chat--color-dark: #101330;
  --chat--font-family: -apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, sans-serif;
  --chat--header--background: var(--chat--color-dark);
  --chat--header--color: var(--chat--color-light);
  --chat--message--bot--background: var(--chat--color-white);
  --chat--message--bot--color: var(--chat--color-dark);
  --chat--message--user--background: var(--chat--color--secondary);
  --chat--message--user--color: var(--chat--color-white);
  --chat--body--background: var(--chat--color-light);
  --chat--footer--background: var(--chat--color-light);
}

/* You can override any class styles, too. Right-click inspect in Chat UI to find class to override. */
.chat-message {
  max-width: 50%;
}"""


_HUB_SHOWN = {"availableInChat": (True,), "@version": ({"_cnd": {"gte": 1.2}},)}
_ICON = {"type": "icon", "value": "bot"}
# n8n's Chat Hub fields (1.2 and later): the workflow, once active, is an agent of the hub
# (api/hub/workflow_agents.py), shown with this name, description, icon and prompts.
HUB_PROPERTIES = (
    Property(
        "availableInChat",
        "Make Available in n8n Chat Hub",
        "boolean",
        False,
        description="Whether to make the agent available in the Chat Hub (/home/chat) for "
        "signed-in users to chat with.",
    ),
    Property(
        "agentIcon",
        "Agent Icon",
        "json",
        _ICON,
        description='The icon of the agent in the hub: {"type": "icon"|"emoji", "value"}.',
        display_options={"show": _HUB_SHOWN},
    ),
    Property(
        "agentName",
        "Agent Name",
        "string",
        "",
        description="The name of the agent in the hub; the workflow's name if left empty.",
        display_options={"show": _HUB_SHOWN},
    ),
    Property(
        "agentDescription",
        "Agent Description",
        "string",
        "",
        display_options={"show": _HUB_SHOWN},
        type_options={"rows": 2},
    ),
    Property(
        "suggestedPrompts",
        "Suggestions",
        "fixedCollection",
        {},
        placeholder="Add Prompt",
        description="Prompts the hub suggests to start a conversation with the agent.",
        groups=(
            FieldGroup(
                "prompts",
                "Prompts",
                (
                    Property("icon", "Icon", "json", {"type": "icon", "value": "comment"}),
                    Property("text", "Prompt Text", "string", "", required=True),
                ),
            ),
        ),
        display_options={"show": _HUB_SHOWN},
        type_options={"multipleValues": True},
    ),
)


@register
class ChatTrigger(NodeType):
    type = "@n8n/n8n-nodes-langchain.chatTrigger"
    description = NodeDescription(
        display_name="When chat message received",
        group="trigger",
        description="Runs the workflow when a chat message arrives (n8n's Chat Trigger).",
        version=1.3,
        subtitle="chat trigger",
        webhook=True,
        # Only used when loadPreviousSession is "memory": the trigger reads that memory directly.
        inputs=(Input("ai_memory", max_connections=1),),
        credentials=(
            CredentialSlot(
                "httpBasicAuth",
                required=True,
                display_options={"show": {"authentication": ("basicAuth",)}},
            ),
        ),
        properties=(
            Property(
                "public",
                "Make Chat Publicly Available",
                "boolean",
                False,
                description="Off: the production URL answers 404 (the editor's chat still works).",
            ),
            Property(
                "mode",
                "Mode",
                "options",
                "hostedChat",
                options=(Option("hostedChat", "Hosted Chat"), Option("webhook", "Embedded Chat")),
                display_options={"show": {"public": (True,)}},
            ),
            Property(
                "path",
                "Path",
                "string",
                "",
                placeholder="support",
                description="Ours: a custom production path (else <webhookId>/chat, as in n8n).",
            ),
            Property(
                "authentication",
                "Authentication",
                "options",
                "none",
                options=(
                    Option("none", "None"),
                    Option("basicAuth", "Basic Auth"),
                    Option("n8nUserAuth", "n8n User Auth"),
                ),
                display_options={"show": {"public": (True,)}},
            ),
            Property(
                "initialMessages",
                "Initial Message(s)",
                "string",
                "Hi there! 👋\nMy name is Nathan. How can I assist you today?",
                display_options={"show": {"public": (True,), "mode": ("hostedChat",)}},
                type_options={"rows": 3},
            ),
            *HUB_PROPERTIES,
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add Field",
                children=(
                    Property(
                        "responseMode",
                        "Response Mode",
                        "options",
                        "lastNode",
                        options=(
                            Option("lastNode", "When Last Node Finishes"),
                            Option("streaming", "Streaming"),
                            Option("responseNode", "Using Response Nodes"),
                            Option("responseNodes", "Using Response Nodes (chat)"),
                        ),
                    ),
                    Property("allowedOrigins", "Allowed Origins (CORS)", "string", "*"),
                    Property(
                        "loadPreviousSession",
                        "Load Previous Session",
                        "options",
                        "notSupported",
                        options=(
                            Option("notSupported", "Off"),
                            Option("memory", "From Memory"),
                            Option("manually", "Manually"),
                        ),
                    ),
                    Property("title", "Title", "string", "Hi there! 👋"),
                    Property(
                        "subtitle",
                        "Subtitle",
                        "string",
                        "Start a chat. We're here to help you 24/7.",
                    ),
                    Property(
                        "inputPlaceholder", "Input Placeholder", "string", "Type your question.."
                    ),
                    Property("allowFileUploads", "Allow File Uploads", "boolean", False),
                    Property("allowedFilesMimeTypes", "Allowed File Mime Types", "string", "*"),
                    # n8nUserAuth: the signed-in user as `user` in the output. n8n's default is
                    # true from typeVersion 1.5 and false before (`include_user` reads it so).
                    Property(
                        "includeUserInOutput",
                        "Include User in Output",
                        "boolean",
                        False,
                        display_options={"show": {"/authentication": ("n8nUserAuth",)}},
                    ),
                    Property(
                        "showWelcomeScreen",
                        "Require Button Click to Start Chat",
                        "boolean",
                        False,
                        description="Whether to show the welcome screen at the start of the chat",
                        display_options={"show": {"/mode": ("hostedChat",)}},
                    ),
                    Property(
                        "getStarted",
                        "Start Conversation Button Text",
                        "string",
                        "New Conversation",
                        placeholder="e.g. New Conversation",
                        description="Shown as part of the welcome screen, in the middle of the "
                        "chat window",
                        display_options={
                            "show": {"showWelcomeScreen": (True,), "/mode": ("hostedChat",)}
                        },
                    ),
                    Property(
                        "customCss",
                        "Custom Chat Styling",
                        "string",
                        CUSTOM_CSS_TEMPLATE,
                        description="Override default styling of the public chat interface "
                        "with CSS",
                        display_options={"show": {"/mode": ("hostedChat",)}},
                        type_options={"rows": 10, "editor": "cssEditor"},
                    ),
                ),
            ),
        ),
    )

    def validate(self, node: Node) -> None:
        # Types and options are checked from the description (engine/description.py).
        if not chat_path(node):
            raise WorkflowValidationError("needs a webhookId or a path", node=node.name)

    def webhooks(self, node: Node) -> list[WebhookSpec]:
        path = chat_path(node)
        mode = chat_settings(node).response_mode
        return [WebhookSpec("GET", path, "onReceived"), WebhookSpec("POST", path, mode)]

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [ctx.input_items]


@dataclass(frozen=True)
class ChatSettings:
    """How a Chat Trigger behaves at its URL: what the api reads, decided here once."""

    params: dict[str, Any]  # every parameter over the defaults; `options` always a dict
    given_options: dict[str, Any]  # the options the node sets, without defaults
    public: bool  # false: the production URL answers 404, as for an unknown path
    authentication: str  # none, basicAuth, n8nUserAuth
    hosted_page: bool  # GET serves the hosted chat page
    response_mode: str  # the webhook response mode its messages are answered in
    include_user: bool  # n8nUserAuth: the signed-in user goes into the output as `user`

    @property
    def options(self) -> dict[str, Any]:
        return self.params["options"]

    def given(self, name: str) -> Any:
        """An option as the node sets it, None when it does not: n8n reads an option the
        workflow leaves out as undefined, not as its form's default (Custom Chat Styling)."""
        return self.given_options.get(name)

    @property
    def allowed_origins(self) -> list[str]:
        """Origins that may call it from a browser (`*`: any), lower case, no trailing slash."""
        return [o.rstrip("/") for o in comma_list(self.options.get("allowedOrigins"))]

    @property
    def allowed_file_types(self) -> list[str]:
        """MIME types (`image/*`) or extensions (`.pdf`) a message's files may have."""
        return comma_list(self.options.get("allowedFilesMimeTypes"))

    @property
    def protected(self) -> bool:
        """A login, or no public URL: its conversations are nobody else's (memory scope)."""
        return not self.public or self.authentication not in ("none", "", None)


def comma_list(value: object) -> list[str]:
    """An n8n comma-separated option, lower case; empty or missing means any (`*`)."""
    text = value if isinstance(value, str) and value.strip() else "*"
    return [part.strip().lower() for part in text.split(",") if part.strip()]


def chat_settings(node: Node) -> ChatSettings:
    params = merged_parameters(node, ChatTrigger.defaults)
    if not isinstance(params.get("options"), dict):  # `"options": null` in a hand-written export
        params["options"] = dict(ChatTrigger.defaults["options"])
    # responseNodes (n8n's "Using Response Nodes"): the POST answers at once and the Chat
    # nodes' messages reach the client over the chat WebSocket (api/chat_socket.py). A hub
    # agent streams unless told otherwise (n8n's responseMode default for availableInChat).
    given = node.parameters.get("options")
    given = given.get("responseMode") if isinstance(given, dict) else None
    default = "streaming" if params.get("availableInChat") is True else "lastNode"
    mode = given or default
    public = bool(params.get("public"))
    given = node.parameters.get("options")
    return ChatSettings(
        params=params,
        given_options=dict(given) if isinstance(given, dict) else {},
        public=public,
        authentication=str(params.get("authentication") or "none"),
        hosted_page=public and params.get("mode", "hostedChat") == "hostedChat",
        response_mode=mode,
        include_user=_include_user(node, params),
    )


def _include_user(node: Node, params: dict[str, Any]) -> bool:
    """n8n's `includeUserInOutput`, whose default is true from typeVersion 1.5."""
    explicit = node.parameters.get("options")
    if isinstance(explicit, dict) and "includeUserInOutput" in explicit:
        return explicit["includeUserInOutput"] is not False
    return node.type_version >= 1.5


def memory_scope(workflow: Workflow) -> str | None:
    """The workflow id whose private namespace holds this workflow's chat memory, or None when
    it shares the public one.

    A chat that asks for a login (`authentication` other than none) or is not public keeps its
    memory to itself: otherwise anyone knowing a session id could read it through a public chat's
    loadPreviousSession, or write into it by chatting there. The trigger's options are read as
    the api reads them (`chat_settings`; `public` defaults to false). Webhook-triggered and public
    chat workflows share the public namespace (n8n's behaviour). A workflow without an id (a
    file run with `mini-n8n run`) is scoped under the empty id.
    """
    for node in workflow.nodes.values():  # disabled ones too: when in doubt, keep it private
        if node.type == ChatTrigger.type and chat_settings(node).protected:
            return workflow.id
    return None


def chat_path(node: Node) -> str:
    """n8n's production URL for a chat trigger is <webhookId>/chat; ours may set `path`."""
    path = str(node.parameters.get("path") or "").strip("/")
    if path:
        return path
    return f"{node.webhook_id}/chat" if node.webhook_id else ""
