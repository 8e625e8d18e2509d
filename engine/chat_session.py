"""The session fields shared by the memory nodes (n8n's memory/descriptions.ts), and whose
memory a session is: `memory_scope` is the one rule that keeps a protected chat's memory apart."""

from __future__ import annotations

from engine.context import merged_parameters
from engine.errors import NodeExecutionError

CHAT_TRIGGER = "@n8n/n8n-nodes-langchain.chatTrigger"

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


def memory_scope(workflow) -> str | None:
    """The workflow id whose private namespace holds this workflow's chat memory, or None when
    it shares the public one.

    A chat that asks for a login (`authentication` other than none) or is not public keeps its
    memory to itself: otherwise anyone knowing a session id could read it through a public chat's
    loadPreviousSession, or write into it by chatting there. The trigger's options are read as
    the api reads them (node parameters over the trigger's defaults; `public` defaults to false).
    Webhook-triggered and public chat workflows share the public namespace (n8n's behaviour).
    A workflow without an id (a file run with `mini-n8n run`) is scoped under the empty id.
    """
    for node in workflow.nodes.values():  # disabled ones too: when in doubt, keep it private
        if node.type != CHAT_TRIGGER:
            continue
        params = merged_parameters(node, workflow.node_type(node.name).defaults)
        if not params.get("public") or params.get("authentication") not in ("none", "", None):
            return workflow.id
    return None


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
