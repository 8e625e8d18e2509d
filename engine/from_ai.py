"""n8n's `$fromAI()`: parameters of a tool node that the model fills in when it calls the tool.

`{{ $fromAI('city', 'the city to look up', 'string') }}` in a tool's parameters does two things,
as in n8n 2.41.1 (n8n-workflow's from-ai-parse-utils and workflow-data-proxy):
- before any call, the tool's parameters are scanned for such calls (`extract`, the text read as
  n8n reads it, never evaluated) and each becomes one argument of the tool's schema, the JSON
  schema the model is sent (`tool_schema`): its key, type (string, number, boolean or json),
  description and default;
- during a call, the expression evaluates to the argument the model gave (`from_ai_value`): the
  call's `query.<key>`, else its `<key>`, else the default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import ExpressionError
from engine.expression_values import UNDEFINED

TYPES = ("string", "number", "boolean", "json")
_KEY = re.compile(r"[a-zA-Z0-9_-]{0,64}")
_CALL = re.compile(r"\$fromAI\s*\(\s*", re.IGNORECASE)
_QUOTES = ('"', "'", "`")
# Keys JavaScript resolves to inherited members rather than the arguments (n8n refuses them).
_UNSAFE_KEYS = {"__proto__", "constructor", "prototype"}


@dataclass(frozen=True)
class FromAiArgument:
    key: str
    description: str | None = None
    type: str = "string"
    default: Any = UNDEFINED  # UNDEFINED: none given


def from_ai_value(call_args: dict | None, args: list) -> Any:
    """`$fromAI(key, description?, type?, default?)` inside a tool call with `call_args`."""
    key = args[0] if args else UNDEFINED
    if key is UNDEFINED or key in ("", None):
        raise ExpressionError("Add a key, e.g. $fromAI('placeholder_name')")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ExpressionError(
            "Invalid parameter key, must be between 1 and 64 characters long and only contain "
            "lowercase letters, uppercase letters, numbers, underscores, and hyphens"
        )
    if key in _UNSAFE_KEYS:
        raise ExpressionError("Invalid parameter key")
    if call_args is None:
        raise ExpressionError("No execution data available")
    default = args[3] if len(args) > 3 else UNDEFINED
    query = call_args.get("query")
    for found in (query.get(key) if isinstance(query, dict) else None, call_args.get(key)):
        if found is not None:
            return found
    return default


def extract(parameters: Any) -> list[FromAiArgument]:
    """Every `$fromAI()` call in the parameters, one per key (the last one's arguments, at the
    place its key was first seen), as n8n's extractFromAIParameters."""
    found: dict[str, FromAiArgument] = {}
    for text in _strings(parameters):
        for argument in _calls(text):
            found[argument.key] = argument
    return list(found.values())


def tool_schema(arguments: list[FromAiArgument]) -> dict[str, Any]:
    """The JSON schema a tool with these arguments is sent to the model with, as LangChain
    writes n8n's zod schema (every argument required unless it has a default)."""
    properties = {a.key: _property(a) for a in arguments}
    required = [a.key for a in arguments if a.default is UNDEFINED]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


def _property(argument: FromAiArgument) -> dict[str, Any]:
    if argument.type == "json":
        prop: dict[str, Any] = {
            "anyOf": [
                {"type": "object", "minProperties": 1, "additionalProperties": True},
                {"type": "array", "minItems": 1},
            ]
        }
    else:
        prop = {"type": argument.type}
    if argument.description:
        prop["description"] = argument.description
    if argument.default is not UNDEFINED:
        prop["default"] = argument.default
    return prop


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _calls(text: str) -> list[FromAiArgument]:
    """n8n's extractFromAICalls: each call's argument text, read up to its closing parenthesis
    (quotes and nested parentheses respected), then split into arguments."""
    calls = []
    for match in _CALL.finditer(text):
        inside = _argument_text(text, match.end())
        if inside is None:
            raise ExpressionError(
                f"Unbalanced parentheses while parsing $fromAI call: {text[match.end() :]}"
            )
        calls.append(_argument(inside))
    return calls


def _argument_text(text: str, start: int) -> str | None:
    depth, quote, out, i = 1, "", [], start
    while i < len(text) and depth > 0:
        char = text[i]
        if quote:
            if char == "\\" and i + 1 < len(text):
                out.append(text[i : i + 2])
                i += 2
                continue
            if char == quote:
                quote = ""
            out.append(char)
        else:
            if char in _QUOTES:
                quote = char
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            if depth > 0 or char != ")":
                out.append(char)
        i += 1
    return "".join(out) if depth == 0 else None


def _argument(inside: str) -> FromAiArgument:
    parts = [_unquote(p) for p in _split(inside)]
    kind = (parts[2] if len(parts) > 2 else "string").lower()
    if kind not in TYPES:
        raise ExpressionError(
            f"Failed to parse $fromAI arguments: {inside}: Error: Invalid type: {parts[2]}"
        )
    default = _default(parts[3], kind) if len(parts) > 3 else UNDEFINED
    return FromAiArgument(parts[0] if parts else "", parts[1] if len(parts) > 1 else None,
                          kind, default)  # fmt: skip


def _split(inside: str) -> list[str]:
    """Arguments split at commas outside quotes (n8n's parseArguments)."""
    args, current, quote, escaped = [], "", "", False
    for char in inside:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            escaped = True
        elif char in _QUOTES:
            if not quote:
                quote = char
            elif char == quote:
                quote = ""
            current += char
        elif char == "," and not quote:
            args.append(current.strip())
            current = ""
        else:
            current += char
    if current:
        args.append(current.strip())
    return args


def _unquote(arg: str) -> str:
    text = arg.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        inner = text[1:-1]
        for quote in ("'", "`", '"'):
            inner = inner.replace("\\" + quote, quote)
        return inner.replace("\\\\", "\\")
    return text


def _default(value: str, kind: str) -> Any:
    """n8n's parseDefaultValue: the default's text as its type, else parsed as JSON if it can."""
    lower = value.lower()
    if kind == "string":
        return value
    if kind == "boolean" and lower in ("true", "false"):
        return lower == "true"
    if kind == "number":
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            return int(number) if number.is_integer() else number
    try:
        return json.loads(value)
    except ValueError:
        return value
