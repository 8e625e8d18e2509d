"""What a Code node returned, checked and made into items as n8n does it (n8n-nodes-base's
Code/result-validation.ts and n8n-core's normalizeItems), with n8n's words for each mistake.

The value arrives as JSON (the task runner's result crosses to n8n as JSON too), so `undefined`
is already gone: the caller says when the code returned nothing at all.
"""

from __future__ import annotations

from typing import Any

from engine.errors import NodeExecutionError

ITEM_KEYS = ("json", "binary", "pairedItem", "error", "index")  # n8n's REQUIRED_N8N_ITEM_KEYS


class CodeResultError(NodeExecutionError):
    """A Code node returned something n8n would not take as items (n8n's ValidationError:
    the item index and the line, when known, join the message as n8n writes them)."""

    def __init__(self, message: str, description: str = "", item_index: int | None = None):
        if item_index is not None:
            message = f"{message} [item {item_index}]"
        super().__init__(message, item_index=item_index)
        self.description = description


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and not (isinstance(value, float) and value != value)


def normalize_items(data: Any) -> list[dict[str, Any]]:
    """n8n-core's normalizeItems: an object becomes one item, plain objects are wrapped in
    `json`, and a mix of items and plain objects is refused."""
    if _is_object(data):
        data = [data] if _truthy(data.get("json")) else [{"json": data}]
    has_json = [_is_object(item) and "json" in item for item in data]
    if all(has_json):
        return data
    if any(has_json):
        raise NodeExecutionError("Inconsistent item format")
    has_binary = [_is_object(item) and "binary" in item for item in data]
    if all(has_binary):
        return [
            {"json": {k: v for k, v in item.items() if k != "binary"}, "binary": item["binary"]}
            for item in data
        ]
    if any(has_binary):
        raise NodeExecutionError("Inconsistent item format")
    return [{"json": item} for item in data]


def _check_item(item: dict[str, Any], index: int | None) -> None:
    if not _is_object(item.get("json")):
        raise CodeResultError(
            "A 'json' property isn't an object",
            "In the returned data, every key named 'json' must point to an object.",
            index,
        )
    if "binary" in item and not _is_object(item["binary"]):
        raise CodeResultError(
            "A 'binary' property isn't an object",
            "In the returned data, every key named 'binary' must point to an object.",
            index,
        )


def _check_top_level_keys(item: dict[str, Any], index: int) -> None:
    reserved = next((key for key in item if key in ITEM_KEYS), None)
    unknown = [key for key in item if key not in ITEM_KEYS]
    if not unknown:
        return
    if reserved is not None:
        raise CodeResultError(
            "Invalid output format",
            f"An output item contains the reserved key <code>{reserved}</code>. To get around "
            "this, please wrap each item in an object, under a key called <code>json</code>.",
            index,
        )
    raise CodeResultError(
        f"Unknown top-level item key: {unknown[0]}",
        "Access the properties of an item under `.json`, e.g. `item.json`",
        index,
    )


def all_items(result: Any, returned_nothing: bool) -> list[dict[str, Any]]:
    """runOnceForAllItems: an array of items (or of plain objects), or one object."""
    not_items = CodeResultError(
        "Code doesn't return items properly",
        "Please return an array of objects, one for each item you would like to output.",
    )
    if returned_nothing or not isinstance(result, dict | list):
        raise not_items
    if isinstance(result, list):
        if not all(_is_object(item) for item in result):
            raise not_items
        if any(any(key in ITEM_KEYS for key in item) for item in result):
            for index, item in enumerate(result):
                _check_top_level_keys(item, index)
    items = normalize_items(result)
    for index, item in enumerate(items):
        _check_item(item, index)
    return items


def each_item(result: dict[str, Any], index: int) -> dict[str, Any]:
    """runOnceForEachItem: the item the runner made of what the code returned for input item
    `index` ({json, pairedItem[, binary]}: sandbox/harness.js `eachResult`). An array or a
    primitive returned is its `json`, which must be an object."""
    [item] = normalize_items([result])
    _check_item(item, index)
    _check_top_level_keys(item, index)
    return item
