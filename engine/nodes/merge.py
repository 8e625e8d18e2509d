"""Merge (`n8n-nodes-base.merge`, 3.x): combines the items of its inputs once they came (the
executor holds a node with several inputs: engine/schedule.py). Modes as n8n's: append (the
inputs one after the other), combine by matching fields, by position or all combinations
(engine/item_matching.py merges the JSON with n8n's clash handling), and choose branch (the
items of one input, or one empty item, once every input has items). The SQL mode is not here.
"""

from __future__ import annotations

from typing import Any

from engine.description import FieldGroup, Input, NodeDescription, Option, Property
from engine.errors import NodeExecutionError, WorkflowValidationError
from engine.item_matching import (
    Matches,
    find_matches,
    merge_matched,
    merger,
    paired,
    suffixed,
)
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node

_COMBINE = {"mode": ("combine",)}
_BY_FIELDS = {"mode": ("combine",), "combineBy": ("combineByFields",)}
_BY_POSITION = {"mode": ("combine",), "combineBy": ("combineByPosition",)}
_CHOOSE = {"mode": ("chooseBranch",)}


def _clash(shown: dict | None = None, default_clash: str = "") -> Property:
    values = (
        Property(
            "resolveClash",
            "When Field Values Clash",
            "options",
            default_clash,
            options=(
                Option("addSuffix", "Always Add Input Number to Field Names"),
                Option("preferInput1", "Prefer Input 1 Version"),
                Option("preferLast", "Prefer Input 2 Version"),
            ),
            type_options={"loadOptionsMethod": "getResolveClashOptions"},
        ),
        Property(
            "mergeMode",
            "Merging Nested Fields",
            "options",
            "deepMerge",
            options=(Option("deepMerge", "Deep Merge"), Option("shallowMerge", "Shallow Merge")),
        ),
        Property("overrideEmpty", "Minimize Empty Fields", "boolean", False),
    )
    return Property(
        "clashHandling",
        "Clash Handling",
        "fixedCollection",
        {
            "values": {
                "resolveClash": "preferLast",
                "mergeMode": "deepMerge",
                "overrideEmpty": False,
            }
        },
        groups=(FieldGroup("values", "Values", values),),
        display_options=shown,
    )


def _number_inputs(shown: dict) -> Property:
    """n8n declares it once per mode that has it (append, by position, choose branch, SQL)."""
    return Property(
        "numberInputs",
        "Number of Inputs",
        "options",
        2,
        options=tuple(Option(n, str(n)) for n in range(2, 11)),
        description="The number of data inputs you want to merge",
        display_options={"show": shown},
    )


_MATCH_OPTIONS = (
    _clash({"hide": {"/joinMode": ("keepMatches", "keepNonMatches")}}),
    Property("disableDotNotation", "Disable Dot Notation", "boolean", False),
    Property("fuzzyCompare", "Fuzzy Compare", "boolean", False),
    Property(
        "multipleMatches",
        "Multiple Matches",
        "options",
        "all",
        options=(Option("all", "Include All Matches"), Option("first", "Include First Match Only")),
    ),
)

