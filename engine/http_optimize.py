"""The HTTP Request Tool's "Optimize Response": less of an answer for the model to read (n8n's
configureResponseOptimizer).

- JSON: the field holding the data (`dataField`), then all fields, only some, or all but some
  (`fieldsToInclude`, `fields` with dot notation), as n8n's jsonOptimizer.
- HTML: the `body` element (n8n's default selector), its markup or, with "Return Only Content",
  its text, in a JSON list as n8n writes it; n8n takes any CSS selector, here `body` only.
- Text: the text of the page, as n8n's Readability extraction gives it for plain pages (no
  article detection here: scripts, styles and tags go, the words stay).
HTML and text are cut to "Max Response Characters" when "Truncate Response" is on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from core import jsontext
from engine.errors import NodeExecutionError
from engine.node import ExecuteFunctions

Optimizer = Callable[[Any], Any]
_BODY = re.compile(r"<body\b[^>]*>(.*)</body\s*>", re.IGNORECASE | re.DOTALL)
_SKIPPED = frozenset({"script", "style", "noscript", "template", "head"})


def optimizer(ctx: ExecuteFunctions, index: int) -> Optimizer | None:
    """The optimizer the tool's parameters ask for, or None (the answer as it is)."""
    if not ctx.get_parameter("optimizeResponse", False, index):
        return None
    kind = ctx.get_parameter("responseType", "json", index)
    limit = 0
    if kind in ("html", "text") and ctx.get_parameter("truncateResponse", False, index):
        limit = int(ctx.get_parameter("maxLength", 0, index) or 0)
    if kind == "json":
        return lambda value: _json(ctx, index, value)
    if kind == "html":
        only_text = bool(ctx.get_parameter("onlyContent", False, index))
        return lambda value: _cut(_html(ctx, index, value, only_text), limit)
    return lambda value: _cut(_text(ctx, index, value), limit)


def _fail(ctx: ExecuteFunctions, index: int, message: str) -> NodeExecutionError:
    return NodeExecutionError(message, node=ctx.node.name, item_index=index)


def _json(ctx: ExecuteFunctions, index: int, value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = jsontext.loads(value)
        except ValueError:
            raise _fail(ctx, index, f"Received invalid JSON from response '{value}'") from None
    if not isinstance(value, dict | list):
        raise _fail(ctx, index, "The response type must be an object or an array of objects")
    field = str(ctx.get_parameter("dataField", "", index) or "")
    if isinstance(value, dict):
        if field and field not in value:
            raise _fail(ctx, index, f'Target field "{field}" not found in response.')
        data = value[field] if field else value
        rows = data if isinstance(data, list) else [data]
    else:
        rows = (
            [row.get(field) if isinstance(row, dict) else None for row in value] if field else value
        )
    include = ctx.get_parameter("fieldsToInclude", "all", index)
    if include == "all":
        return rows
    fields = ctx.get_parameter("fields", "", index)
    names = (
        [f.strip() for f in fields.split(",")] if isinstance(fields, str) else list(fields or [])
    )
    if include == "selected":
        return [_pick(row, names) for row in rows]
    return [_drop(row, names) for row in rows]


def _pick(row: Any, names: list[str]) -> dict[str, Any]:
    picked: dict[str, Any] = {}
    for name in names:
        current, parts = row, name.split(".")
        for part in parts:
            current = current.get(part) if isinstance(current, dict) else None
        target = picked
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = current
    return picked


def _drop(row: Any, names: list[str]) -> Any:
    for name in names:
        target, parts = row, name.split(".")
        for part in parts[:-1]:
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target.pop(parts[-1], None)
    return row


class _Text(HTMLParser):
    """The text of an HTML document, without scripts, styles and the head."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.skipping += tag in _SKIPPED

    def handle_endtag(self, tag: str) -> None:
        self.skipping -= tag in _SKIPPED and self.skipping > 0

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def _plain(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return re.sub(r"\s+", " ", " ".join(parser.parts)).strip()


def _as_text(ctx: ExecuteFunctions, index: int, value: Any) -> str:
    if isinstance(value, dict | list):
        value = json.dumps(value, indent=2, ensure_ascii=False)
    if not isinstance(value, str):
        raise _fail(
            ctx, index, f"The response type must be a string. Received: {type(value).__name__}"
        )
    return value


def _html(ctx: ExecuteFunctions, index: int, value: Any, only_text: bool) -> str:
    html = _as_text(ctx, index, value)
    selector = str(ctx.get_parameter("cssSelector", "body", index) or "body").strip()
    if selector != "body":
        raise _fail(ctx, index, f'the CSS selector "{selector}" is not supported (only "body")')
    match = _BODY.search(html)
    inner = match.group(1) if match else html
    text = _plain(inner) if only_text else re.sub(r"\s+", " ", inner.replace("\n", "")).strip()
    return json.dumps([text], indent=2, ensure_ascii=False)


def _text(ctx: ExecuteFunctions, index: int, value: Any) -> str:
    return _plain(_as_text(ctx, index, value))


def _cut(text: str, limit: int) -> str:
    return text[:limit] if limit > 0 else text
