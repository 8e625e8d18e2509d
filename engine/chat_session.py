"""The session fields shared by the memory nodes (n8n's memory/descriptions.ts)."""

from __future__ import annotations

from engine.errors import NodeExecutionError

SESSION_DEFAULTS = {
    "sessionIdType": "fromInput",
    "sessionKey": "={{ $json.sessionId }}",
    "contextWindowLength": 5,
}


def session_id(ctx) -> str:
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


def window_length(ctx) -> int | None:
    value = ctx.get_parameter("contextWindowLength", 5)
    try:
        return max(int(value), 0)
    except (TypeError, ValueError) as err:
        raise NodeExecutionError(
            "Context Window Length must be a number", node=ctx.node.name
        ) from err


def _trigger_json(ctx) -> dict | None:
    # n8n falls back to $('<Chat Trigger>').first().json.sessionId
    for node in ctx.workflow.triggers():
        items = ctx.execution.node_items(node.name)
        if items:
            return items[0].get("json")
    return None