_PROPERTIES = (
    Property(
        "mode",
        "Mode",
        "options",
        "append",
        options=(
            Option("append", "Append", "Output items of each input, one after the other"),
            Option("combine", "Combine", "Merge matching items together"),
            Option("combineBySql", "SQL Query", "Write a query to do the merge"),
            Option("chooseBranch", "Choose Branch", "Output data from a specific branch"),
        ),
    ),
    Property(
        "combineBy",
        "Combine By",
        "options",
        "combineByFields",
        options=(
            Option("combineByFields", "Matching Fields"),
            Option("combineByPosition", "Position"),
            Option("combineAll", "All Possible Combinations"),
        ),
        display_options={"show": _COMBINE},
    ),
    _number_inputs({"mode": ("append", "chooseBranch", "combineBySql")}),
    _number_inputs(_BY_POSITION),
    Property(
        "advanced",
        "Fields To Match Have Different Names",
        "boolean",
        False,
        display_options={"show": _BY_FIELDS},
    ),
    Property(
        "fieldsToMatchString",
        "Fields to Match",
        "string",
        "",
        placeholder="e.g. id, name",
        display_options={"show": {**_BY_FIELDS, "advanced": (False,)}},
    ),
    Property(
        "mergeByFields",
        "Fields to Match",
        "fixedCollection",
        {"values": [{"field1": "", "field2": ""}]},
        type_options={"multipleValues": True},
        display_options={"show": {**_BY_FIELDS, "advanced": (True,)}},
        groups=(
            FieldGroup(
                "values",
                "Values",
                (
                    Property("field1", "Input 1 Field", "string", ""),
                    Property("field2", "Input 2 Field", "string", ""),
                ),
            ),
        ),
    ),
    Property(
        "joinMode",
        "Output Type",
        "options",
        "keepMatches",
        options=(
            Option("keepMatches", "Keep Matches"),
            Option("keepNonMatches", "Keep Non-Matches"),
            Option("keepEverything", "Keep Everything"),
            Option("enrichInput1", "Enrich Input 1"),
            Option("enrichInput2", "Enrich Input 2"),
        ),
        display_options={"show": _BY_FIELDS},
    ),
    Property(
        "outputDataFrom",
        "Output Data From",
        "options",
        "both",
        options=(
            Option("both", "Both Inputs"),
            Option("input1", "Input 1"),
            Option("input2", "Input 2"),
        ),
        display_options={"show": {**_BY_FIELDS, "joinMode": ("keepMatches", "keepNonMatches")}},
    ),
    Property(
        "chooseBranchMode",
        "Output Type",
        "options",
        "waitForAll",
        options=(Option("waitForAll", "Wait for All Inputs to Arrive"),),
        display_options={"show": _CHOOSE},
    ),
    Property(
        "output",
        "Output",
        "options",
        "specifiedInput",
        options=(
            Option("specifiedInput", "Data of Specified Input"),
            Option("empty", "A Single, Empty Item"),
        ),
        display_options={"show": _CHOOSE},
    ),
    Property(
        "useDataOfInput",
        "Use Data of Input",
        "options",
        1,
        options=tuple(Option(n, str(n)) for n in range(1, 11)),
        type_options={"loadOptionsMethod": "getInputs"},
        display_options={"show": {**_CHOOSE, "output": ("specifiedInput",)}},
    ),
    Property(
        "options",
        "Options",
        "collection",
        {},
        placeholder="Add option",
        display_options={"show": _COMBINE},
        children=(
            *_MATCH_OPTIONS,
            Property("includeUnpaired", "Include Any Unpaired Items", "boolean", False),
        ),
    ),
)


@register
class Merge(NodeType):
    type = "n8n-nodes-base.merge"
    description = NodeDescription(
        display_name="Merge",
        group="core",
        description="Merges data of multiple streams once data from both is available",
        version=3.2,
        versions=(3, 3.1, 3.2),
        inputs=(Input("main"), Input("main")),  # n8n's: as many as numberInputs (main_input_count)
        input_names=("Input 1", "Input 2"),
        subtitle="merge join combine append branches",
        properties=_PROPERTIES,
    )

    def main_input_count(self, node: Node) -> int:
        count = node.parameters.get("numberInputs", 2)
        return count if isinstance(count, int) and count > 1 else 2

    def required_inputs(self, node: Node) -> int | list[int] | None:
        # n8n: '={{ $parameter["mode"] === "chooseBranch" ? [0, 1] : 1 }}'
        return [0, 1] if node.parameters.get("mode") == "chooseBranch" else 1

    def validate(self, node: Node) -> None:
        mode = node.parameters.get("mode", "append")
        if mode == "combineBySql":
            raise WorkflowValidationError(
                "the Merge node's SQL Query mode is not supported", node=node.name
            )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        inputs = [ctx.input_data(i) for i in range(self.main_input_count(ctx.node))]
        mode = ctx.get_parameter("mode", "append", 0)
        if mode == "combine":
            mode = ctx.get_parameter("combineBy", "combineByFields", 0)
        if mode == "append":
            return [[item for items in inputs for item in items]]
        if mode == "chooseBranch":
            return _choose_branch(ctx, inputs)
        if mode == "combineByPosition":
            return _by_position(ctx, inputs)
        if mode == "combineAll":
            return _all_combinations(ctx, inputs)
        if mode == "combineByFields":
            return _by_fields(ctx, inputs[0], inputs[1])
        raise NodeExecutionError(f'the mode "{mode}" is not supported', node=ctx.node.name)


def _clash_options(ctx: ExecuteFunctions) -> dict:
    given = ctx.node.parameters.get("options", {}).get("clashHandling", {}).get("values")
    return dict(ctx.get_parameter("options.clashHandling.values", {}, 0) or {}) if given else {}


def _choose_branch(ctx: ExecuteFunctions, inputs: list[list[Item]]) -> NodeOutput:
    if ctx.get_parameter("output", "specifiedInput", 0) == "empty":
        pairs = [p for i in (0, 1) for item in inputs[i] for p in paired(item)]
        return [[{"json": {}, "pairedItem": pairs}]]
    chosen = int(ctx.get_parameter("useDataOfInput", 1, 0))
    if chosen > len(inputs):
        raise NodeExecutionError(f"Input {chosen} doesn't exist", node=ctx.node.name)
    return [list(inputs[chosen - 1])]


