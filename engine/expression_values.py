"""JavaScript value semantics for n8n expressions, over plain Python values.

JS types map to Python as: string -> str, number -> int | float (ints only while exact as a
double), boolean -> bool, null -> None, undefined -> UNDEFINED, array -> list, object -> dict.
Property access reads dict keys and list/string indices only (methods are in
expression_methods.py). Nothing here looks up a Python attribute by a name from an expression.
"""

from __future__ import annotations

import json
import math
import operator
import re
from decimal import Decimal
from typing import Any

import orjson

from engine.errors import ExpressionError
from engine.expression_budget import json_size, spend, text_cost, text_size

MAX_STRING_LENGTH = 1_000_000  # far more than any prompt or message a workflow builds
MAX_LIST_LENGTH = 1_000_000
MAX_EXACT_INT = 2**53  # beyond this a JS number is no longer an exact integer
_INF = math.inf
_NAN = math.nan
_BLOCKED = {"constructor", "prototype", "__proto__"}
# JS StrDecimalLiteral, ASCII digits only. This sees request data, so it must run in linear time:
# the runs are possessive (`++`, `*+`, `?+`) and no two of them can match the same character, so a
# failed match never backtracks into digits it has read (a backtracking pattern is quadratic on
# a long run of digits that fails to match at its end: "1" * 15_000 + "x").
NUMERIC_TEXT = re.compile(
    r"[+-]?+(?:Infinity|(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+)"
)
_HEX_TEXT = re.compile(r"0[xX][0-9a-fA-F]++")
_RELATIONAL = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class _Undefined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()


class NodeRef:
    """`$('Name')` and `$input`: the items of one node's run, seen from the current item."""

    __slots__ = ("name", "items", "index")

    def __init__(self, name: str, items: list[dict], index: int):
        self.name, self.items, self.index = name, items, index

    def item(self) -> Any:
        """The item paired with the current one: same index, falling back to the first."""
        if not self.items:
            return UNDEFINED
        return self.items[self.index] if 0 <= self.index < len(self.items) else self.items[0]


class Namespace:
    """`Math`, `JSON`, `Object`: holders of functions (see _METHODS) and constants."""

    __slots__ = ("name", "constants")

    def __init__(self, name: str, constants: dict[str, Any] | None = None):
        self.name, self.constants = name, constants or {}


class NodeTable:
    """`$node`: indexing it by a node name gives that node's item."""

    __slots__ = ()


NODE_TABLE = NodeTable()
NAMESPACES = {
    "Math": Namespace("Math", {"PI": math.pi, "E": math.e}),
    "JSON": Namespace("JSON"),
    "Object": Namespace("Object"),
}


# -- types, conversions, limits -------------------------------------------------------------------


def tag(v: Any) -> str:
    if v is UNDEFINED:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    for py_type, name in ((str, "string"), (list, "array"), (dict, "object"), (NodeRef, "node")):
        if isinstance(v, py_type):
            return name
    return v.name if isinstance(v, Namespace) else "unknown"


def type_of(v: Any) -> str:
    name = tag(v)
    return name if name in ("undefined", "boolean", "number", "string") else "object"


def describe(v: Any) -> str:
    """How an error message names a value."""
    name = tag(v)
    if name == "node":
        return f"$('{v.name}')" if v.name != "$input" else "$input"
    if isinstance(v, NodeTable):
        return "$node"
    if name in ("undefined", "null") or isinstance(v, Namespace):
        return name
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def is_nullish(v: Any) -> bool:
    return v is None or v is UNDEFINED


def truthy(v: Any) -> bool:
    if is_nullish(v):
        return False
    if isinstance(v, bool | str):
        return bool(v)
    if isinstance(v, int | float):
        return v == v and v != 0
    return True


def normalize(x: int | float) -> int | float:
    """Keep numbers as exact ints where a double would be exact, floats otherwise."""
    if isinstance(x, float) and x.is_integer() and abs(x) <= MAX_EXACT_INT:
        return int(x)
    if isinstance(x, int) and abs(x) > MAX_EXACT_INT:
        try:
            return float(x)
        except OverflowError:
            return _INF if x > 0 else -_INF
    return x


def to_number(v: Any) -> int | float:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        return v
    if v is None:
        return 0
    if isinstance(v, list):
        v = to_string(v)
    if not isinstance(v, str):
        return _NAN
    s = v.strip()
    if not s:
        return 0
    if _HEX_TEXT.fullmatch(s):
        return normalize(int(s[2:], 16))  # base 16 converts in linear time, unlike base 10
    # float() is linear and correctly rounded, and gives inf past the double range as JS does;
    # the match first rejects what float() accepts but JS does not ("1_0", "nan", "١").
    return normalize(float(s)) if NUMERIC_TEXT.fullmatch(s) else _NAN


