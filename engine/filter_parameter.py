"""The filter parameter as the IF, Filter and Switch nodes declare and read it: n8n's
`conditions` (type "filter"), the "Convert types where required" switch (`looseTypeValidation`,
a top-level parameter from IF 2.1, Filter 2.1 and Switch 3.1, an option before) and the
`ignoreCase` option. The conditions themselves are evaluated by engine/conditions.py.

As in n8n, what decides a condition's case sensitivity, strictness and version at run time is
the `options` the filter value carries (the editor writes them from the node's settings when the
node is edited); the node's own `ignoreCase` and `looseTypeValidation` only shape the form and
the error's hint.
"""

from __future__ import annotations

from typing import Any

from engine.conditions import ConditionError, filter_passes
from engine.description import Property
from engine.node import ExecuteFunctions

LOOSE_HINT = "Try enabling 'Convert types where required' in the node's settings."


def version_from(version: float) -> dict[str, tuple[Any, ...]]:
    return {"@version": ({"_cnd": {"gte": version}},)}


def version_before(version: float) -> dict[str, tuple[Any, ...]]:
    return {"@version": ({"_cnd": {"lt": version}},)}


def conditions_property(
    loose_since: float,
    filter_versions: tuple[tuple[float, int], ...],
    shown: dict[str, tuple[Any, ...]] | None = None,
) -> Property:
    """The conditions. `filter_versions` (from which node version, which filter version) and
    `loose_since` are n8n's typeOptions.filter: the editor writes the value's `options` from
    them (api/static/editor/filter.js), as n8n's editor does."""
    return Property(
        "conditions",
        "Conditions",
        "filter",
        {},
        placeholder="Add Condition",
        display_options={"show": shown} if shown else None,
        type_options={
            "filter": {"looseSince": loose_since, "versions": [list(v) for v in filter_versions]}
        },
    )


def loose_type_validation(since: float, *, option: bool = False) -> Property:
    """The switch: a top-level parameter from `since`, an option (under `options`) before."""
    shown = version_before(since) if option else version_from(since)
    return Property(
        "looseTypeValidation",
        "Convert types where required",
        "boolean",
        bool(option),
        description=(
            "If the type of an expression doesn't match the type of the comparison, n8n will "
            "try to cast the expression to the required type"
        ),
        display_options={"show": shown},
    )


def ignore_case() -> Property:
    return Property(
        "ignoreCase",
        "Ignore Case",
        "boolean",
        True,
        description="Whether to ignore letter case when evaluating conditions",
    )


def passes(ctx: ExecuteFunctions, path: str, item_index: int, loose_since: float) -> bool:
    """Whether input item `item_index` passes the filter at `path`; a condition that cannot be
    evaluated fails the node, naming the item."""
    try:
        return filter_passes(ctx.get_filter(path, item_index), item_index)
    except ConditionError as err:
        err.node, err.item_index = ctx.node.name, item_index
        if not _loose(ctx, item_index, loose_since) and "Wrong type" in err.message:
            err.message = f"{err.message}. {LOOSE_HINT}"
        raise


def _loose(ctx: ExecuteFunctions, item_index: int, since: float) -> bool:
    if ctx.node.type_version < since:
        return bool(ctx.get_parameter("options.looseTypeValidation", False, item_index))
    return bool(ctx.get_parameter("looseTypeValidation", False, item_index))
