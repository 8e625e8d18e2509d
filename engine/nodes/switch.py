"""Switch (`n8n-nodes-base.switch`, 3.x): routes each item to the output of the first routing
rule it passes (every one it passes with `allMatchingOutputs`), or in expression mode to the
output an expression gives. Unmatched items are dropped, or go to an extra fallback output or to
a rule's output (`fallbackOutput`). Rules are n8n's filter parameter (engine/conditions.py).
"""

from __future__ import annotations

from typing import Any

from engine import expression_values as js
from engine.description import FieldGroup, NodeDescription, Option, Property
from engine.errors import NodeExecutionError
from engine.filter_parameter import (
    conditions_property,
    ignore_case,
    loose_type_validation,
    passes,
)
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register

_RULES = {"mode": ("rules",)}
_EXPRESSION = {"mode": ("expression",)}
# n8n's default: one rule whose condition compares "" with "" (an export leaves it out)
_DEFAULT_RULES = {
    "values": [
        {
            "conditions": {
                "options": {"caseSensitive": True, "leftValue": "", "typeValidation": "strict"},
                "conditions": [
                    {
                        "leftValue": "",
                        "rightValue": "",
                        "operator": {"type": "string", "operation": "equals"},
                    }
                ],
                "combinator": "and",
            }
        }
    ]
}


@register
class Switch(NodeType):
    type = "n8n-nodes-base.switch"
    description = NodeDescription(
        display_name="Switch",
        group="core",
        description="Route items depending on defined expression or rules",
        version=3.4,
        versions=(3, 3.1, 3.2, 3.3, 3.4),
        dynamic_outputs=True,
        subtitle="switch route rules case router",
        properties=(
            Property(
                "mode",
                "Mode",
                "options",
                "rules",
                options=(
                    Option("rules", "Rules", "Build a matching rule for each output"),
                    Option(
                        "expression", "Expression", "Write an expression to return the output index"
                    ),
                ),
            ),
            Property(
                "numberOutputs",
                "Number of Outputs",
                "number",
                4,
                display_options={"show": _EXPRESSION},
            ),
            Property(
                "output",
                "Output Index",
                "number",
                "={{}}",
                description="The output index to send the input item to, starts at 0",
                display_options={"show": _EXPRESSION},
            ),
            Property(
                "rules",
                "Routing Rules",
                "fixedCollection",
                _DEFAULT_RULES,
                placeholder="Add Routing Rule",
                type_options={"multipleValues": True, "sortable": True},
                display_options={"show": _RULES},
                groups=(
                    FieldGroup(
                        "values",
                        "Routing Rule",
                        (
                            conditions_property(3.1, ((3.4, 3), (3.2, 2))),
                            Property("renameOutput", "Rename Output", "boolean", False),
                            Property(
                                "outputKey",
                                "Output Name",
                                "string",
                                "",
                                display_options={"show": {"renameOutput": (True,)}},
                            ),
                        ),
                    ),
                ),
            ),
            loose_type_validation(3.1),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add option",
                display_options={"show": _RULES},
                children=(
                    Property(
                        "fallbackOutput",
                        "Fallback Output",
                        "options",
                        "none",
                        options=(Option("none", "None (default)"), Option("extra", "Extra Output")),
                        description="If no rule matches the item will be sent to this output",
                        type_options={"loadOptionsMethod": "getFallbackOutputOptions"},
                    ),
                    ignore_case(),
                    loose_type_validation(3.1, option=True),
                    Property(
                        "renameFallbackOutput",
                        "Rename Fallback Output",
                        "string",
                        "",
                        display_options={"show": {"fallbackOutput": ("extra",)}},
                    ),
                    Property(
                        "allMatchingOutputs",
                        "Send data to all matching outputs",
                        "boolean",
                        False,
                    ),
                ),
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        outputs: list[list[Item]] = []
        mode = ctx.get_parameter("mode", "rules", 0)
        for index, item in enumerate(ctx.input_items):
            ctx.checkpoint()
            routed = {**item, "pairedItem": {"item": index}}
            if mode == "expression":
                if index == 0:
                    count = int(js.to_number(ctx.get_parameter("numberOutputs", 4, index)))
                    outputs = [[] for _ in range(max(count, 0))]
                target = _output_index(ctx, index)
                _check_range(ctx, len(outputs), target, index)
                outputs[int(target)].append(routed)
            else:
                outputs = _route_by_rules(ctx, index, routed, outputs)
        return outputs or [[]]


def _route_by_rules(
    ctx: ExecuteFunctions, index: int, item: Item, outputs: list[list[Item]]
) -> list[list[Item]]:
    rules = ctx.get_parameter("rules.values", [], index) or []
    if not rules:
        return outputs
    options = ctx.get_parameter("options", {}, index) or {}
    fallback = options.get("fallbackOutput", "none")
    if index == 0:
        outputs = [[] for _ in range(len(rules) + (fallback == "extra"))]
    matched = False
    for rule_index in range(len(rules)):
        if passes(ctx, f"rules.values.{rule_index}.conditions", index, 3.1):
            matched = True
            outputs[rule_index].append(item)
            if not options.get("allMatchingOutputs"):
                return outputs
    if not matched and fallback not in (None, "none"):
        if fallback == "extra":
            outputs[-1].append(item)
        else:
            _check_range(ctx, len(outputs), fallback, index)
            outputs[int(fallback)].append(item)
    return outputs


def _output_index(ctx: ExecuteFunctions, index: int) -> Any:
    value = ctx.get_parameter("output", None, index)
    number = js.to_number(value) if value is not None else None
    if number is None or number != number:
        raise NodeExecutionError(
            "Invalid input for 'Output Index' [item "
            f"{index}]: 'output' expects a number but we got {js.to_string(value)}",
            node=ctx.node.name,
            item_index=index,
        )
    return number


def _check_range(ctx: ExecuteFunctions, count: int, target: Any, index: int) -> None:
    number = js.to_number(target)
    if number == count:
        message = f"The ouput {js.to_string(target)} is not allowed. "
    elif number < 0 or number > count or number != int(number):
        message = f"The ouput {js.to_string(target)} is not allowed"
    else:
        return
    raise NodeExecutionError(message, node=ctx.node.name, item_index=index)
