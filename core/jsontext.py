"""JSON text as every process writes and reads it, with JavaScript's rules at the edges.

`dumps` writes what JavaScript's `JSON.stringify` writes, so anything an execution produces can be
sent to Redis, a client or a terminal:
- NaN and ±Infinity become `null` (an expression like `"abc" * 2` is NaN, as in n8n);
- lone surrogates (built by an expression; requests may not carry them) are written
  as `\\udXXX` escapes, since UTF-8 cannot carry them and one such character must not break a
  publish, a record or a response;
- everything else is compact, non-ASCII text kept as it is.

`loads_request` parses JSON from outside (request bodies, form fields, chat WebSocket frames,
replies to a Chat node): the body rules every door shares. It parses with orjson, in C and
without a Python call per value, after cheap byte counts have bounded how much there is to build:
- at most `max_values` values (a count of commas and brackets: an upper bound, found by memchr),
  so no body costs the api more than a few milliseconds of parsing, whatever its shape;
- at most MAX_DEPTH levels of nesting (checked over the containers, which the count bounds);
- JSON's own literals only (no NaN/Infinity), and no number past the double range;
- text that UTF-8 can carry: a lone surrogate (`\\ud800`) is refused, so no request can put
  into Redis a string that Lua's cjson cannot read.
Integers are exact up to 2**64 and doubles beyond (JavaScript reads both as doubles).
"""

from __future__ import annotations

import gc
import json
import re
import time
from collections.abc import Callable
from typing import Any

import orjson

# Far deeper than any chat message or webhook body; shallow enough that no recursive walk over
# the value (ours, Flask's, the json module's) gets near Python's recursion limit.
MAX_DEPTH = 64
# Values one body may hold: what bounds a body's parse time and the memory its objects take,
# whatever its shape (docs/performance.md).
MAX_VALUES = 100_000
# A body from this size on gives the loop a turn between its parse's steps (let_others_run).
LARGE_BYTES = 1024 * 1024
NOT_JSON = "The request body is not valid JSON"
_SEPARATORS = (",", ":")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONTextError(ValueError):
    """The text is not JSON we accept; the message says why, for a 400 answer."""

    status = 400


class TooManyValues(JSONTextError):
    """The body holds more values than it may: answered like a body over its size limit."""

    status = 413


# orjson writes what `json.dumps` writes but for an exponent's form (1e16 where json writes
# 1e+16, both JSON) and types json does not know, which it would write itself: those go to
# `default` as they do with json.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """`dumps_bytes` as text."""
    return dumps_bytes(value, default).decode()


def _dumps(value: Any, default: Callable[[Any], Any] | None) -> str:
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


def dumps_bytes(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """The JSON text as UTF-8, written in C where it can be (orjson: several times faster than
    the json module on the records, events and run data every execution writes, and on the
    largest bodies); orjson refuses what only
    `_dumps` writes as JavaScript would (a lone surrogate, an integer past 64 bits, a non-string
    key)."""
    try:
        return orjson.dumps(value, default=default, option=_ORJSON_OPTIONS)  # NaN, ±inf: null
    except (TypeError, orjson.JSONEncodeError):
        return _dumps(value, default).encode()


def loads(data: bytes | str) -> Any:
    """JSON we wrote or stored ourselves (chat memory, events, a model's stream), parsed in C
    (orjson); what orjson refuses and the json module reads (a lone surrogate's escape, an
    integer past 64 bits, NaN) is read by the json module. Not for requests: `loads_request`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


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


def loads_request(data: bytes | str, max_values: int = MAX_VALUES) -> Any:
    """A request body (or a JSON form field, or a chat frame) as a value, or JSONTextError."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # An upper bound of the values: every value but the first follows a comma or opens a
    # container. Commas and brackets inside strings count too, so this may over-count, never under.
    # One pass over the bytes (three counts took two and a half times as long).
    values = len(raw) - len(raw.translate(None, b",[{"))
    let_others_run(raw)
    if values > max_values:
        raise TooManyValues(
            f"The JSON holds too many values (at most {max_values:,}; commas and brackets "
            "inside strings count too)"
        )
    value = _parse(raw)
    let_others_run(raw)
    if _depth_exceeds(value, MAX_DEPTH):
        raise JSONTextError(f"The JSON is nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def let_others_run(raw: bytes) -> None:
    """Between the steps of a large body's parse, a turn for the rest of the process: under
    gevent's monkey-patching (the api) a sleep of 0 lets every ready greenlet run, so no step
    of one large body holds the others (and /healthz) for the whole of it."""
    if len(raw) >= LARGE_BYTES:
        time.sleep(0)


def _parse(raw: bytes) -> Any:
    # The objects built here are acyclic: a collection pass in the middle of building them
    # would only walk them, again and again on a body of nested lists.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise JSONTextError(_reason(str(err))) from None
    finally:
        if enabled:
            gc.enable()


def _reason(message: str) -> str:
    if "UTF-8" in message:
        return "The request body is not valid UTF-8 text"
    if "surrogate" in message:
        return "The JSON holds a lone surrogate (a \\ud800-\\udfff escape not in a pair)"
    if "depth limit" in message or "recursion" in message.lower():
        return f"The JSON is nested too deeply (at most {MAX_DEPTH} levels)"
    return NOT_JSON


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Level by level, so the check itself cannot hit the recursion limit; the value count
    bounds what it visits."""
    if type(value) is not dict and type(value) is not list:
        return False
    level, depth = [value], 1
    while level:
        if depth > limit:
            return True
        level = [
            child
            for container in level
            for child in (container.values() if type(container) is dict else container)
            if type(child) is dict or type(child) is list
        ]
        depth += 1
    return False
