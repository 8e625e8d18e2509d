"""No Operation (`n8n-nodes-base.noOp`): passes its items on unchanged."""

from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register


@register
class NoOp(NodeType):
    type = "n8n-nodes-base.noOp"

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [ctx.input_items]
