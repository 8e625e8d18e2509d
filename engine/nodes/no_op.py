"""No Operation (`n8n-nodes-base.noOp`): passes its items on unchanged."""

from engine.node import NodeOutput, NodeType, register


@register
class NoOp(NodeType):
    type = "n8n-nodes-base.noOp"

    def execute(self, ctx) -> NodeOutput:
        return [ctx.input_items]
