"""A main node used as an Agent's tool, as n8n makes one of a node that is `usableAsTool`
(its createNodeAsTool and makeHandleToolInvocation): `n8n-nodes-base.httpRequestTool` is the HTTP
Request node so used.

The tool's name is the node's name made safe for a model's API (n8n's nodeNameToToolName), its
description the node's `toolDescription` (or the node type's own when that is empty or set to
"auto"), its arguments the `$fromAI()` calls in the node's parameters (engine/from_ai.py). When
the model calls it, the node runs on one item holding the arguments, and the model is given the
JSON of its output items' `json`, as n8n gives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.jsontext import dumps
from engine import from_ai
from engine.node import Item, SupplyDataFunctions

MAX_TOOL_NAME = 64  # OpenAI's bound on a tool's name
BINARY_ONLY = "Error: The Tool attempted to return binary data, which is not supported in Agents"


def tool_name(node_name: str) -> str:
    """n8n's nodeNameToToolName: runs of other characters as `_`, at most 64 characters."""
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", node_name)
    if len(name) > MAX_TOOL_NAME:
        name = re.sub(r"[_-]+$", "", name[:MAX_TOOL_NAME])
    return name


def tool_description(ctx: SupplyDataFunctions, default: str) -> str:
    """n8n's getToolDescriptionForNode for a node without resource and operation."""
    raw = ctx.node.parameters.get("toolDescription")
    if ctx.node.parameters.get("descriptionType") == "auto" or not str(raw or "").strip():
        return default
    value = ctx.get_parameter("toolDescription", default) if str(raw).startswith("=") else raw
    return str(value)


@dataclass
class NodeTool:
    """A Tool (engine/llm.py) whose call runs a node on the model's arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], list[Item]]

    def call(self, args: dict[str, Any]) -> str:
        output = self.run(dict(args))
        binary = any(item.get("binary") for item in output)
        useful = any(item.get("json") for item in output)
        if binary and not useful:
            return BINARY_ONLY
        return dumps([item.get("json", {}) for item in output])


def node_tool(
    ctx: SupplyDataFunctions,
    default_description: str,
    execute: Callable[[Any], list[Item]],
) -> NodeTool:
    """The tool a node supplies: `execute` runs it on the context `ctx.tool_call` gives."""
    arguments = from_ai.arguments(ctx.node.parameters, ctx.node.name)
    return NodeTool(
        name=tool_name(ctx.node.name) or "tool",
        description=tool_description(ctx, default_description),
        parameters=from_ai.schema(arguments),
        run=lambda args: execute(ctx.tool_call(args)),
    )
