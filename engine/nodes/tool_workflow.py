"""Call n8n Workflow Tool (`@n8n/n8n-nodes-langchain.toolWorkflow`, versions 2, 2.1 and 2.2 as
n8n 2.41.1 has them): a sub-workflow the Agent calls as a tool.

The tool is named `name` (2, 2.1) or, from 2.2, after the node (n8n's nodeNameToToolName: every
run of characters other than letters, digits, `_` and `-` becomes `_`); the model reads its
`description`. Its arguments, as n8n's WorkflowToolService builds them:
- `workflowInputs` with a schema and `$fromAI('key', 'description', 'type')` in its values: one
  argument per key (engine/from_ai.py), and the sub-workflow's item is `{"query": <the call's
  arguments>}` with the mapped values over it (engine/workflow_inputs.py), as n8n's;
- otherwise one text argument, `input`, and the item is `{"query": <that text>}`.
The sub-workflow runs inside the Agent's execution (engine/sub_workflow.py); the model is told
the first item's JSON of its last node (2) or every item's (2.1+), as JSON text. A failure is
told to the model as `There was an error: "<message>"`, as n8n does, and the Agent goes on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from core.jsontext import dumps
from engine import from_ai
from engine.description import NodeDescription, Option, Property
from engine.errors import ExecutionCanceled, NodeExecutionError
from engine.expression_values import json_stringify
from engine.node import ExecuteFunctions, NodeType, SupplyDataFunctions
from engine.registry import register
from engine.workflow import Workflow
from engine.workflow_inputs import caller_items

MAX_TOOL_NAME = 64
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
# What LangChain sends for a tool that takes one text (n8n's DynamicTool).
TEXT_INPUT = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "additionalProperties": False,
    "$schema": DRAFT_07,
}
NO_RESPONSE = 'There was an error: "The workflow did not return a response"'

_PROPERTIES = (
    Property(
        "name",
        "Name",
        "string",
        "",
        placeholder="e.g. My_Color_Tool",
        description="The name of the function to be called, could contain letters, "
        "numbers, and underscores only",
        display_options={"show": {"@version": ({"_cnd": {"lte": 2.1}},)}},
    ),  # fmt: skip
    Property(
        "description",
        "Description",
        "string",
        "",
        type_options={"rows": 3},
        placeholder="Call this tool to get a random color. The input should be a string "
        "with comma separated names of colors to exclude.",
    ),  # fmt: skip
    Property(
        "source",
        "Source",
        "options",
        "database",
        description="Where to get the workflow to execute from",
        options=(
            Option("database", "Database", "Load the workflow from the database by ID"),
            Option("parameter", "Define Below", "Pass the JSON code of a workflow"),
        ),
    ),
    Property(
        "workflowId",
        "Workflow",
        "resourceLocator",
        "",
        required=True,
        description="The workflow's id (mini-n8n: the id `mini-n8n workflows` lists)",
        display_options={"show": {"source": ("database",)}},
    ),  # fmt: skip
    Property(
        "workflowInputs",
        "Workflow Inputs",
        "resourceMapper",
        {"mappingMode": "defineBelow", "value": None},
        description="The sub-workflow's inputs: a value for each, such as "
        "{{ $fromAI('city', 'the city to look up') }}",
        display_options={"show": {"source": ("database",)}, "hide": {"workflowId": ("",)}},
    ),
    Property(
        "workflowJson",
        "Workflow JSON",
        "json",
        "\n\n\n\n\n\n\n\n\n",
        required=True,
        type_options={"rows": 10},
        description="The workflow JSON code to execute",
        display_options={"show": {"source": ("parameter",)}},
    ),  # fmt: skip
)


def tool_name(node_name: str) -> str:
    """n8n's nodeNameToToolName."""
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", node_name)
    if len(name) > MAX_TOOL_NAME:
        name = re.sub(r"[_-]+$", "", name[:MAX_TOOL_NAME])
    return name


