"""Chat (`@n8n/n8n-nodes-langchain.chat`, n8n's "Respond to Chat" / "Chat"): a message to the chat
user in the middle of an execution, and, when it asks for one, a wait for the user's answer.

Versions 1, 1.1, 1.2 and 1.3 as n8n 2.41.1 has them (1.3 is what a new node gets):
- 1.0: `message`, `waitUserReply` (default true).
- 1.1+: `operation` `send` (default: the message goes out and the execution goes on) or
  `sendAndWait`, and with it `responseType`: `freeTextChat` (the user's next chat message is
  the answer) or `approval` (a message with buttons, `{"type": "with-buttons", ...}`, which
  `@n8n/chat` renders; a click GETs the button's link, which resumes the wait with
  `{"data": {"approved", "respondedAt"}}`). `approvalOptions` sets one or two buttons.
- options: `memoryConnection` (the message goes to memory as an AI message, the answer as a
  human one; not for approvals), `limitWaitTime` (n8n's fixedCollection; when it passes, the
  engine resumes the wait with no answer and the node passes its input on, as n8n does).

Outputs, as n8n's `onMessage` gives them (checked against n8n 2.41.1): the answer item (1.0);
`{"data": {...answer, "approved"}}` (1.1); the answer's fields with `data.approved` for an
approval (1.2+). A `send` passes its input on (1.0, 1.1, 1.2) or gives
`{"sessionId", "action": "sendMessage", "chatInput": <its own message>}` (1.3).

The message leaves through the sendMessage hook (the worker publishes it, the api's chat socket
writes it); a wait is WaitingForReply: the executor saves where the execution stands and any
worker continues it with the answer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.chat_node_message import Approval, Button
from core.jsontext import dumps, well_formed
from engine.description import FieldGroup, Input, NodeDescription, Option, Property
from engine.errors import NodeExecutionError, WaitingForReply, WorkflowValidationError
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.nodes.chat_trigger import ChatTrigger, chat_settings
from engine.registry import register
from engine.workflow import Node, Workflow
from memory.base import SessionMemory
from memory.messages import ChatMessage, ai, human

UNIT_SECONDS = {"minutes": 60, "hours": 3600, "days": 86400}
SEND_AND_WAIT = "sendAndWait"
APPROVAL = "approval"
FREE_TEXT = "freeTextChat"

_FROM_1_1 = {"@version": ({"_cnd": {"gte": 1.1}},)}
_BEFORE_1_1 = {"@version": ({"_cnd": {"lt": 1.1}},)}
_WAITS = {"operation": (SEND_AND_WAIT,)}
_APPROVAL_SHOWN = {"responseType": (APPROVAL,), "operation": (SEND_AND_WAIT,)}
_STYLES = (Option("primary", "Primary"), Option("secondary", "Secondary"))


def _limit_wait_time(shown_when: dict[str, tuple[Any, ...]]) -> Property:
    """n8n's limitWaitTimeOption. Left out, there is no limit; its rows default to 1 hour, as
    n8n fills `{"values": {}}` in (an export drops values equal to those defaults)."""
    after = {"show": {"limitType": ("afterTimeInterval",)}}
    values = (
        Property(
            "limitType",
            "Limit Type",
            "options",
            "afterTimeInterval",
            options=(
                Option("afterTimeInterval", "After Time Interval"),
                Option("atSpecifiedTime", "At Specified Time"),
            ),
        ),
        Property(
            "resumeAmount",
            "Amount",
            "number",
            1,
            display_options=after,
            type_options={"minValue": 0, "numberPrecision": 2},
        ),
        Property(
            "resumeUnit",
            "Unit",
            "options",
            "hours",
            display_options=after,
            options=tuple(Option(u, u.capitalize()) for u in UNIT_SECONDS),
        ),
        Property(
            "maxDateAndTime",
            "Max Date and Time",
            "string",
            "",
            display_options={"show": {"limitType": ("atSpecifiedTime",)}},
        ),
    )
    return Property(
        "limitWaitTime",
        "Limit Wait Time",
        "fixedCollection",
        {},
        description="Whether to limit the time this node should wait for a user response "
        "before execution resumes",
        groups=(FieldGroup("values", "Values", values),),
        display_options={"show": shown_when},
    )


_APPROVAL_VALUES = (
    Property(
        "approvalType",
        "Type of Approval",
        "options",
        "single",
        options=(Option("single", "Approve Only"), Option("double", "Approve and Disapprove")),
    ),
    Property(
        "approveLabel",
        "Approve Button Label",
        "string",
        "Approve",
        display_options={"show": {"approvalType": ("single", "double")}},
    ),
    Property(
        "buttonApprovalStyle",
        "Approve Button Style",
        "options",
        "primary",
        options=_STYLES,
        display_options={"show": {"approvalType": ("single", "double")}},
    ),
    Property(
        "disapproveLabel",
        "Disapprove Button Label",
        "string",
        "Decline",
        display_options={"show": {"approvalType": ("double",)}},
    ),
    Property(
        "buttonDisapprovalStyle",
        "Disapprove Button Style",
        "options",
        "secondary",
        options=_STYLES,
        display_options={"show": {"approvalType": ("double",)}},
    ),
)

_PROPERTIES = (
    Property(
        "operation",
        "Operation",
        "options",
        "send",
        options=(
            Option("send", "Send Message"),
            Option(SEND_AND_WAIT, "Send and Wait for Response"),
        ),
        display_options={"show": _FROM_1_1},
    ),
    Property("message", "Message", "string", "", required=True, type_options={"rows": 4}),
    Property(
        "waitUserReply",
        "Wait for User Reply",
        "boolean",
        True,
        display_options={"show": _BEFORE_1_1},
    ),
    Property(
        "responseType",
        "Response Type",
        "options",
        FREE_TEXT,
        options=(
            Option(APPROVAL, "Approval", "User can approve/disapprove from within the message"),
            Option(FREE_TEXT, "Free Text", "User can submit a response in the chat"),
        ),
        display_options={"show": _WAITS},
    ),
    Property(
        "blockUserInput",
        "Block User Input",
        "boolean",
        False,
        description="Whether to block input from the user while waiting for approval",
        display_options={"show": {"responseType": (APPROVAL,)}},
    ),
    Property(
        "approvalOptions",
        "Approval Options",
        "fixedCollection",
        {},
        placeholder="Add option",
        groups=(FieldGroup("values", "Values", _APPROVAL_VALUES),),
        display_options={"show": _APPROVAL_SHOWN},
    ),
    Property(
        "options",
        "Options",
        "collection",
        {},
        placeholder="Add Option",
        children=(
            Property(
                "memoryConnection",
                "Add Memory Input Connection",
                "boolean",
                False,
                display_options={"hide": {"/responseType": (APPROVAL,)}},
            ),
            # Declared twice, as n8n does: shown for 1.0's waitUserReply or 1.1+'s sendAndWait.
            _limit_wait_time({"/waitUserReply": (True,)}),
            _limit_wait_time({"/operation": (SEND_AND_WAIT,)}),
        ),
    ),
)


@register
class Chat(NodeType):
    type = "@n8n/n8n-nodes-langchain.chat"
    description = NodeDescription(
        display_name="Respond to Chat",
        group="core",
        description="Send a message into the chat, and wait for the answer if asked to "
        "(a Chat Trigger in 'Using Response Nodes' mode).",
        subtitle="chat respond reply send wait approve human",
        version=1.3,
        versions=(1, 1.1, 1.2, 1.3),
        inputs=(Input("main"), Input("ai_memory", max_connections=1)),
        properties=_PROPERTIES,
    )

    def validate(self, node: Node) -> None:
        if not str(node.parameters.get("message") or "").strip():
            raise WorkflowValidationError('needs a "Message" to send', node=node.name)
        limit = _options(node.parameters).get("limitWaitTime")
        if limit is not None and not isinstance(limit, dict):
            raise WorkflowValidationError('"Limit Wait Time" must be an object', node=node.name)

    def validate_in(self, node: Node, workflow: Workflow) -> None:
        """n8n's rule: a Chat node answers only a Chat Trigger whose Response Mode is "Using
        Response Nodes" (responseNodes) and, when public, in Hosted Chat mode."""
        if _chat_trigger(workflow) is None:
            raise WorkflowValidationError(
                'needs a Chat Trigger whose Response Mode is "Using Response Nodes" '
                '(options.responseMode "responseNodes"; when public, in Hosted Chat mode)',
                node=node.name,
            )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        message = _message(ctx)
        # An expression may produce a number or an object: sent as JSON text, as n8n would.
        # Well-formed text only: a chat socket's text frame is UTF-8, which cannot carry a lone
        # surrogate an expression may have built (requests cannot carry one).
        text = well_formed(message if isinstance(message, str) else message.frame())
        if _memory_shown(ctx):
            self._remember(ctx, ai(message if isinstance(message, str) else message.text))
        if not _waits(ctx):
            ctx.send_message(text, False)
            return [_sent(ctx, text)]
        wait_till = _wait_till(ctx)
        ctx.send_message(text, True)
        sent = message if isinstance(message, str) else message.to_json()
        raise WaitingForReply([[{"json": {}, "sendMessage": sent}]], wait_till)

    def resume(self, ctx: ExecuteFunctions, reply: Item) -> NodeOutput:
        answer = reply.get("json") or {}
        if "action" not in answer:
            return [[reply]]  # a button's link (n8n's webhook): its item is the output as is
        approval = _response_type(ctx) == APPROVAL
        if approval and ctx.get_parameter("blockUserInput", False):
            # n8n refuses chat input to an approval that blocks it: the wait goes on.
            raise WaitingForReply([], None)
        chat_input = answer.get("chatInput")
        if _memory_shown(ctx) and isinstance(chat_input, str) and chat_input:
            self._remember(ctx, human(chat_input))
        return [[_answer(ctx.node.type_version, reply, approval)]]

    def _remember(self, ctx: ExecuteFunctions, message: ChatMessage) -> None:
        nodes = ctx.sub_nodes("ai_memory")
        if not nodes:
            return
        session: SessionMemory = ctx.supply(nodes[0], 0)
        ctx.run_sub(
            nodes[0],
            "ai_memory",
            {"action": "addMessage", "message": message.to_stored()},
            lambda: session.add_turn([message]),
            lambda _: {"action": "addMessage", "chatHistory": [message.to_stored()]},
        )


