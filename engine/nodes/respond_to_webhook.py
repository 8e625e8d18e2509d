"""Respond to Webhook (`n8n-nodes-base.respondToWebhook`): decides the HTTP answer of a webhook
in responseNode mode. The answer leaves through the sendResponse hook; the items pass on."""

from __future__ import annotations

import json
import re
from typing import Any

from core.jsontext import dumps, well_formed
from engine.description import FieldGroup, NodeDescription, Option, Property
from engine.errors import NodeExecutionError
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register

# What HTTP can carry: a header name is a token, a value is Latin-1 text without line breaks.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


@register
class RespondToWebhook(NodeType):
    type = "n8n-nodes-base.respondToWebhook"
    description = NodeDescription(
        display_name="Respond to Webhook",
        group="core",
        description="Decides the HTTP answer of a webhook in 'Using Respond to Webhook' mode.",
        version=1.1,
        subtitle="response http",
        properties=(
            Property(
                "respondWith",
                "Respond With",
                "options",
                "firstIncomingItem",
                options=(
                    Option("allIncomingItems", "All Incoming Items"),
                    Option("firstIncomingItem", "First Incoming Item"),
                    Option("json", "JSON"),
                    Option("noData", "No Data"),
                    Option("text", "Text"),
                ),
            ),
            Property(
                "responseBody",
                "Response Body",
                "string",
                "",
                display_options={"show": {"respondWith": ("json", "text")}},
                type_options={"rows": 4},
            ),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add Option",
                children=(
                    Property("responseCode", "Response Code", "number", 200),
                    Property(
                        "responseHeaders",
                        "Response Headers",
                        "fixedCollection",
                        {},
                        type_options={"multipleValues": True},
                        groups=(
                            FieldGroup(
                                "entries",
                                "Entries",
                                (
                                    Property("name", "Name", "string", ""),
                                    Property("value", "Value", "string", ""),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        items = ctx.input_items
        respond_with = ctx.get_parameter("respondWith")
        status = _status(ctx)
        headers = _headers(ctx)
        body, content_type = _body(ctx, respond_with, items)
        if content_type and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = content_type
        ctx.send_response({"status": status, "headers": headers, "body": body})
        return [items]


def _status(ctx: ExecuteFunctions) -> int:
    value = ctx.get_parameter("options.responseCode", 200) or 200
    try:
        status = int(value)
    except (TypeError, ValueError, OverflowError):
        status = 0
    if not 100 <= status <= 599:
        raise NodeExecutionError(
            f"Response Code must be a number from 100 to 599, not {str(value)[:40]!r}",
            node=ctx.node.name,
        )
    return status


def _headers(ctx: ExecuteFunctions) -> dict[str, str]:
    headers: dict[str, str] = {}
    for entry in ctx.get_parameter("options.responseHeaders.entries", []) or []:
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        name, value = str(entry["name"]), str(entry.get("value", ""))
        if not HEADER_NAME.fullmatch(name) or not HEADER_VALUE.fullmatch(value):
            # Node.js refuses such a header too (ERR_INVALID_CHAR): fail the node, clearly.
            raise NodeExecutionError(
                f"Response header {name[:40]!r} has characters HTTP headers cannot carry",
                node=ctx.node.name,
            )
        headers[name] = value
    return headers


def _body(ctx: ExecuteFunctions, respond_with: str, items: list[Item]) -> tuple[str, str | None]:
    if respond_with == "firstIncomingItem":
        return _json(items[0].get("json", {}) if items else {})
    if respond_with == "allIncomingItems":
        return _json([i.get("json", {}) for i in items])
    if respond_with == "json":
        body = ctx.get_parameter("responseBody", "")
        if isinstance(body, str):
            try:
                body = json.loads(body) if body.strip() else {}
            except ValueError as err:
                raise NodeExecutionError(
                    "Response Body is not valid JSON", node=ctx.node.name
                ) from err
        return _json(body)
    if respond_with == "text":
        text = well_formed(str(ctx.get_parameter("responseBody", "")))
        return text, "text/plain; charset=utf-8"
    if respond_with == "noData":
        return "", None
    raise NodeExecutionError(f'unsupported "Respond With": {respond_with}', node=ctx.node.name)


def _json(value: Any) -> tuple[str, str]:
    return dumps(value), "application/json; charset=utf-8"
