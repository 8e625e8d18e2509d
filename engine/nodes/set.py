"""Edit Fields / Set (`n8n-nodes-base.set`): sets fields on each item.

Reads the three parameter shapes n8n has used: v3.3+ `assignments`, v3.0-3.2 `fields.values`,
and v1/v2 `values.{string,number,boolean}`.
"""

from __future__ import annotations

import copy
from typing import Any

from engine.description import FieldGroup, NodeDescription, Option, Property
from engine.errors import NodeExecutionError
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register


@register
class Set(NodeType):
    type = "n8n-nodes-base.set"
    description = NodeDescription(
        display_name="Edit Fields (Set)",
        group="core",
        description="Sets fields on each item.",
        version=3.4,
        subtitle="set fields edit",
        properties=(
            Property(
                "mode", "Mode", "options", "manual", options=(Option("manual", "Manual Mapping"),)
            ),
            Property(
                "assignments",
                "Fields to Set",
                "fixedCollection",
                {},
                type_options={"multipleValues": True},
                groups=(
                    FieldGroup(
                        "assignments",
                        "Fields",
                        (
                            Property("name", "Name", "string", "", required=True),
                            Property("value", "Value", "json", ""),  # typed by "type"
                            Property(
                                "type",
                                "Type",
                                "options",
                                "string",
                                options=(
                                    Option("string", "String"),
                                    Option("number", "Number"),
                                    Option("boolean", "Boolean"),
                                    Option("object", "Object"),
                                    Option("array", "Array"),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
            Property("includeOtherFields", "Include Other Input Fields", "boolean", False),
            Property("options", "Options", "collection", {}, placeholder="Add Option"),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        out = []
        for index, item in enumerate(ctx.input_items):
            ctx.checkpoint()
            keep = _keeps_input(ctx, index)
            json_data = copy.deepcopy(item.get("json", {})) if keep else {}
            for name, value in _assignments(ctx, index):
                _set_path(json_data, name, value)
            out.append({"json": json_data, "pairedItem": {"item": index}})
        return [out]


def _keeps_input(ctx: ExecuteFunctions, index: int) -> bool:
    if "keepOnlySet" in ctx.node.parameters:  # v1/v2
        return not ctx.get_parameter("keepOnlySet", False, index)
    if "include" in ctx.node.parameters:  # v3.0-3.2
        return ctx.get_parameter("include", "none", index) != "none"
    return bool(ctx.get_parameter("includeOtherFields", False, index))


def _assignments(ctx: ExecuteFunctions, index: int) -> list[tuple[str, Any]]:
    params = ctx.node.parameters
    if "assignments" in params:
        rows = ctx.get_parameter("assignments.assignments", [], index) or []
        return [(r["name"], _typed(r.get("value"), r.get("type"), ctx)) for r in rows]
    if "fields" in params:
        rows = ctx.get_parameter("fields.values", [], index) or []
        return [(r["name"], _v3_value(r)) for r in rows]
    values = ctx.get_parameter("values", {}, index) or {}
    return [(r["name"], r.get("value")) for rows in values.values() for r in rows]


def _v3_value(row: dict[str, Any]) -> Any:
    kind = row.get("type", "stringValue")
    key = kind if kind.endswith("Value") else f"{kind}Value"
    return row.get(key, row.get("stringValue"))


def _typed(value: Any, kind: str | None, ctx: ExecuteFunctions) -> Any:
    try:
        if kind == "number" and isinstance(value, str):
            return float(value) if "." in value else int(value)
        if kind == "boolean" and isinstance(value, str):
            return value.strip().lower() == "true"
    except ValueError as err:
        raise NodeExecutionError(f"'{value}' is not a {kind}", node=ctx.node.name) from err
    return value


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        if not isinstance(data.get(part), dict):
            data[part] = {}
        data = data[part]
    data[parts[-1]] = value