def _chat_trigger(workflow: Workflow) -> Node | None:
    for trigger in workflow.triggers():
        if trigger.type != ChatTrigger.type or trigger.disabled:
            continue
        chat = chat_settings(trigger)
        if chat.options.get("responseMode") != "responseNodes":
            continue
        if chat.public and chat.params.get("mode") != "hostedChat":
            continue
        return trigger
    return None


def _options(params: dict[str, Any]) -> dict[str, Any]:
    options = params.get("options")
    return options if isinstance(options, dict) else {}


def _options_of(ctx: ExecuteFunctions) -> dict[str, Any]:
    options = ctx.get_parameter("options", {})
    return options if isinstance(options, dict) else {}


def _response_type(ctx: ExecuteFunctions) -> str:
    if ctx.node.type_version < 1.1 or ctx.get_parameter("operation", "send") != SEND_AND_WAIT:
        return FREE_TEXT
    return str(ctx.get_parameter("responseType", FREE_TEXT))


def _waits(ctx: ExecuteFunctions) -> bool:
    if ctx.node.type_version >= 1.1:
        return ctx.get_parameter("operation", "send") == SEND_AND_WAIT
    # 1.0: waitUserReply; an older form of ours kept it under options, which n8n's chat
    # service also honours.
    value = _options_of(ctx).get("waitUserReply", ctx.get_parameter("waitUserReply", True))
    return value is not False and value != "false"


