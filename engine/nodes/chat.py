"""Chat (`@n8n/n8n-nodes-langchain.chat`, n8n's "Respond to Chat"): one message to the chat
user in the middle of an execution, and by default a wait for the user's reply.

The message leaves through the sendMessage hook (the worker publishes it to the execution's
channel, the api's chat WebSocket writes it to the client). Waiting is WaitingForReply: the
executor saves where the execution stands and the worker lets it go; the reply resumes it on
any worker, as this node's output (`$json.chatInput`), exactly as n8n's `onMessage` returns it.

Parameters as n8n's node: `message`; options `waitUserReply` (default true; an export may also
carry it at the top level), `memoryConnection` (an ai_memory input: the message is appended to
memory as an AI message, the reply as a human one) and `limitWaitTime` (n8n's fixedCollection
`{"values": {"limitType", "resumeAmount", "resumeUnit", "maxDateAndTime"}}`). Unlike n8n, whose
execution resumes when the limit passes, a wait past its limit ends the execution (an error
that says so): the conversation is over and the chat is told.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

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


@register
class Chat(NodeType):
    type = "@n8n/n8n-nodes-langchain.chat"
    description = NodeDescription(
        display_name="Respond to Chat",
        group="core",
        description="Sends a message to the chat user and can wait for the reply "
        "(a Chat Trigger in 'Using Response Nodes' mode).",
        subtitle="chat respond reply send wait",
        inputs=(Input("main"), Input("ai_memory", max_connections=1)),
        properties=(
            Property("message", "Message", "string", "", required=True, type_options={"rows": 4}),
            Property("waitUserReply", "Wait for User Reply", "boolean", True),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add Option",
                children=(
                    Property("memoryConnection", "Add Memory Input Connection", "boolean", False),
                    Property(
                        "limitWaitTime",
                        "Limit Wait Time",
                        "fixedCollection",
                        {},
                        groups=(
                            FieldGroup(
                                "values",
                                "Values",
                                (
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
                                        45,
                                        display_options={
                                            "show": {"limitType": ("afterTimeInterval",)}
                                        },
                                        type_options={"minValue": 0},
                                    ),
                                    Property(
                                        "resumeUnit",
                                        "Unit",
                                        "options",
                                        "minutes",
                                        options=tuple(
                                            Option(u, u.capitalize()) for u in UNIT_SECONDS
                                        ),
                                        display_options={
                                            "show": {"limitType": ("afterTimeInterval",)}
                                        },
                                    ),
                                    Property(
                                        "maxDateAndTime",
                                        "Max Date and Time",
                                        "string",
                                        "",
                                        display_options={
                                            "show": {"limitType": ("atSpecifiedTime",)}
                                        },
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
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
        for trigger in workflow.triggers():
            if trigger.type != ChatTrigger.type or trigger.disabled:
                continue
            chat = chat_settings(trigger)
            if chat.options.get("responseMode") != "responseNodes":
                continue
            if chat.public and chat.params.get("mode") != "hostedChat":
                continue
            return
        raise WorkflowValidationError(
            'needs a Chat Trigger whose Response Mode is "Using Response Nodes" '
            '(options.responseMode "responseNodes"; when public, in Hosted Chat mode)',
            node=node.name,
        )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        message = ctx.get_parameter("message", "")
        # An expression may produce a number or an object: sent as JSON text, as n8n would.
        # Well-formed text only: the message reaches a Redis script, whose cjson cannot read a
        # lone surrogate an expression may have built (requests cannot carry one).
        text = well_formed(message if isinstance(message, str) else dumps(message))
        self._remember(ctx, ai(text))
        wait = _wait_user_reply(ctx)
        wait_till = _wait_till(ctx) if wait else None
        ctx.send_message(text, wait)
        if not wait:
            return [ctx.input_items]
        raise WaitingForReply([[{"json": {}, "sendMessage": text}]], wait_till)

    def resume(self, ctx: ExecuteFunctions, reply: Item) -> NodeOutput:
        chat_input = reply.get("json", {}).get("chatInput")
        if isinstance(chat_input, str) and chat_input:
            self._remember(ctx, human(chat_input))
        return [[reply]]

    def _remember(self, ctx: ExecuteFunctions, message: ChatMessage) -> None:
        if not _options_of(ctx).get("memoryConnection"):
            return
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


def _options(params: dict[str, Any]) -> dict[str, Any]:
    options = params.get("options")
    return options if isinstance(options, dict) else {}


def _options_of(ctx: ExecuteFunctions) -> dict[str, Any]:
    options = ctx.get_parameter("options", {})
    return options if isinstance(options, dict) else {}


def _wait_user_reply(ctx: ExecuteFunctions) -> bool:
    options = _options_of(ctx)
    value = options.get("waitUserReply", ctx.get_parameter("waitUserReply", True))
    return value is not False and value != "false"


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
    unit = values.get("resumeUnit", "minutes")
    try:
        amount = float(values.get("resumeAmount", 45))
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
