"""The session fields shared by the memory nodes (n8n's memory/descriptions.ts). Whose memory a
session is (`memory_scope`) is the Chat Trigger's rule: engine/nodes/chat_trigger.py."""

from __future__ import annotations

from typing import Any

from engine.description import Option, Property
from engine.errors import NodeExecutionError
from engine.node import SupplyDataFunctions

# The session fields of both memory nodes, as n8n declares them.
SESSION_PROPERTIES = (
    Property(
        "sessionIdType",
        "Session ID",
        "options",
        "fromInput",
        options=(
            Option("fromInput", "Connected Chat Trigger Node"),
            Option("customKey", "Define below"),
        ),
    ),
    Property(
        "sessionKey",
        "Key",
        "string",
        "={{ $json.sessionId }}",
        display_options={"show": {"sessionIdType": ("customKey",)}},
    ),
    Property(
        "contextWindowLength",
        "Context Window Length",
        "number",
        5,
        description="How many past interactions the model receives as context.",
        type_options={"minValue": 0},
    ),
)


def session_id(ctx: SupplyDataFunctions) -> str:
    """The session key: `$json.sessionId` of the consuming node's item ("fromInput"), or the
    node's own Key parameter ("customKey")."""
    if ctx.get_parameter("sessionIdType", "fromInput") == "customKey":
        value = ctx.get_parameter("sessionKey", "")
        if value in (None, ""):
            raise NodeExecutionError("Key parameter is empty", node=ctx.node.name)
    elif ctx.node.type_version < 1.2 and "sessionKey" in ctx.node.parameters:
        value = ctx.get_parameter("sessionKey", "")  # v1/v1.1: the key was always an expression
    else:
        value = ctx.get_parameter("sessionKey", "={{ $json.sessionId }}")
        if value in (None, ""):
            value = (_trigger_json(ctx) or {}).get("sessionId")
    if value in (None, ""):
        raise NodeExecutionError("No session ID found", node=ctx.node.name)
    return str(value)


def window_length(ctx: SupplyDataFunctions) -> int | None:
    value = ctx.get_parameter("contextWindowLength", 5)
    try:
        return max(int(value), 0)
    except (TypeError, ValueError) as err:
        raise NodeExecutionError(
            "Context Window Length must be a number", node=ctx.node.name
        ) from err


def _trigger_json(ctx: SupplyDataFunctions) -> dict[str, Any] | None:
    # n8n falls back to $('<Chat Trigger>').first().json.sessionId
    for node in ctx.workflow.triggers():
        items = ctx.node_items(node.name)
        if items:
            return items[0].get("json")
    return None
