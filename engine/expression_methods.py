"""The allow-list of methods and global functions n8n expressions may call.

A method is looked up by (JS type of the value, name) in `_METHODS`; a global function by name in
`FUNCTIONS`. Anything not listed here does not exist for an expression. Every function that can
build a string or list larger than what it was given checks the size limit and charges the
evaluation's budget (expression_budget.py) before building it; the evaluator has already charged
for reading the value and the arguments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from functools import lru_cache
from typing import Any

from engine import expression_json
from engine.errors import ExpressionError
from engine.expression_budget import items_cost, spend, text_cost
from engine.expression_values import (
    MAX_EXACT_INT,
    NUMERIC_TEXT,
    UNDEFINED,
    NodeRef,
    check_length,
    is_nullish,
    join_list,
    json_stringify,
    normalize,
    number_to_string,
    power,
    stored,
    strict_equal,
    tag,
    to_number,
    to_string,
    truthy,
    type_of,
)

_INF = math.inf
_NAN = math.nan


def find_method(obj: Any, name: str) -> Callable[[Any, list], Any] | None:
    return _METHODS.get(tag(obj), {}).get(name)


def _arg(args: list, i: int) -> Any:
    return args[i] if i < len(args) else UNDEFINED


def _int(value: Any, default: int) -> int:
    """JS ToIntegerOrInfinity, clamped to a range Python slicing handles cheaply."""
    if value is UNDEFINED:
        return default
    n = to_number(value)
    if n != n:
        return 0
    return int(max(-MAX_EXACT_INT, min(MAX_EXACT_INT, n)))


def _str_arg(args: list, i: int) -> str:
    return to_string(_arg(args, i))


def _replace(s: str, args: list, count: int) -> str:
    pattern, replacement = _str_arg(args, 0), _str_arg(args, 1)
    hits = min(s.count(pattern), count) if count >= 0 else s.count(pattern)
    size = len(s) + hits * (len(replacement) - len(pattern))
    check_length(size)
    spend(text_cost(size))
    return s.replace(pattern, replacement, count)


def _split(s: str, args: list) -> list[str]:
    sep = _arg(args, 0)
    if sep is UNDEFINED:
        parts = [s]
    else:
        sep = to_string(sep)
        count = len(s) if sep == "" else s.count(sep) + 1
        check_length(count, is_list=True)
        spend(items_cost(count))
        parts = list(s) if sep == "" else s.split(sep)
    limit = _arg(args, 1)
    return parts if limit is UNDEFINED else parts[: max(_int(limit, 0), 0)]


def _pad(s: str, args: list, at_start: bool) -> str:
    target = _int(_arg(args, 0), 0)
    fill = " " if _arg(args, 1) is UNDEFINED else _str_arg(args, 1)
    if target <= len(s) or not fill:
        return s
    check_length(target)
    spend(text_cost(target))
    needed = target - len(s)
    padding = (fill * (needed // len(fill) + 1))[:needed]
    return padding + s if at_start else s + padding


def _repeat(s: str, args: list) -> str:
    n = to_number(_arg(args, 0))
    if n != n:
        n = 0
    if n < 0 or n == _INF:
        raise ExpressionError("Invalid count value for repeat()")
    check_length(len(s) * int(n))
    spend(text_cost(len(s) * int(n)))
    return s * int(n)


def _substring(s: str, args: list) -> str:
    start = min(max(_int(_arg(args, 0), 0), 0), len(s))
    end = min(max(_int(_arg(args, 1), len(s)), 0), len(s))
    return s[min(start, end) : max(start, end)]


def _at(seq: str | list, args: list) -> Any:
    i = _int(_arg(args, 0), 0)
    i = i + len(seq) if i < 0 else i
    return seq[i] if 0 <= i < len(seq) else UNDEFINED


def _concat(s: str, args: list) -> str:
    parts = [s, *map(to_string, args)]
    check_length(sum(map(len, parts)))
    spend(text_cost(sum(map(len, parts))))
    return "".join(parts)


def _array_concat(items: list, args: list) -> list:
    out = list(items)
    for extra in args:
        more = extra if isinstance(extra, list) else [stored(extra)]
        check_length(len(out) + len(more), is_list=True)
        spend(items_cost(len(out) + len(more)))
        out.extend(more)
    return out


def _to_fixed(x: int | float, args: list) -> str:
    digits = _int(_arg(args, 0), 0)
    if not 0 <= digits <= 100:
        raise ExpressionError("toFixed() digits argument must be between 0 and 100")
    if x != x or abs(x) >= 1e21:
        return number_to_string(x)
    with localcontext(prec=200):  # exact binary value, rounded half up like JS
        rounded = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return format(rounded, "f")


def _number_to_string(x: int | float, args: list) -> str:
    radix = _int(_arg(args, 0), 10)
    if radix == 10:
        return number_to_string(x)
    if not 2 <= radix <= 36:
        raise ExpressionError("toString() radix must be between 2 and 36")
    if not isinstance(x, int):
        raise ExpressionError("toString(radix) is supported for whole numbers only")
    digits, n, out = "0123456789abcdefghijklmnopqrstuvwxyz", abs(x), ""
    while True:
        n, rest = divmod(n, radix)
        out = digits[rest] + out
        if n == 0:
            return ("-" if x < 0 else "") + out


def _parse_int(args: list) -> int | float:
    s = _str_arg(args, 0).lstrip()
    sign = -1 if s[:1] == "-" else 1
    s = s[1:] if s[:1] in "+-" else s
    radix = _int(_arg(args, 1), 0)
    if radix in (0, 16) and s[:2] in ("0x", "0X"):
        s, radix = s[2:], 16
    radix = radix or 10
    if not 2 <= radix <= 36:
        return _NAN
    digits = _digits_of(radix).match(s)  # a `*` pattern: matches, if only the empty string
    end = digits.end() if digits else 0
    if end == 0:
        return _NAN
    if end <= 20:
        return normalize(sign * int(s[:end], radix))
    try:  # a very long number: leading digits times a power, never a huge int
        return normalize(sign * int(s[:20], radix) * float(radix) ** (end - 20))
    except OverflowError:
        return sign * _INF


@lru_cache(maxsize=36)
def _digits_of(radix: int) -> re.Pattern[str]:
    """A run of ASCII digits in `radix`: matched in C and without backtracking, so parseInt of a
    megabyte of digits is fast (a per-character Python loop also let "\u212a" pass as "k")."""
    digits = "0123456789"[:radix] + "".join(
        chr(ord("a") + i) + chr(ord("A") + i) for i in range(max(radix - 10, 0))
    )
    return re.compile(f"[{digits}]*+")


def _last_index_of(s: str, args: list) -> int:
    """str.rfind is quadratic in the worst case ("ab" + "a" * n in "a" * 2n took seconds); a
    forward find on the reversed text is linear and gives the same index."""
    pattern = _str_arg(args, 0)
    found = s[::-1].find(pattern[::-1])
    return found if found < 0 else len(s) - found - len(pattern)


def _parse_float(args: list) -> int | float:
    match = NUMERIC_TEXT.match(_str_arg(args, 0).lstrip())
    return normalize(float(match.group())) if match else _NAN


def _json_parse(args: list) -> Any:
    return expression_json.parse(_str_arg(args, 0))


def _rounding(fn: Callable[[float], int]) -> Callable[[list], int | float]:
    def call(args: list) -> int | float:
        x = to_number(_arg(args, 0))
        return x if x != x or x in (_INF, -_INF) else normalize(fn(x))

    return call


def _min_max(pick: Callable, empty: float) -> Callable[[list], int | float]:
    def call(args: list) -> int | float:
        numbers = [to_number(a) for a in args]
        if any(n != n for n in numbers):
            return _NAN
        return pick(numbers, default=empty)

    return call


def _entries(obj: Any, which: str) -> list:
    if is_nullish(obj):
        raise ExpressionError(f"Cannot convert {to_string(obj)} to object")
    size = len(obj) if isinstance(obj, dict | list | str) else 0
    check_length(size, is_list=True)
    # entries: a new array per entry, charged as a size walk charges each array it enters
    spend(size if which == "entries" else items_cost(size))
    if isinstance(obj, dict):
        pairs = list(obj.items())
    elif isinstance(obj, list | str):
        pairs = [(str(i), v) for i, v in enumerate(obj)]
    else:
        pairs = []
    if which == "keys":
        return [k for k, _ in pairs]
    return [v for _, v in pairs] if which == "values" else [[k, v] for k, v in pairs]


def _is_empty(v: Any) -> bool:
    return is_nullish(v) or (isinstance(v, str | list | dict) and len(v) == 0)


def _same_value_zero(a: Any, b: Any) -> bool:
    return strict_equal(a, b) or (type_of(a) == type_of(b) == "number" and a != a and b != b)


def _index_of(items: list, args: list) -> int:
    target = _arg(args, 0)
    return next((i for i, v in enumerate(items) if strict_equal(v, target)), -1)


def _namespace(fn: Callable[[list], Any]) -> Callable[[Any, list], Any]:
    return lambda _obj, args: fn(args)


def _object_function(which: str) -> Callable[[Any, list], Any]:
    """Object.keys / values / entries."""
    return _namespace(lambda args: _entries(_arg(args, 0), which))


def _sqrt(args: list) -> int | float:
    x = to_number(_arg(args, 0))
    return _NAN if x < 0 else normalize(math.sqrt(x))


def _sign(args: list) -> int | float:
    x = to_number(_arg(args, 0))
    return x if x != x else (x > 0) - (x < 0)


_MATH: dict[str, Callable[[list], Any]] = {
    "round": _rounding(lambda x: math.floor(x) + (x - math.floor(x) >= 0.5)),
    "floor": _rounding(math.floor),
    "ceil": _rounding(math.ceil),
    "trunc": _rounding(math.trunc),
    "abs": lambda a: normalize(abs(to_number(_arg(a, 0)))),
    "sqrt": _sqrt,
    "sign": _sign,
    "pow": lambda a: power(to_number(_arg(a, 0)), to_number(_arg(a, 1))),
    "min": _min_max(min, _INF),
    "max": _min_max(max, -_INF),
}
_STRING_METHODS: dict[str, Callable[[str, list], Any]] = {
    "toUpperCase": lambda s, a: s.upper(),
    "toLowerCase": lambda s, a: s.lower(),
    "trim": lambda s, a: s.strip(),
    "trimStart": lambda s, a: s.lstrip(),
    "trimEnd": lambda s, a: s.rstrip(),
    "includes": lambda s, a: s.find(_str_arg(a, 0), max(_int(_arg(a, 1), 0), 0)) >= 0,
    "startsWith": lambda s, a: s.startswith(_str_arg(a, 0), max(_int(_arg(a, 1), 0), 0)),
    "endsWith": lambda s, a: s[: max(_int(_arg(a, 1), len(s)), 0)].endswith(_str_arg(a, 0)),
    "indexOf": lambda s, a: s.find(_str_arg(a, 0), min(max(_int(_arg(a, 1), 0), 0), len(s))),
    "lastIndexOf": _last_index_of,
    "split": _split,
    "replace": lambda s, a: _replace(s, a, 1),
    "replaceAll": lambda s, a: _replace(s, a, -1),
    "slice": lambda s, a: s[_int(_arg(a, 0), 0) : _int(_arg(a, 1), len(s))],
    "substring": _substring,
    "padStart": lambda s, a: _pad(s, a, True),
    "padEnd": lambda s, a: _pad(s, a, False),
    "repeat": _repeat,
    "charAt": lambda s, a: s[i] if 0 <= (i := _int(_arg(a, 0), 0)) < len(s) else "",
    "charCodeAt": lambda s, a: ord(s[i]) if 0 <= (i := _int(_arg(a, 0), 0)) < len(s) else _NAN,
    "at": _at,
    "concat": _concat,
    "toString": lambda s, a: s,
    "isEmpty": lambda s, a: len(s) == 0,
}
_ARRAY_METHODS: dict[str, Callable[[list, list], Any]] = {
    "join": lambda x, a: join_list(x, "," if _arg(a, 0) is UNDEFINED else _str_arg(a, 0)),
    "includes": lambda x, a: any(_same_value_zero(v, _arg(a, 0)) for v in x),
    "indexOf": _index_of,
    "slice": lambda x, a: x[_int(_arg(a, 0), 0) : _int(_arg(a, 1), len(x))],
    "concat": _array_concat,
    "first": lambda x, a: x[0] if x else UNDEFINED,
    "last": lambda x, a: x[-1] if x else UNDEFINED,
    "reverse": lambda x, a: x[::-1],  # a copy: expressions never change data in place
    "at": _at,
    "toString": lambda x, a: join_list(x, ","),
    "isEmpty": lambda x, a: len(x) == 0,
}
_METHODS: dict[str, dict[str, Callable[[Any, list], Any]]] = {
    "string": _STRING_METHODS,
    "array": _ARRAY_METHODS,
    "number": {"toFixed": _to_fixed, "toString": _number_to_string},
    "boolean": {"toString": lambda b, a: to_string(b)},
    "object": {
        "hasOwnProperty": lambda d, a: _str_arg(a, 0) in d,
        "keys": lambda d, a: list(d),
        "values": lambda d, a: list(d.values()),
        "isEmpty": lambda d, a: len(d) == 0,
    },
    "node": {
        "first": lambda n, a: n.items[0] if n.items else UNDEFINED,
        "last": lambda n, a: n.items[-1] if n.items else UNDEFINED,
        "all": lambda n, a: list(n.items),
        "itemMatching": lambda n, a: NodeRef(n.name, n.items, _int(_arg(a, 0), 0)).item(),
    },
    "Math": {name: _namespace(fn) for name, fn in _MATH.items()},
    "JSON": {
        "stringify": _namespace(lambda a: json_stringify(_arg(a, 0), _arg(a, 2))),
        "parse": _namespace(_json_parse),
    },
    "Object": {name: _object_function(name) for name in ("keys", "values", "entries")},
}

FUNCTIONS: dict[str, Callable[[list], Any]] = {
    "String": lambda a: to_string(a[0]) if a else "",
    "Number": lambda a: to_number(a[0]) if a else 0,
    "Boolean": lambda a: truthy(_arg(a, 0)),
    "parseInt": _parse_int,
    "parseFloat": _parse_float,
    "isNaN": lambda a: (x := to_number(_arg(a, 0))) != x,
    "$ifEmpty": lambda a: _arg(a, 1) if _is_empty(_arg(a, 0)) else _arg(a, 0),
    "$if": lambda a: _arg(a, 1) if truthy(_arg(a, 0)) else _arg(a, 2),
}
