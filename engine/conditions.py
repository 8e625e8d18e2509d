"""Conditions: n8n's filter parameter, the conditions of the IF, Filter and Switch nodes
(n8n-workflow's executeFilter).

A filter value, as n8n exports it:

    {"conditions": [{"id": "…", "leftValue": "={{ $json.age }}", "rightValue": 18,
                     "operator": {"type": "number", "operation": "gte"}}],
     "combinator": "and",
     "options": {"caseSensitive": true, "typeValidation": "strict", "version": 2}}

Each side is parsed to the operator's type first (`rightType` for the right side where the
operator has one): with `typeValidation` "strict" a value of another type is an error naming the
condition and the item, with "loose" it is converted where it can be ("3" → 3, "true" → true).
`version` follows the node's typeVersion: 2 reads "true"/"1" as booleans in loose mode, 3 reads
an empty text or array as no number. Then the operation compares, as JavaScript would. Regex
operations run with a time limit (n8n's safe regex: 250 ms) and JavaScript's flags.

Values come resolved by the expression engine, with `undefined` (a missing field) kept apart
from `null`, as the comparisons differ for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from engine import expression_values as js
from engine.dates import parse_datetime
from engine.errors import NodeExecutionError
from engine.expression_values import UNDEFINED

REGEX_TIMEOUT_SECONDS = 0.25  # n8n's safe regex gives up after 250 ms as well
_INVALID = object()  # a value that cannot be read as the operator's type


class ConditionError(NodeExecutionError):
    """A condition's value has the wrong type, or its regex is not one (n8n's FilterError)."""


@dataclass(frozen=True)
class FilterOptions:
    case_sensitive: bool = True
    strict: bool = True
    version: float = 1

    @classmethod
    def of(cls, options: Any) -> FilterOptions:
        """n8n's defaults where the export leaves an option out (NodeHelpers, FilterConditions)."""
        options = options if isinstance(options, dict) else {}
        return cls(
            case_sensitive=options.get("caseSensitive", True) is not False,
            strict=options.get("typeValidation", "strict") == "strict",
            version=options.get("version") or 1,
        )


def filter_passes(value: Any, item_index: int) -> bool:
    """Whether an item passes a resolved filter value (its combinator over its conditions)."""
    if not isinstance(value, dict):
        return False
    options = FilterOptions.of(value.get("options"))
    conditions = value.get("conditions") or []
    combinator = value.get("combinator", "and")

    def passes(index: int) -> bool:
        return condition_passes(conditions[index], options, index, item_index)

    if combinator == "and":
        return all(passes(index) for index in range(len(conditions)))
    if combinator == "or":
        return any(passes(index) for index in range(len(conditions)))
    return False


def condition_passes(condition: dict, options: FilterOptions, index: int, item_index: int) -> bool:
    operator = condition.get("operator") or {}
    kind = operator.get("type", "string")
    operation = operator.get("operation", "equals")
    left, right = _parsed_sides(
        condition, operator, options, f"[condition {index}, item {item_index}]"
    )
    exists = not js.is_nullish(left) and not _is_nan(left)
    if operation == "exists":
        return exists
    if operation == "notExists":
        return not exists
    compare = _COMPARISONS.get(kind)
    if compare is None:
        return False
    return compare(operation, left, right, exists, options)


# --- parsing each side to the operator's type ---------------------------------------------------


def _parsed_sides(condition: dict, operator: dict, options: FilterOptions, where: str):
    kind = operator.get("type", "string")
    right_kind = operator.get("rightType") or kind
    raw_left = condition.get("leftValue", UNDEFINED)
    raw_right = condition.get("rightValue", UNDEFINED)
    left = parse_value(raw_left, kind, options)
    right = parse_value(raw_right, right_kind, options)
    left_ok = left is not _INVALID
    right_ok = right is not _INVALID or bool(operator.get("singleValue"))
    if not left_ok and not right_ok and js.type_of(raw_left) == js.type_of(raw_right):
        raise ConditionError(
            f"Comparison type expects {_article(kind)} but both fields are "
            f"{_article(js.type_of(raw_left))}"
        )
    if not left_ok:
        raise ConditionError(_wrong_type(kind, raw_left, options, where))
    if not right_ok:
        raise ConditionError(_wrong_type(right_kind, raw_right, options, where))
    return left, (UNDEFINED if right is _INVALID else right)


