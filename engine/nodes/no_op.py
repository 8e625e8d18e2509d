"""No Operation (`n8n-nodes-base.noOp`): passes its items on unchanged."""

from engine.description import NodeDescription
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register


@register
class NoOp(NodeType):
    type = "n8n-nodes-base.noOp"
    description = NodeDescription(
        display_name="No Operation, do nothing",
        group="core",
        description="Passes its items on unchanged.",
        subtitle="noop nothing",
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [ctx.input_items]