def number_to_string(x: int | float) -> str:
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "NaN"
    if x in (_INF, -_INF):
        return "Infinity" if x > 0 else "-Infinity"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    text = repr(x)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if -7 < power < 21:  # JS writes these without an exponent, Python does not
        return format(Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def to_string(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return number_to_string(v)
    if v is None:
        return "null"
    if v is UNDEFINED:
        return "undefined"
    if isinstance(v, list):
        return join_list(v, ",")
    return f"[object {v.name}]" if isinstance(v, Namespace) else "[object Object]"


def join_list(items: list, sep: str) -> str:
    """`items.join(sep)`: its length is known (and charged) before any part is built, however
    often the same nested array appears in it."""
    items_text = text_size(items, _scalar_text_size)
    size = items_text + (len(sep) - 1) * max(len(items) - 1, 0)  # text_size counted "," once
    check_length(size)
    spend(text_cost(size))
    built: dict[int, str] = {}  # a nested array met again is joined once

    def part(x: Any) -> str:
        if is_nullish(x):
            return ""
        if not isinstance(x, list):
            return to_string(x)
        text = built.get(id(x))
        if text is None:
            text = built[id(x)] = ",".join(map(part, x))
        return text

    return sep.join(map(part, items))


def _scalar_text_size(v: Any) -> int:
    return 0 if is_nullish(v) else len(to_string(v))


def json_stringify(v: Any, indent: Any = UNDEFINED) -> Any:
    """JSON.stringify(v, null, indent): sized (and charged) before it is built, then built in C."""
    if v is UNDEFINED:
        return UNDEFINED
    unit = ""
    if isinstance(indent, int | float) and not isinstance(indent, bool) and indent >= 1:
        unit = " " * min(int(indent), 10)
    elif isinstance(indent, str):
        unit = indent[:10]
    size = json_size(v, len(unit), json_scalar_size)
    check_length(size, what="JSON.stringify: string")
    spend(text_cost(size))
    text = _json_text(v, unit)
    check_length(len(text), what="JSON.stringify: string")  # escapes were not in the size
    return text


def json_scalar_size(v: Any) -> int:
    """Characters of a non-container's JSON text (escapes inside strings not counted)."""
    if isinstance(v, str):
        return len(v) + 2
    if isinstance(v, bool):
        return 4 if v else 5
    if isinstance(v, int):
        return len(str(v)) if abs(v) < 2**64 else int(v.bit_length() * 0.302) + 2
    if isinstance(v, float):
        return len(repr(v)) if v == v and v not in (_INF, -_INF) else 4
    return 4  # null, undefined (as null), and what cannot be converted (refused when built)


def _json_text(v: Any, unit: str) -> str:
    """orjson's text (JS's separators, NaN and Infinity as null), indented by `unit`; what orjson
    refuses (lone surrogates, integers past 64 bits) goes through the json module."""
    try:
        text = orjson.dumps(v, default=_plain, option=orjson.OPT_INDENT_2 if unit else 0)
        return _reindent(text.decode(), unit) if unit and unit != "  " else text.decode()
    except orjson.JSONEncodeError as exc:
        if isinstance(exc.__cause__, _NotJson):
            raise ExpressionError(f"JSON.stringify failed: {exc.__cause__}") from None
    try:
        return json.dumps(
            v,
            ensure_ascii=False,
            indent=unit or None,
            separators=(",", ": ") if unit else (",", ":"),
            default=_plain,
        )
    except (TypeError, ValueError) as exc:
        raise ExpressionError(f"JSON.stringify failed: {exc}") from None


def _reindent(text: str, unit: str) -> str:
    """Two spaces per level (orjson's) -> `unit` per level, one C-level pass per level, deepest
    first. A line of JSON text starts with its indentation (strings hold no raw line breaks);
    a NUL character marks lines already done, as JSON text never holds it raw."""
    if "\x00" in unit:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=unit)
    depth = 0
    while "\n" + "  " * (depth + 1) in text:
        depth += 1
    for level in range(depth, 0, -1):
        text = text.replace("\n" + "  " * level, "\n\x00" + unit * level)
    return text.replace("\x00", "")


class _NotJson(TypeError):
    pass


def _plain(v: Any) -> Any:
    if v is UNDEFINED:
        return None
    raise _NotJson(f"{describe(v)} cannot be converted to JSON")


def segment_string(v: Any) -> str:
    """How a `{{ }}` segment appears inside template text: objects and arrays as JSON (as n8n
    shows them), undefined and null as nothing (n8n 2.41.1: `[{{ $json.nope }}|{{ null }}]` is
    `[|]`)."""
    if v is UNDEFINED or v is None:
        return ""
    if isinstance(v, dict | list):
        return json_stringify(v)
    return to_string(v)


def stored(v: Any) -> Any:
    """A value put into an array or object literal, or handed back to the engine."""
    if isinstance(v, NodeRef | Namespace | NodeTable):
        raise ExpressionError(f"{describe(v)} is not a value; pick items or fields")
    return None if v is UNDEFINED else v


def check_length(n: int, *, is_list: bool = False, what: str | None = None) -> None:
    limit = MAX_LIST_LENGTH if is_list else MAX_STRING_LENGTH
    if n > limit:
        what = what or ("list" if is_list else "string")
        raise ExpressionError(
            f"{what} too long ({n:,} > {limit:,} {'items' if is_list else 'characters'})"
        )


def cost(v: Any) -> int:
    """Evaluation steps charged for handling `v`, so big values use up the step budget."""
    if isinstance(v, str):
        return len(v) // 100
    return len(v) // 20 if isinstance(v, list | dict) else 0


# -- operators ------------------------------------------------------------------------------------


def strict_equal(a: Any, b: Any) -> bool:
    kind = tag(a)
    if kind != tag(b):
        return False
    if kind in ("number", "string", "boolean"):
        return a == b
    return kind in ("null", "undefined") or a is b


def loose_equal(a: Any, b: Any) -> bool:
    ta, tb = tag(a), tag(b)
    if ta == tb:
        return strict_equal(a, b)
    if is_nullish(a) or is_nullish(b):
        return is_nullish(a) and is_nullish(b)
    if ta == "boolean" or tb == "boolean":
        return loose_equal(
            to_number(a) if ta == "boolean" else a, to_number(b) if tb == "boolean" else b
        )
    primitive = ("number", "string")
    if ta in primitive and tb in primitive:
        return to_number(a) == to_number(b)
    if ta in primitive or tb in primitive:
        return loose_equal(_primitive(a), _primitive(b))
    return False


def _primitive(v: Any) -> Any:
    return to_string(v) if isinstance(v, list | dict | NodeRef | Namespace) else v


def binary(op: str, a: Any, b: Any) -> Any:
    if op in ("===", "!=="):
        return strict_equal(a, b) == (op == "===")
    if op in ("==", "!="):
        return loose_equal(a, b) == (op == "==")
    if op in _RELATIONAL:
        a, b = _primitive(a), _primitive(b)
        if not (isinstance(a, str) and isinstance(b, str)):
            a, b = to_number(a), to_number(b)
            if a != a or b != b:
                return False
        return _RELATIONAL[op](a, b)
    if op == "+":
        a, b = _primitive(a), _primitive(b)
        if isinstance(a, str) or isinstance(b, str):
            left, right = to_string(a), to_string(b)
            check_length(len(left) + len(right))
            spend(text_cost(len(left) + len(right)))
            return left + right
    return arithmetic(op, to_number(a), to_number(b))


def arithmetic(op: str, x: int | float, y: int | float) -> int | float:
    if op == "+":
        return normalize(x + y)
    if op == "-":
        return normalize(x - y)
    if op == "*":
        return normalize(x * y)
    if op == "/":
        if y == 0:
            return _NAN if x == 0 or x != x else (_INF if x > 0 else -_INF)
        return normalize(x / y)
    if op == "%":
        if y == 0 or x != x or y != y or x in (_INF, -_INF):
            return _NAN
        return x if y in (_INF, -_INF) else normalize(math.fmod(x, y))
    return power(x, y)


def power(x: int | float, y: int | float) -> int | float:
    """`**` without ever building a huge integer: exact ints only for small results."""
    if y != y:
        return _NAN
    if y == 0:
        return 1
    if (
        isinstance(x, int)
        and isinstance(y, int)
        and y > 0
        and (x in (0, 1, -1) or y * abs(x).bit_length() <= 64)
    ):
        return normalize(x**y)
    if x == 0 and y < 0:
        return _INF
    try:
        return normalize(math.pow(x, y))
    except OverflowError:
        raise ExpressionError("number too large: the result of ** overflows") from None
    except ValueError:
        return _NAN


# -- properties -----------------------------------------------------------------------------------


def get_property(obj: Any, key: Any) -> Any:
    name = key if isinstance(key, str) else to_string(key)
    if is_nullish(obj):
        raise ExpressionError(f"Cannot read properties of {to_string(obj)} (reading '{name}')")
    if name in _BLOCKED or name.startswith("__"):
        raise ExpressionError(f'access to "{name}" is not allowed')
    if isinstance(obj, dict):
        return obj.get(name, UNDEFINED)
    if isinstance(obj, list | str):
        if name == "length":
            return len(obj)
        index = _index(key)
        return obj[index] if index is not None and index < len(obj) else UNDEFINED
    if isinstance(obj, NodeRef):
        if name == "item":
            return obj.item()
        raise ExpressionError(
            f'unsupported property "{name}" on {describe(obj)}; use .item, .first(), .last() or .all()'
        )
    if isinstance(obj, Namespace):
        return obj.constants.get(name, UNDEFINED)
    return UNDEFINED


def _index(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, float) and key.is_integer():
        key = int(key)
    if isinstance(key, str) and _is_index_text(key):
        key = int(key)
    return key if isinstance(key, int) and key >= 0 else None


def _is_index_text(key: str) -> bool:
    """Whether `key` reads as an array index: ASCII digits, no leading zero (isdigit alone also
    accepts "²", which int() refuses, and "١")."""
    return key.isascii() and key.isdigit() and len(key) < 16 and (key == "0" or key[0] != "0")