def parse_value(value: Any, kind: str, options: FilterOptions) -> Any:
    """`value` read as `kind` (n8n's parseSingleFilterValue), or _INVALID."""
    if kind == "any" or js.is_nullish(value):
        return value
    if kind == "boolean" and not options.strict:
        if options.version >= 2:
            parsed = _boolean(value)
            if parsed is not _INVALID:
                return parsed
        return js.truthy(value)
    if kind == "number":
        if _is_nan(value):
            return value
        empty = (isinstance(value, str) and not value.strip()) or value == []
        if empty and options.version >= 3:
            return None
    reader = _READERS.get(kind.lower())
    return reader(value, options.strict) if reader else value


def _string(value: Any, strict: bool) -> Any:
    if strict and not isinstance(value, str):
        return _INVALID
    if isinstance(value, dict | list):
        return js.json_stringify(value)
    return js.to_string(value)


def _number(value: Any, strict: bool) -> Any:
    if strict and (isinstance(value, bool) or not isinstance(value, int | float)):
        return _INVALID
    number = js.to_number(value)
    return _INVALID if _is_nan(number) else number


def _boolean(value: Any, strict: bool = False) -> Any:
    if isinstance(value, bool):
        return value
    if strict:
        return _INVALID
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not (isinstance(value, str) and not value.strip()):
        number = js.to_number(value)
        if number in (0, 1):
            return number == 1
    return _INVALID


def _datetime(value: Any, strict: bool) -> Any:
    parsed = parse_datetime(value)
    return _INVALID if parsed is None else parsed


def _array(value: Any, strict: bool) -> Any:
    if isinstance(value, list):
        return value
    if strict:
        return _INVALID
    parsed = _json(js.to_string(value) if not isinstance(value, dict) else "[object Object]")
    return parsed if isinstance(parsed, list) else _INVALID


def _object(value: Any, strict: bool) -> Any:
    if isinstance(value, dict):
        return value
    if strict and not isinstance(value, list):  # lodash isObject: arrays are objects
        return _INVALID
    parsed = _json(js.to_string(value))
    return parsed if isinstance(parsed, dict) else _INVALID


def _json(text: str) -> Any:
    """JSON.parse, then with single quotes read as double (n8n's tryToParseArray)."""
    import json

    for attempt in (text, text.replace("'", '"')):
        try:
            return json.loads(attempt)
        except ValueError:
            continue
    return _INVALID


_READERS: dict[str, Callable[[Any, bool], Any]] = {
    "string": _string,
    "number": _number,
    "boolean": _boolean,
    "datetime": _datetime,
    "array": _array,
    "object": _object,
}


def _article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _wrong_type(kind: str, value: Any, options: FilterOptions, where: str) -> str:
    given = js.type_of(value)
    text = js.to_string(value) if not isinstance(value, dict | list) else js.to_string(value)
    if options.strict:
        return (
            f"Wrong type: '{text}' is {_article(given)} but was expecting {_article(kind)} {where}"
        )
    return f"Conversion error: the {given} '{text}' can't be converted to {_article(kind)} {where}"


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# --- the operations, per type --------------------------------------------------------------------