def _memory_shown(ctx: ExecuteFunctions) -> bool:
    """memoryConnection counts only where the form shows it: not for approvals."""
    return bool(_options_of(ctx).get("memoryConnection")) and _response_type(ctx) != APPROVAL


def _message(ctx: ExecuteFunctions) -> str | Approval:
    """The text to send, or for an approval n8n's message with buttons."""
    message = ctx.get_parameter("message", "")
    # An expression may produce a number or an object: sent as JSON text, as n8n would.
    text = message if isinstance(message, str) else dumps(message)
    if _response_type(ctx) != APPROVAL:
        return text
    return Approval(text, bool(ctx.get_parameter("blockUserInput", False)), _buttons(ctx))


def _buttons(ctx: ExecuteFunctions) -> tuple[Button, ...]:
    """n8n's getSendAndWaitConfig order, reversed: Approve first, then Disapprove."""
    given = ctx.get_parameter("approvalOptions.values", {})
    # n8n fills a row's defaults in when it loads the workflow (an export leaves them out).
    values = {p.name: p.default for p in _APPROVAL_VALUES}
    values.update(given if isinstance(given, dict) else {})
    approve = Button(
        _unescape(str(values.get("approveLabel") or "Approve")),
        ctx.resume_url({"approved": "true"}),
        str(values.get("buttonApprovalStyle") or "primary"),
    )
    if values.get("approvalType") != "double":
        return (approve,)
    disapprove = Button(
        _unescape(str(values.get("disapproveLabel") or "Disapprove")),
        ctx.resume_url({"approved": "false"}),
        str(values.get("buttonDisapprovalStyle") or "secondary"),
    )
    return approve, disapprove


