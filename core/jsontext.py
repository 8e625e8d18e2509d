"""JSON text as every process writes and reads it, with JavaScript's rules at the edges.

`dumps` writes what JavaScript's `JSON.stringify` writes, so anything an execution produces can be
sent to Redis, a client or a terminal:
- NaN and ±Infinity become `null` (an expression like `"abc" * 2` is NaN, as in n8n);
- lone surrogates (from a `\\ud800` escape in a request, or built by an expression) are written
  as `\\udXXX` escapes, since UTF-8 cannot carry them and one such character must not break a
  publish, a record or a response;
- everything else is compact, non-ASCII text kept as it is.

`loads_request` parses JSON from outside (request bodies, form fields) with bounds: at most
MAX_DEPTH levels of nesting, JSON's own literals only (no NaN/Infinity), and numbers as
JavaScript reads them, so a hostile body gives a clear error instead of a RecursionError or a
4,000-digit integer deep inside an execution.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

# Far deeper than any chat message or webhook body; shallow enough that no recursive walk over
# the value (ours, Flask's, the json module's) gets near Python's recursion limit.
MAX_DEPTH = 64
MAX_EXACT_INT = 2**53  # past this a JavaScript number is no longer an exact integer
_SEPARATORS = (",", ":")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONTextError(ValueError):
    """The text is not JSON we accept; the message says why, for a 400 answer."""


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    try:
        text = json.dumps(
            value, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False, default=default
        )
    except ValueError as err:
        if "Out of range float" not in str(err):
            raise
        text = json.dumps(
            _finite(value), separators=_SEPARATORS, ensure_ascii=False, default=default
        )
    if not text.isascii() and _LONE_SURROGATE.search(text):
        # Inside JSON text every character is in a string, where `\udXXX` is the escape JSON
        # itself defines for it: backslashreplace writes exactly that.
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def well_formed(text: str) -> str:
    """Text that UTF-8 can carry: a lone surrogate becomes U+FFFD, as Node.js writes it."""
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def loads_request(data: bytes | str) -> Any:
    """A request body (or a JSON form field) as a value, or JSONTextError."""
    try:
        value = json.loads(data, parse_int=_js_int, parse_constant=_no_constant)
    except RecursionError:
        raise JSONTextError(f"The JSON is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except (ValueError, TypeError) as err:  # UnicodeDecodeError is a ValueError
        raise JSONTextError("The request body is not valid JSON") from err
    if _depth_exceeds(value, MAX_DEPTH):
        raise JSONTextError(f"The JSON is nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def _js_int(text: str) -> int | float:
    # JSON.parse gives doubles: exact integers up to 2**53, beyond that the nearest double (and
    # Infinity past 1e308), never a thousand-digit integer.
    if len(text) <= 16:
        number = int(text)
        if abs(number) <= MAX_EXACT_INT:
            return number
    return float(text)


def _no_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not valid JSON")


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Iterative, so the check itself cannot hit the recursion limit."""
    pending = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        children: Iterable[Any]
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
