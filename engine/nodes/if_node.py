"""If (`n8n-nodes-base.if`): routes each item to output 0 ("true") or 1 ("false").

2.x reads n8n's filter parameter (engine/conditions.py: string, number, date & time, boolean,
array and object operators, and/or, case sensitivity, loose type validation). 1 reads the old
`conditions` groups (boolean, dateTime, number, string: value1, operation, value2) combined by
`combineOperation` all/any, with JavaScript's comparisons as n8n's IfV1 makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine import expression_values as js
from engine.conditions import regex_test
from engine.dates import parse_datetime
from engine.description import FieldGroup, NodeDescription, Option, Property
from engine.errors import NodeExecutionError
from engine.filter_parameter import (
    conditions_property,
    ignore_case,
    loose_type_validation,
    passes,
    version_before,
    version_from,
)
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register

_V1 = version_before(2)
_V2 = version_from(2)


def _v1_group(name: str, display: str, kind: str, operations: tuple[Option, ...]) -> FieldGroup:
    default = "" if kind in ("string", "dateTime") else (False if kind == "boolean" else 0)
    field_type = "string" if kind == "dateTime" else kind
    return FieldGroup(
        name,
        display,
        (
            Property("value1", "Value 1", field_type, default),  # type: ignore[arg-type]
            Property("operation", "Operation", "options", operations[0].value, options=operations),
            Property("value2", "Value 2", field_type, default),  # type: ignore[arg-type]
        ),
    )


_V1_OPERATIONS = {
    "boolean": ("equal", "notEqual"),
    "dateTime": ("after", "before"),
    "number": (
        [
            "smaller",
            "smallerEqual",
            "equal",
            "notEqual",
            "larger",
            "largerEqual",
            "isEmpty",
            "isNotEmpty",
        ]
    ),
    "string": [
        "contains",
        "notContains",
        "endsWith",
        "notEndsWith",
        "equal",
        "notEqual",
        "regex",
        "notRegex",
        "startsWith",
        "notStartsWith",
        "isEmpty",
        "isNotEmpty",
    ],
}

_V1_CONDITIONS = Property(
    "conditions",
    "Conditions",
    "fixedCollection",
    {},
    placeholder="Add Condition",
    type_options={"multipleValues": True, "sortable": True},
    display_options={"show": _V1},
    groups=tuple(
        _v1_group(kind, label, kind, tuple(Option(op, op) for op in _V1_OPERATIONS[kind]))
        for kind, label in (
            ("boolean", "Boolean"),
            ("dateTime", "Date & Time"),
            ("number", "Number"),
            ("string", "String"),
        )
    ),
)


@register
class If(NodeType):
    type = "n8n-nodes-base.if"
    description = NodeDescription(
        display_name="If",
        group="core",
        description="Route items to different branches (true/false)",
        version=2.3,
        versions=(1, 2, 2.1, 2.2, 2.3),
        outputs=("main", "main"),
        output_names=("true", "false"),
        subtitle="if condition branch true false",
        properties=(
            _V1_CONDITIONS,
            Property(
                "combineOperation",
                "Combine",
                "options",
                "all",
                options=(Option("all", "ALL"), Option("any", "ANY")),
                display_options={"show": _V1},
            ),
            conditions_property(2.1, ((2.3, 3), (2.2, 2)), shown=_V2),
            loose_type_validation(2.1),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add option",
                display_options={"show": _V2},
                children=(ignore_case(), loose_type_validation(2.1, option=True)),
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        true_items: list[Item] = []
        false_items: list[Item] = []
        for index, item in enumerate(ctx.input_items):
            ctx.checkpoint()
            if ctx.node.type_version < 2:
                (true_items if _v1_passes(ctx, index) else false_items).append(item)
                continue
            passed = passes(ctx, "conditions", index, 2.1)
            routed = item if "pairedItem" in item else {**item, "pairedItem": {"item": index}}
            (true_items if passed else false_items).append(routed)
        return [true_items, false_items]


# --- version 1 -----------------------------------------------------------------------------------


def _v1_passes(ctx: ExecuteFunctions, index: int) -> bool:
    combine = ctx.get_parameter("combineOperation", "all", index)
    for kind in ("boolean", "dateTime", "number", "string"):
        for row in ctx.get_parameter(f"conditions.{kind}", [], index) or []:
            value1, value2 = row.get("value1"), row.get("value2")
            if kind == "dateTime":
                value1, value2 = _v1_date(ctx, value1), _v1_date(ctx, value2)
            compare = _V1_COMPARE.get(row.get("operation", ""))
            if compare is None:
                raise NodeExecutionError(f'unknown operation "{row.get("operation")}"')
            result = compare(value1, value2)
            if result and combine == "any":
                return True
            if not result and combine == "all":
                return False
    return combine == "all"


def _v1_date(ctx: ExecuteFunctions, value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        raise NodeExecutionError(
            f'The value "{js.to_string(value)}" is not a valid DateTime.', node=ctx.node.name
        )
    return moment.timestamp() * 1000


def _or(value: Any, fallback: Any) -> Any:
    """JavaScript's `value || fallback`."""
    return value if js.truthy(value) else fallback


def _relation(operation: str, a: Any, b: Any) -> bool:
    """JavaScript's `a > b`, `a >= b`: two texts compare as texts, anything else as numbers
    (NaN compares false)."""
    if not (isinstance(a, str) and isinstance(b, str)):
        a, b = js.to_number(a), js.to_number(b)
        if a != a or b != b:
            return False
    return a > b if operation == ">" else a >= b


def _empty(value: Any) -> bool:
    if js.is_nullish(value) or value == "" or (isinstance(value, float) and value != value):
        return True
    return isinstance(value, dict | list) and len(value) == 0


def _text(value: Any) -> str:
    return js.to_string(value)


_V1_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "after": lambda a, b: _relation(">", _or(a, 0), _or(b, 0)),
    "before": lambda a, b: _relation(">", _or(b, 0), _or(a, 0)),
    "larger": lambda a, b: _relation(">", _or(a, 0), _or(b, 0)),
    "largerEqual": lambda a, b: _relation(">=", _or(a, 0), _or(b, 0)),
    "smaller": lambda a, b: _relation(">", _or(b, 0), _or(a, 0)),
    "smallerEqual": lambda a, b: _relation(">=", _or(b, 0), _or(a, 0)),
    "contains": lambda a, b: _text(_or(a, "")).find(_text(_or(b, ""))) >= 0,
    "notContains": lambda a, b: _text(_or(a, "")).find(_text(_or(b, ""))) < 0,
    "endsWith": lambda a, b: _text(a).endswith(_text(b)),
    "notEndsWith": lambda a, b: not _text(a).endswith(_text(b)),
    "startsWith": lambda a, b: _text(a).startswith(_text(b)),
    "notStartsWith": lambda a, b: not _text(a).startswith(_text(b)),
    "equal": js.strict_equal,
    "notEqual": lambda a, b: not js.strict_equal(a, b),
    "isEmpty": lambda a, b: _empty(a),
    "isNotEmpty": lambda a, b: not _empty(a),
    "regex": lambda a, b: regex_test(_text(_or(b, "")), _text(_or(a, ""))),
    "notRegex": lambda a, b: not regex_test(_text(_or(b, "")), _text(_or(a, ""))),
}
