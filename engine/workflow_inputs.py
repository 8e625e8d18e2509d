"""A sub-workflow's inputs, on both sides of the call, as n8n 2.41.1 maps them
(n8n-nodes-base utils/workflowInputsResourceMapping, n8n-core validate-value-against-schema).

The caller (Execute Workflow 1.2+, the Call n8n Workflow Tool) has `workflowInputs`, a resource
mapper: `{"mappingMode": "defineBelow", "value": {<input>: <value or expression>}, "schema":
[{"id", "type", "removed"?, ...}], "attemptToConvertTypes", "convertFieldsToString"}`. Each item
sent is the input item's JSON with the mapped values over it (`caller_items`), each value checked
against its schema type, and the fields the schema marks `removed` left out.

The callee's Execute Workflow Trigger (1.1+) declares its inputs (`inputSource`): its fields
(`workflowInputs.values`: name and type), a JSON example, or "passthrough" (accept all data).
With declared fields each item keeps those fields only, a missing one null (`callee_items`).
"""

from __future__ import annotations

import json
from typing import Any

from core.jsontext import dumps
from engine.errors import NodeExecutionError
from engine.expression_values import is_nullish, to_number, to_string
from engine.node import ExecuteFunctions, Item, SupplyDataFunctions

PASSTHROUGH = "passthrough"
JSON_EXAMPLE = "jsonExample"
FIELDS = "workflowInputs"
TYPES = ("any", "string", "number", "boolean", "array", "object")

Context = ExecuteFunctions | SupplyDataFunctions


def caller_items(ctx: Context, items: list[Item], type_checks: bool, always_text: bool):
    """n8n's getCurrentWorkflowInputData: `workflowInputs.value` over each item's JSON.
    `type_checks`: the mapper offers n8n's type conversion options (Execute Workflow: yes, the
    tool: no); `always_text`: 1.4's alwaysConvertFieldsToString."""
    mapper = ctx.node.parameters.get("workflowInputs")
    mapper = mapper if isinstance(mapper, dict) else {}
    schema = {e.get("id"): e for e in mapper.get("schema") or [] if isinstance(e, dict)}
    removed = {e.get("displayName") for e in schema.values() if e.get("removed")}
    mapped = []
    for index, item in enumerate(items):
        values = ctx.get_parameter("workflowInputs.value", {}, index)
        values = dict(values) if isinstance(values, dict) else {}
        data = {**(item.get("json") or {}), **values}
        for key, value in values.items():
            entry = schema.get(key)
            if entry and entry.get("type"):
                checked = _checked(key, value, str(entry["type"]), index, mapper, type_checks,
                                   always_text)  # fmt: skip
                if checked is _DROP:
                    data.pop(key, None)  # n8n sets it undefined: gone from the item
                else:
                    data[key] = checked
        out: Item = {"json": {k: v for k, v in data.items() if k not in removed}}
        out["pairedItem"] = {"item": index}
        if item.get("binary"):
            out["binary"] = item["binary"]
        mapped.append(out)
    return mapped


def callee_fields(ctx: ExecuteFunctions) -> list[str] | None:
    """The trigger's declared input names; None when it accepts all data."""
    source = ctx.get_parameter("inputSource", PASSTHROUGH)
    if source == PASSTHROUGH:
        return None
    if source == JSON_EXAMPLE:
        example = ctx.get_parameter(JSON_EXAMPLE, "{}")
        try:
            parsed = json.loads(example) if isinstance(example, str) else example
        except ValueError as err:
            raise NodeExecutionError(f"The JSON example is not valid: {err}") from None
        if not isinstance(parsed, dict):
            raise NodeExecutionError("Invalid JSON schema type. Only object type is supported")
        return list(parsed)
    rows = ctx.get_parameter("workflowInputs.values", [])
    return (
        [str(r.get("name")) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    )


def callee_items(items: list[Item], fields: list[str] | None) -> list[Item]:
    """n8n's ExecuteWorkflowTrigger.execute: every item as it came (passthrough), or the
    declared fields only, in declared order, a missing one null."""
    if fields is None:
        return items
    out = []
    for item in items:
        data = item.get("json") or {}
        kept: Item = {"json": {**dict.fromkeys(fields), **{k: v for k, v in data.items()
                                                           if k in fields}}}  # fmt: skip
        if item.get("binary"):
            kept["binary"] = item["binary"]
        out.append(kept)
    return out


_DROP = object()


def _checked(key: str, value: Any, kind: str, index: int, mapper: dict, type_checks: bool,
             always_text: bool) -> Any:  # fmt: skip
    """n8n's validateFieldType for one mapped value, as the resource mapper calls it."""
    if is_nullish(value):
        return _DROP
    strict = type_checks and not mapper.get("attemptToConvertTypes")
    parse_strings = type_checks and (always_text or bool(mapper.get("convertFieldsToString")))
    try:
        return _convert(value, kind.lower(), strict, parse_strings)
    except ValueError:
        described = _describe(value)
        raise NodeExecutionError(
            f"Invalid input for '{key}' [item {index}]: '{key}' expects a {kind} but we got "
            f"{described}",
            item_index=index,
        ) from None


def _convert(value: Any, kind: str, strict: bool, parse_strings: bool) -> Any:
    if kind == "string":
        if not parse_strings:
            return value
        if strict and not isinstance(value, str):
            raise ValueError
        return dumps(value) if isinstance(value, dict | list) else to_string(value)
    if kind == "number":
        if strict and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError
        number = to_number(value)
        if number != number:
            raise ValueError
        return number
    if kind == "boolean":
        if strict and not isinstance(value, bool):
            raise ValueError
        return _boolean(value)
    if kind == "object":
        if strict and not isinstance(value, dict | list):
            raise ValueError
        return _parsed(value, dict)
    if kind == "array":
        if strict and not isinstance(value, list):
            raise ValueError
        return _parsed(value, list)
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not (isinstance(value, str) and not value.strip()):
        number = to_number(value)
        if number in (0, 1):
            return number == 1
    raise ValueError


def _parsed(value: Any, kind: type) -> Any:
    if isinstance(value, kind):
        return value
    text = to_string(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        if kind is dict:
            raise
        parsed = json.loads(text.replace("'", '"'))
    if not isinstance(parsed, kind):
        raise ValueError
    return parsed


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return f"'{to_string(value)}'"
