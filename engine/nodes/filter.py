"""Filter (`n8n-nodes-base.filter`, 2.x): keeps the items that pass its conditions (n8n's filter
parameter, engine/conditions.py). Like n8n it returns the discarded items as a second output,
which has no connector on the canvas: they are seen in the run data only.
"""

from __future__ import annotations

from engine.description import NodeDescription, Property
from engine.filter_parameter import conditions_property, ignore_case, loose_type_validation, passes
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register


@register
class Filter(NodeType):
    type = "n8n-nodes-base.filter"
    description = NodeDescription(
        display_name="Filter",
        group="core",
        description="Remove items matching a condition",
        version=2.3,
        versions=(2, 2.1, 2.2, 2.3),
        output_names=("Kept", "Discarded"),
        subtitle="filter remove keep condition",
        properties=(
            conditions_property(2.1, ((2.3, 3), (2.2, 2))),
            loose_type_validation(2.1),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add option",
                children=(ignore_case(), loose_type_validation(2.1, option=True)),
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        kept: list[Item] = []
        discarded: list[Item] = []
        for index, item in enumerate(ctx.input_items):
            ctx.checkpoint()
            routed = item if "pairedItem" in item else {**item, "pairedItem": {"item": index}}
            (kept if passes(ctx, "conditions", index, 2.1) else discarded).append(routed)
        return [kept, discarded]