def _compare_string(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    left = "" if js.is_nullish(left) else left
    right = "" if js.is_nullish(right) else right
    if not options.case_sensitive:
        left = left.lower() if isinstance(left, str) else left
        if isinstance(right, str) and operation not in ("regex", "notRegex"):
            right = right.lower()
    left, right = js.to_string(left), js.to_string(right)
    tests: dict[str, Callable[[], bool]] = {
        "empty": lambda: len(left) == 0,
        "notEmpty": lambda: len(left) != 0,
        "equals": lambda: left == right,
        "notEquals": lambda: left != right,
        "contains": lambda: right in left,
        "notContains": lambda: right not in left,
        "startsWith": lambda: left.startswith(right),
        "notStartsWith": lambda: not left.startswith(right),
        "endsWith": lambda: left.endswith(right),
        "notEndsWith": lambda: not left.endswith(right),
        "regex": lambda: regex_test(right, left),
        "notRegex": lambda: not regex_test(right, left),
    }
    test = tests.get(operation)
    return test() if test else False


def _compare_number(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    if operation == "empty":
        return not exists
    if operation == "notEmpty":
        return exists
    if operation in ("equals", "notEquals"):
        same = js.strict_equal(left, right)
        return same if operation == "equals" else not same
    return _relation(operation, _js_number(left), _js_number(right))


def _js_number(value: Any) -> float:
    """What a relational operator compares: null is 0, undefined is NaN."""
    if value is UNDEFINED:
        return math.nan
    return js.to_number(value)


def _relation(operation: str, left: float, right: float) -> bool:
    if _is_nan(left) or _is_nan(right):
        return False
    relations = {
        "gt": left > right,
        "lt": left < right,
        "gte": left >= right,
        "lte": left <= right,
        "after": left > right,
        "before": left < right,
        "afterOrEquals": left >= right,
        "beforeOrEquals": left <= right,
    }
    return relations.get(operation, False)


def _compare_datetime(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    if operation == "empty":
        return not exists
    if operation == "notEmpty":
        return exists
    if js.is_nullish(left) or js.is_nullish(right):
        return False
    left_ms, right_ms = left.timestamp(), right.timestamp()
    if operation == "equals":
        return left_ms == right_ms
    if operation == "notEquals":
        return left_ms != right_ms
    return _relation(operation, left_ms, right_ms)


def _compare_boolean(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    if operation == "empty":
        return not exists
    if operation == "notEmpty":
        return exists
    if operation == "true":
        return js.truthy(left)
    if operation == "false":
        return not js.truthy(left)
    if operation in ("equals", "notEquals"):
        same = js.strict_equal(left, right)
        return same if operation == "equals" else not same
    return False


def _compare_array(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    items = [] if js.is_nullish(left) else left
    if operation in ("contains", "notContains"):
        found = _array_contains(items, right, not options.case_sensitive)
        return found if operation == "contains" else not found
    if operation == "empty":
        return len(items) == 0
    if operation == "notEmpty":
        return len(items) != 0
    lengths = {
        "lengthEquals": "equals",
        "lengthNotEquals": "notEquals",
        "lengthGt": "gt",
        "lengthLt": "lt",
        "lengthGte": "gte",
        "lengthLte": "lte",
    }
    if operation not in lengths:
        return False
    return _compare_number(lengths[operation], len(items), right, True, options)


def _array_contains(items: list, value: Any, ignore_case: bool) -> bool:
    if ignore_case and isinstance(value, str):
        return any(isinstance(i, str) and i.lower() == value.lower() for i in items)
    if _is_nan(value):  # Array.prototype.includes finds NaN
        return any(_is_nan(i) for i in items)
    primitive = ("string", "number", "boolean", "null", "undefined")
    return any(js.tag(i) in primitive and js.strict_equal(i, value) for i in items)


def _compare_object(operation: str, left: Any, right: Any, exists: bool, options) -> bool:
    if operation == "empty":
        return not left or (isinstance(left, dict | list) and len(left) == 0)
    if operation == "notEmpty":
        return bool(left) and not (isinstance(left, dict | list) and len(left) == 0)
    return False


_COMPARISONS: dict[str, Callable[..., bool]] = {
    "string": _compare_string,
    "number": _compare_number,
    "dateTime": _compare_datetime,
    "boolean": _compare_boolean,
    "array": _compare_array,
    "object": _compare_object,
}


# --- regex ---------------------------------------------------------------------------------------

_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}
_LITERAL = regex.compile(r"^/(.*?)/([gimusy]*)$", regex.DOTALL)


def regex_test(pattern: str, text: str) -> bool:
    """RegExp(pattern).test(text), where `pattern` may be a literal with flags (`/a+/i`)."""
    literal = _LITERAL.match(pattern)
    source, flags = (literal.group(1), literal.group(2)) if literal else (pattern, "")
    options = 0
    for flag in flags:
        options |= _FLAGS.get(flag, 0)
    try:
        compiled = regex.compile(source, options)
    except regex.error as err:
        raise ConditionError(f"Invalid regular expression: /{source}/: {err}") from None
    try:
        if "y" in flags:
            return compiled.match(text, timeout=REGEX_TIMEOUT_SECONDS) is not None
        return compiled.search(text, timeout=REGEX_TIMEOUT_SECONDS) is not None
    except TimeoutError:
        raise ConditionError("Regular expression execution timed out") from None
