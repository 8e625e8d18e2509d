"""`JSON.parse` in expressions: JavaScript's rules and JavaScript's messages.

Python's json module reads what JSON.parse reads, with three differences made good here: NaN
and ±Infinity are not JSON (JSON.parse refuses them), integers are JavaScript numbers (past 2^53
the nearest double), and a failure is told as Node.js (V8) tells it: `SyntaxError: Unexpected
token 'x', "[1, x]" is not valid JSON`, `Expected ',' or ']' after array element in JSON at
position 4 (line 1 column 5)`, rather than in Python's words.

V8 parses any depth; Python's parser recurses, and past its recursion limit the value is
refused with the message JavaScript gives for a structure too deep for its stack.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.errors import ExpressionError
from engine.expression_values import normalize

TOO_DEEP = "RangeError: Maximum call stack size exceeded"
# V8 names the whole text in these, rather than a token of it.
SPECIAL = ("NaN", "Infinity", "undefined", "[object Object]")
CONTEXT = 10  # characters V8 shows either side of an unexpected token in a longer text
LITERALS = {"t": "true", "f": "false", "n": "null"}
NUMBER_BEFORE = re.compile(r"-?\d+(\.\d*)?([eE][+-]?\d*)?\Z")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?)(NaN|Infinity)', re.DOTALL)


class _Constant(ValueError):
    """NaN or ±Infinity, which json reads and JSON.parse does not."""


def parse(text: str) -> Any:
    """JSON.parse(text), or ExpressionError with JavaScript's message."""
    try:
        return json.loads(text, parse_int=_js_int, parse_constant=_refuse)
    except json.JSONDecodeError as err:
        message = v8_message(text, err.msg, err.pos)
    except _Constant:
        message = _constant_message(text)
    except RecursionError:
        raise ExpressionError(f"JSON.parse failed: {TOO_DEEP}") from None
    raise ExpressionError(f"JSON.parse failed: SyntaxError: {message}")


def _js_int(text: str) -> int | float:
    return normalize(int(text)) if len(text) <= 20 else float(text)


def _refuse(name: str) -> Any:
    raise _Constant(name)


def v8_message(text: str, python_msg: str, pos: int) -> str:
    """What V8 says of `text` where Python's json stopped at `pos` saying `python_msg`."""
    if text in SPECIAL:
        return f'"{text}" is not valid JSON'
    for check in (_in_a_string, _in_a_number):
        said = check(text, python_msg, pos)
        if said is not None:
            return said
    if python_msg == "Expecting value":
        return _unexpected_value(text, pos)
    if python_msg == "Extra data":
        return _at("Unexpected non-whitespace character after JSON", text, pos, where="")
    if python_msg == "Expecting ':' delimiter":
        return _at("Expected ':' after property name", text, pos)
    if python_msg.startswith("Expecting property name"):
        first = text[:pos].rstrip().endswith("{")
        what = "Expected property name or '}'" if first else "Expected double-quoted property name"
        return _at(what, text, pos)
    if python_msg == "Expecting ',' delimiter":
        if _container(text, pos) == "[":
            return _at("Expected ',' or ']' after array element", text, pos)
        return _at("Expected ',' or '}' after property value", text, pos)
    return _unexpected_token(text, pos)


def _in_a_string(text: str, python_msg: str, pos: int) -> str | None:
    if python_msg.startswith("Unterminated string"):
        if STRING.fullmatch(text, pos) is None:  # it ends inside an escape
            return "Unexpected end of JSON input"
        return _at("Unterminated string", text, len(text))
    if python_msg.startswith("Invalid control character"):
        return _at("Bad control character in string literal", text, pos)
    if python_msg.startswith("Invalid \\uXXXX escape"):
        end = pos + 1  # Python points at the `u`, V8 at the first character not a hex digit
        while end < min(pos + 5, len(text)) and text[end] in "0123456789abcdefABCDEF":
            end += 1
        return _at("Bad Unicode escape", text, end)
    if python_msg.startswith("Invalid \\escape"):
        return _at("Bad escaped character", text, pos + 1)
    return None


def _in_a_number(text: str, python_msg: str, pos: int) -> str | None:
    """A number that stops where V8 wants more of it: `1.`, `1e`, `01`, `-`."""
    here = text[pos] if pos < len(text) else ""
    if python_msg == "Expecting value" and here == "-":
        return _at("No number after minus sign", text, pos + 1)
    number = NUMBER_BEFORE.search(text, 0, pos)
    if not here or number is None:
        return None
    digits = number.group()
    if here == "." and number.group(1) is None and number.group(2) is None:
        return _at("Unterminated fractional number", text, pos + 1)
    if here in "eE" and number.group(2) is None:
        sign = pos + 1 < len(text) and text[pos + 1] in "+-"
        return _at("Exponent part is missing a number", text, pos + 1 + sign)
    if here.isdigit() and digits.lstrip("-") == "0":
        return _at("Unexpected number", text, pos)
    return None


def _unexpected_value(text: str, pos: int) -> str:
    if pos >= len(text):
        return "Unexpected end of JSON input"
    word = LITERALS.get(text[pos])
    if word is not None:  # `nul`, `tx`: V8 reads the literal letter by letter
        for offset, letter in enumerate(word):
            if pos + offset >= len(text):
                return "Unexpected end of JSON input"
            if text[pos + offset] != letter:
                return _unexpected_token(text, pos + offset)
    return _unexpected_token(text, pos)


def _unexpected_token(text: str, pos: int) -> str:
    if pos >= len(text):
        return "Unexpected end of JSON input"
    token = text[pos]
    if len(text) <= 2 * CONTEXT:
        return f"Unexpected token '{token}', \"{text}\" is not valid JSON"
    start, end = max(pos - CONTEXT, 0), min(pos + CONTEXT, len(text))
    before = "..." if start > 0 else ""
    after = "..." if end < len(text) else ""
    return f"Unexpected token '{token}', {before}\"{text[start:end]}\"{after} is not valid JSON"


def _at(what: str, text: str, pos: int, where: str = " in JSON") -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{what}{where} at position {pos} (line {line} column {column})"


def _container(text: str, pos: int) -> str:
    """The bracket that is open at `pos` ("[" or "{"), strings skipped."""
    brackets = re.sub(r"[^\[\]{}]", "", STRING.sub("", text[:pos]))
    open_ones: list[str] = []
    for bracket in brackets:
        if bracket in "[{":
            open_ones.append(bracket)
        elif open_ones:
            open_ones.pop()
    return open_ones[-1] if open_ones else ""


def _constant_message(text: str) -> str:
    """Where the first NaN or Infinity outside a string is, as V8 tells it."""
    if text in SPECIAL:
        return f'"{text}" is not valid JSON'
    for found in CONSTANT.finditer(text):
        if found.group(2) is None:
            continue  # a string
        if found.group(1):
            return _at("No number after minus sign", text, found.start() + 1)
        return _unexpected_token(text, found.start())
    return _unexpected_token(text, 0)
