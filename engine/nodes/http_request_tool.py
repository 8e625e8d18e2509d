"""HTTP Request Tool (`n8n-nodes-base.httpRequestTool`): the HTTP Request node as an Agent's tool,
as n8n 2.41.1 offers it (n8n generates it from HTTP Request, which is `usableAsTool`; its older
`@n8n/n8n-nodes-langchain.toolHttpRequest` is hidden there and not supported here).

The same parameters as HTTP Request (engine/nodes/http_request.py), and what n8n adds for a
tool: a `toolDescription` for the model, and "Optimize Response" (engine/http_optimize.py). A
parameter written `{{ $fromAI('city', 'The city', 'string') }}` is an argument the model fills
(engine/from_ai.py); the node runs on one item holding the model's arguments and the model gets
the JSON of its output, as n8n's node-as-tool (engine/node_tool.py).
"""

from __future__ import annotations

from engine import from_ai
from engine.description import NodeDescription
from engine.http_optimize import optimizer
from engine.http_properties import TOOL_DESCRIPTION, TOOL_PROPERTIES
from engine.node import ExecuteFunctions, NodeType, SupplyDataFunctions
from engine.node_tool import NodeTool, node_tool
from engine.nodes.http_request import (
    DEFAULT_VERSION,
    VERSIONS,
    credential_slots,
    refuse_unsupported,
    request_items,
)
from engine.registry import register
from engine.workflow import Node


@register
class HttpRequestTool(NodeType):
    type = "n8n-nodes-base.httpRequestTool"
    description = NodeDescription(
        display_name="HTTP Request Tool",
        group="tool",
        description=TOOL_DESCRIPTION,
        version=DEFAULT_VERSION,
        versions=VERSIONS,
        subtitle="tool http request api url fetch",
        inputs=(),
        outputs=("ai_tool",),
        credentials=credential_slots(),
        properties=TOOL_PROPERTIES,
    )

    def validate(self, node: Node) -> None:
        refuse_unsupported(node)
        from_ai.arguments(node.parameters, node.name)  # the tool's arguments can be read

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> NodeTool:
        def execute(call: ExecuteFunctions) -> list:
            return request_items(call, self.description.properties, optimizer)

        return node_tool(ctx, TOOL_DESCRIPTION, execute)
