"""n8n's `$fromAI()`: a node used as an Agent's tool lets the model fill some of its parameters.

A parameter such as `={{ $fromAI('city', 'The city to look up', 'string') }}` declares an
argument of the tool: its key, what it means to the model, its type (string, number, boolean or
json) and an optional default. The tool's JSON schema is every such call found in the node's
parameters (n8n's traverseNodeParameters and generateZodSchema); when the model calls the tool,
the node runs on one item holding the model's arguments, and `$fromAI(key)` reads them
(engine/expressions.py). The scan is n8n's extractFromAICalls, character by character: quotes,
escapes and nested parentheses as its parser reads them, and its messages when they go wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.errors import WorkflowValidationError

TYPES = ("string", "number", "boolean", "json")
KEY = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_CALL = re.compile(r"\$fromAI\s*\(\s*", re.IGNORECASE)
_QUOTES = "\"'`"


class FromAIError(ValueError):
    """A `$fromAI()` call that cannot declare an argument (n8n's ParseError messages)."""


@dataclass(frozen=True)
class FromAIArgument:
    key: str
    description: str | None = None
    type: str = "string"
    default: Any = None  # None: no default (the model must give it)

    def schema(self) -> dict[str, Any]:
        """The argument's JSON schema, as zod-to-json-schema writes n8n's zod schema."""
        if self.type == "json":
            schema: dict[str, Any] = {
                "anyOf": [
                    {"type": "object", "minProperties": 1, "additionalProperties": True},
                    {"type": "array", "minItems": 1},
                ]
            }
        else:
            schema = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.default is not None:
            schema["default"] = self.default
        return schema


def calls_in(text: str) -> list[FromAIArgument]:
    """The arguments every `$fromAI(...)` in `text` declares."""
    found = []
    for match in _CALL.finditer(text):
        inside = _arguments_text(text, match.end())
        try:
            found.append(_parse_arguments(inside))
        except FromAIError as err:
            raise FromAIError(
                f"Failed to parse $fromAI arguments: {inside}: Error: {err}"
            ) from None
    return found


def _arguments_text(text: str, start: int) -> str:
    """What is between the call's parentheses, or FromAIError when they do not close."""
    out: list[str] = []
    quote, depth, pos = "", 1, start
    while pos < len(text) and depth > 0:
        char = text[pos]
        if quote:
            if char == "\\" and pos + 1 < len(text):
                out.append(text[pos : pos + 2])
                pos += 2
                continue
            if char == quote:
                quote = ""
        elif char in _QUOTES:
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if depth > 0 or char != ")":
            out.append(char)
        pos += 1
    if depth:
        raise FromAIError(f"Unbalanced parentheses while parsing $fromAI call: {text[start:]}")
    return "".join(out)


def _split(inside: str) -> list[str]:
    """The arguments, split at commas outside quotes (n8n's parseArguments)."""
    args, current, quote, escaped = [], "", "", False
    for char in inside:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _QUOTES:
            quote = char if not quote else ("" if char == quote else quote)
            current += char
        elif char == "," and not quote:
            args.append(current.strip())
            current = ""
        else:
            current += char
    if current:
        args.append(current.strip())
    return [_unquote(arg.strip()) for arg in args]


def _unquote(arg: str) -> str:
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in _QUOTES:
        inner = arg[1:-1]
        for escaped, plain in (("\\'", "'"), ("\\`", "`"), ('\\"', '"'), ("\\\\", "\\")):
            inner = inner.replace(escaped, plain)
        return inner
    return arg


def _parse_arguments(inside: str) -> FromAIArgument:
    args = _split(inside)
    raw_type = args[2] if len(args) > 2 else "string"
    kind = raw_type.lower()
    if kind not in TYPES:
        raise FromAIError(f"Invalid type: {raw_type}")
    return FromAIArgument(
        key=args[0] if args else "",
        description=args[1] if len(args) > 1 else None,
        type=kind,
        default=_default(args[3], kind) if len(args) > 3 else None,
    )


def _default(value: str, kind: str) -> Any:
    """n8n's parseDefaultValue: the default keeps the argument's type where it can."""
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


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def arguments(parameters: dict[str, Any], node: str) -> list[FromAIArgument]:
    """Each argument the node's parameters declare, once (n8n's getSchema): a key must be 1 to
    64 letters, digits, `_` or `-`, and a key declared twice must agree on description and
    type. WorkflowValidationError names the node otherwise."""
    keyed: dict[str, FromAIArgument] = {}
    for text in _strings(parameters):
        try:
            found = calls_in(text)
        except FromAIError as err:
            raise WorkflowValidationError(str(err), node=node) from None
        for argument in found:
            if not KEY.match(argument.key):
                problem = (
                    "You must specify a key when using $fromAI()"
                    if not argument.key
                    else f"Parameter key `{argument.key}` is invalid"
                )
                raise WorkflowValidationError(problem, node=node)
            earlier = keyed.get(argument.key)
            if earlier and (earlier.description, earlier.type) != (
                argument.description,
                argument.type,
            ):
                raise WorkflowValidationError(
                    f"Duplicate key '{argument.key}' found with different description or type",
                    node=node,
                )
            keyed[argument.key] = argument
    return list(keyed.values())


def schema(found: list[FromAIArgument]) -> dict[str, Any]:
    """The tool's JSON schema: every argument, those without a default required."""
    return {
        "type": "object",
        "properties": {a.key: a.schema() for a in found},
        "required": [a.key for a in found if a.default is None],
        "additionalProperties": False,
    }