def _by_position(ctx: ExecuteFunctions, inputs: list[list[Item]]) -> NodeOutput:
    clash = _clash_options(ctx)
    unpaired = bool(ctx.get_parameter("options.includeUnpaired", False, 0))
    resolve = str(clash.get("resolveClash") or "")
    preferred_index = int(resolve[len("preferInput") :]) - 1 if "preferInput" in resolve else -1
    preferred = inputs[preferred_index]
    if resolve == "addSuffix":
        inputs = [suffixed(items, str(n + 1)) for n, items in enumerate(inputs)]
    sizes = [len(items) for items in inputs] + [len(preferred)]
    count = max(sizes) if unpaired else min(sizes)
    combine = merger(clash)
    out = []
    for position in range(count):
        first = preferred[position] if position < len(preferred) else {}
        rest = [items[position] if position < len(items) else {} for items in inputs]
        out.append(
            {
                "json": combine(*(entry.get("json", {}) for entry in rest), first.get("json", {})),
                "pairedItem": [p for entry in [*rest, first] for p in paired(entry)],
            }
        )
    return [out]


def _all_combinations(ctx: ExecuteFunctions, inputs: list[list[Item]]) -> NodeOutput:
    clash = _clash_options(ctx)
    first, second = inputs[0], inputs[1]
    if clash.get("resolveClash") == "preferInput1":
        first, second = second, first
    if clash.get("resolveClash") == "addSuffix":
        first, second = suffixed(first, "1"), suffixed(second, "2")
    combine = merger(clash)
    return [
        [
            {
                "json": combine(a.get("json", {}), b.get("json", {})),
                "pairedItem": [a.get("pairedItem"), b.get("pairedItem")],
            }
            for a in first
            for b in second
        ]
    ]


def _match_fields(ctx: ExecuteFunctions) -> list[dict]:
    if ctx.get_parameter("advanced", False, 0):
        fields = ctx.get_parameter("mergeByFields.values", [], 0) or []
    else:
        text = str(ctx.get_parameter("fieldsToMatchString", "", 0) or "")
        fields = [{"field1": f.strip(), "field2": f.strip()} for f in text.split(",")]
    if len(fields) == 1 and fields[0].get("field1") == "" and fields[0].get("field2") == "":
        raise NodeExecutionError(
            'You need to define at least one pair of fields in "Fields to Match" to match on',
            node=ctx.node.name,
        )
    for index, pair in enumerate(fields):
        if pair.get("field1", "") == "" or pair.get("field2", "") == "":
            raise NodeExecutionError(
                f'You need to define both fields in "Fields to Match" for pair {index + 1}',
                node=ctx.node.name,
            )
    return fields


def _by_fields(ctx: ExecuteFunctions, input1: list[Item], input2: list[Item]) -> NodeOutput:
    fields = _match_fields(ctx)
    join = ctx.get_parameter("joinMode", "keepMatches", 0)
    source = ctx.get_parameter("outputDataFrom", "both", 0)
    if not input1 or not input2:
        return _one_side_empty(join, source, input1, input2)
    options: dict[str, Any] = {**(ctx.get_parameter("options", {}, 0) or {})}
    options.update(joinMode=join, outputDataFrom=source)
    matches = find_matches(input1, input2, fields, options)
    if join == "keepNonMatches":
        return [_non_matches(matches, source)]
    clash = _clash_options(ctx)
    if join in ("enrichInput1", "enrichInput2"):
        side, suffix = (
            (matches.unmatched1, "1") if join == "enrichInput1" else (matches.unmatched2, "2")
        )
        rest = suffixed(side, suffix) if clash.get("resolveClash") == "addSuffix" else side
        return [merge_matched(matches.matched, clash, join) + rest]
    if source == "input1":
        out = [entry for entry, _ in matches.matched]
    elif source == "input2":
        out = list(matches.matched2)
    else:
        out = merge_matched(matches.matched, clash)
    if join == "keepEverything":
        first, second = matches.unmatched1, matches.unmatched2
        if clash.get("resolveClash") == "addSuffix":
            first, second = suffixed(first, "1"), suffixed(second, "2")
        out = out + first + second
    return [out]


def _one_side_empty(join: str, source: str, input1: list[Item], input2: list[Item]) -> NodeOutput:
    if join == "keepNonMatches" and (
        (not input1 and source == "input1") or (not input2 and source == "input2")
    ):
        return [[]]
    if (
        join == "keepMatches"
        or (join == "enrichInput1" and not input1)
        or (join == "enrichInput2" and not input2)
    ):
        return []  # n8n stops the branch: the node has no output at all
    return [input1 + input2]


def _non_matches(matches: Matches, source: str) -> list[Item]:
    if source == "input1":
        return matches.unmatched1
    if source == "input2":
        return matches.unmatched2
    tagged = [(matches.unmatched1, "input1"), (matches.unmatched2, "input2")]
    return [
        {**item, "json": {**item.get("json", {}), "_source": name}}
        for items, name in tagged
        for item in items
    ]