_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&#39;": "'", "&quot;": '"'}


def _unescape(label: str) -> str:
    """What n8n's `escapeHtml` really does to a label: it turns these entities back into
    characters (so "Yes &amp; go" shows "Yes & go"); the widget renders labels as text."""
    for entity, char in _ENTITIES.items():
        label = label.replace(entity, char)
    return label


def _sent(ctx: ExecuteFunctions, text: str) -> list[Item]:
    """A `send`'s output. 1.3 answers as n8n's chat service resumes it: with the session and
    its own message as `chatInput`; earlier versions pass their input on."""
    if ctx.node.type_version < 1.3:
        return ctx.input_items
    trigger = _chat_trigger(ctx.workflow)
    items = (ctx.node_items(trigger.name) if trigger else None) or [{}]
    session_id = items[0].get("json", {}).get("sessionId")
    return [{"json": {"sessionId": session_id, "action": "sendMessage", "chatInput": text}}]


def _answer(version: float, reply: Item, approval: bool) -> Item:
    answer = dict(reply.get("json") or {})
    if version < 1.1:
        return reply
    if version < 1.2:
        data = {**answer, "approved": False} if approval else answer
        return {**reply, "json": {"data": data}}
    nested = dict(answer["data"]) if isinstance(answer.get("data"), dict) else {}
    if approval:
        nested["approved"] = False  # a chat message to an approval is not an approval
    answer.pop("data", None)
    if nested:
        answer["data"] = nested
    return {**reply, "json": answer}


def _wait_till(ctx: ExecuteFunctions) -> int | None:
    """The deadline in ms since the epoch that limitWaitTime sets; None without a limit."""
    limit = _options_of(ctx).get("limitWaitTime")
    if not isinstance(limit, dict) or not limit:  # {}: the option was not added
        return None
    values = limit.get("values", limit)
    if not isinstance(values, dict):
        return None
    now = ctx.services.clock()
    if values.get("limitType", "afterTimeInterval") == "atSpecifiedTime":
        return _at(ctx, values.get("maxDateAndTime"))
    unit = values.get("resumeUnit", "hours")
    try:
        amount = float(values.get("resumeAmount", 1))
    except (TypeError, ValueError):
        amount = -1.0
    if unit not in UNIT_SECONDS or not amount >= 0:
        raise NodeExecutionError(
            "Limit Wait Time needs a number of minutes, hours or days", node=ctx.node.name
        )
    return int((now + amount * UNIT_SECONDS[unit]) * 1000)


def _at(ctx: ExecuteFunctions, value: Any) -> int:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise NodeExecutionError(
            f"Limit Wait Time: {str(value)[:40]!r} is not a date and time", node=ctx.node.name
        ) from None
    return int(moment.timestamp() * 1000)
