"""Manual Trigger (`n8n-nodes-base.manualTrigger`, "When clicking 'Execute workflow'"): starts a
workflow run by hand (the editor's or the REST api's manual run, `mini-n8n run`). It has no URL;
the items it hands on are the run's input (one empty item when none is given, as in n8n).
"""

from engine.description import NodeDescription
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register


@register
class ManualTrigger(NodeType):
    type = "n8n-nodes-base.manualTrigger"
    description = NodeDescription(
        display_name="When clicking 'Execute workflow'",
        group="trigger",
        description="Runs the flow on clicking a button in n8n.",
        inputs=(),
        subtitle="manual trigger execute click test",
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [ctx.input_items or [{"json": {}}]]