@dataclass
class WorkflowTool:
    ctx: SupplyDataFunctions
    name: str
    description: str
    parameters: dict[str, Any]
    structured: bool  # arguments from $fromAI(); else one text `input`
    mapped: bool  # `workflowInputs` has a schema: its values make the sub-workflow's item
    all_items: bool  # 2.1+: every item of the last node, not the first one's JSON

    def call(self, args: dict[str, Any]) -> str:
        query: Any = args if self.structured else args.get("input", "")
        try:
            return _told(self._run(query))
        except ExecutionCanceled:
            raise
        except NodeExecutionError as err:
            return f'There was an error: "{err.message}"'

    def observation(self, output: str) -> str:
        """What n8n's Agent 3.x tells the model of a call that answered `output`: the tool
        node's output items as JSON, here the sub-workflow's items (`[{"result": ...}]`), where
        a tool that answers text is told as `[{"response": <text>}]`."""
        try:
            told = json.loads(output)
        except ValueError:
            return dumps([{"response": output}])
        if isinstance(told, list):
            return dumps(told)
        return dumps([told if isinstance(told, dict) else {"response": output}])

    def _run(self, query: Any) -> Any:
        """n8n's runFunction: the call's context has the item `{"query": <the arguments>}`, which
        `$fromAI()` reads; the sub-workflow gets the mapped values over it, or the arguments."""
        call = self.ctx.tool_call({"query": query})
        workflow = _workflow(call)
        if self.mapped:
            items = caller_items(call, call.input_items, False, False)[:1]
        else:
            items = [{"json": query if isinstance(query, dict) else {"query": query}}]
        outputs = call.execute_workflow(workflow, items, last_run_only=True).outputs
        first = outputs[0] if outputs else []
        if not first:
            raise NodeExecutionError(NO_RESPONSE)
        return first if self.all_items else first[0].get("json")


def _workflow(ctx: ExecuteFunctions) -> Workflow:
    if ctx.get_parameter("source", "database") == "parameter":
        return ctx.load_workflow(code=ctx.get_parameter("workflowJson", ""))
    value: Any = ctx.get_parameter("workflowId", "")
    return ctx.load_workflow(value.get("value") if isinstance(value, dict) else value)


def _told(response: Any) -> str:
    """n8n's handleToolResponse: what the model reads of the sub-workflow's answer."""
    if isinstance(response, bool):
        raise NodeExecutionError("Wrong output type returned")
    if isinstance(response, int | float):
        return json_stringify(response)
    if isinstance(response, list):
        return str(json_stringify([item.get("json") for item in response], 2))
    if isinstance(response, dict):
        return str(json_stringify(response, 2))
    if not isinstance(response, str):
        raise NodeExecutionError("Wrong output type returned")
    return response


@register
class ToolWorkflow(NodeType):
    type = "@n8n/n8n-nodes-langchain.toolWorkflow"
    description = NodeDescription(
        display_name="Call n8n Workflow Tool",
        group="tool",
        description="Uses another n8n workflow as a tool. Allows packaging any n8n node(s) as "
        "a tool.",
        subtitle="tool workflow sub-workflow call",
        version=2.2,
        versions=(2, 2.1, 2.2),
        inputs=(),
        outputs=("ai_tool",),
        properties=_PROPERTIES,
    )

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> WorkflowTool:
        node = ctx.node
        name = ctx.get_parameter("name", "") if node.type_version <= 2.1 else tool_name(node.name)
        mapper = node.parameters.get("workflowInputs")
        uses_schema = isinstance(mapper, dict) and bool(mapper.get("schema"))
        arguments = from_ai.arguments(node.parameters, node.name) if uses_schema else []
        # As LangChain writes n8n's zod schema for the model (recorded from n8n's requests).
        schema = {**from_ai.schema(arguments), "$schema": DRAFT_07} if arguments else TEXT_INPUT
        return WorkflowTool(
            ctx=ctx,
            name=str(name),
            description=str(ctx.get_parameter("description", "") or ""),
            parameters=dict(schema),
            structured=bool(arguments),
            mapped=uses_schema,
            all_items=node.type_version > 2,
        )
