"""Execute Workflow (`n8n-nodes-base.executeWorkflow`, n8n's "Execute Sub-workflow"): runs
another workflow with this node's items and outputs what the sub-workflow's last node returned.
Versions 1 to 1.4 as n8n 2.41.1 has them (1.2, 1.3 and 1.4 differ only in how a mapped value is
converted; 1.4 always converts to text where a field is text).

- `source`: "database" (a stored workflow: `workflowId`, a plain id in 1, a resource locator
  from 1.1 on) or "parameter" (`workflowJson`). n8n 1/1.1's "localFile" and "url" are refused:
  a node here reads no file and fetches no URL to find code to run.
- `workflowInputs` (1.2+, source database): the resource mapper whose values (expressions per
  item) are laid over each item's JSON, each checked against its type (engine/workflow_inputs.py).
- `mode`: "once" (one call with every item; its items come back) or "each" (one call per item,
  each result item paired with the item it came from and naming the call in its metadata).
- `options.waitForSubWorkflow` (default true): false starts the sub-workflow as an execution of
  its own, on any worker (n8n starts a separate execution too), and passes the items on at once.

The sub-workflow runs inside this execution, with its bounds (engine/sub_workflow.py).
"""

from __future__ import annotations

from typing import Any

from engine.description import NodeDescription, Option, Property
from engine.errors import NodeExecutionError, SubWorkflowError, WorkflowValidationError
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node, Workflow
from engine.workflow_inputs import caller_items

_UP_TO_1_1 = {"@version": ({"_cnd": {"lte": 1.1}},)}
_FROM_1_2 = {"@version": ({"_cnd": {"gte": 1.2}},)}
_MAPPER_DEFAULT = {"mappingMode": "defineBelow", "value": None}


def _source(options: tuple[Option, ...], shown: dict) -> Property:
    return Property(
        "source",
        "Source",
        "options",
        "database",
        description="Where to get the workflow to execute from",
        options=options,
        display_options={"show": shown},
    )


_DATABASE = Option("database", "Database", "Load the workflow from the database by ID")
_PROPERTIES = (
    _source(
        (
            _DATABASE,
            Option("localFile", "Local File", "Load the workflow from a locally saved file"),
            Option("parameter", "Parameter", "Load the workflow from a parameter"),
            Option("url", "URL", "Load the workflow from an URL"),
        ),
        _UP_TO_1_1,
    ),
    _source(
        (_DATABASE, Option("parameter", "Define Below", "Pass the JSON code of a workflow")),
        _FROM_1_2,
    ),  # fmt: skip
    Property(
        "workflowId",
        "Workflow ID",
        "string",
        "",
        required=True,
        description="Can be found in the URL of the workflow",
        display_options={"show": {"source": ("database",), "@version": (1,)}},
    ),
    Property(
        "workflowId",
        "Workflow",
        "resourceLocator",
        "",
        required=True,
        description="The workflow's id (mini-n8n: the id `mini-n8n workflows` lists)",
        display_options={"show": {"source": ("database",), "@version": ({"_cnd": {"gte": 1.1}},)}},
    ),
    Property(
        "workflowJson",
        "Workflow JSON",
        "json",
        "\n\n\n",
        required=True,
        description="The workflow JSON code to execute",
        type_options={"rows": 10},
        display_options={"show": {"source": ("parameter",)}},
    ),
    Property(
        "workflowInputs",
        "Workflow Inputs",
        "resourceMapper",
        _MAPPER_DEFAULT,
        description="The sub-workflow's inputs: a value (or expression) for each",
        display_options={
            "show": {"source": ("database",), **_FROM_1_2},
            "hide": {"workflowId": ("",)},
        },
    ),
    Property(
        "mode",
        "Mode",
        "options",
        "once",
        options=(
            Option(
                "once",
                "Run once with all items",
                "Pass all items into a single execution of the sub-workflow",
            ),  # fmt: skip
            Option(
                "each", "Run once for each item", "Call the sub-workflow individually for each item"
            ),  # fmt: skip
        ),
    ),
    Property(
        "options",
        "Options",
        "collection",
        {},
        placeholder="Add option",
        children=(
            Property(
                "waitForSubWorkflow",
                "Wait For Sub-Workflow Completion",
                "boolean",
                True,
                description="Whether the main workflow should wait for the sub-workflow to "
                "complete its execution before proceeding",
            ),
        ),
    ),
)


@register
class ExecuteWorkflow(NodeType):
    type = "n8n-nodes-base.executeWorkflow"
    description = NodeDescription(
        display_name="Execute Sub-workflow",
        group="core",
        description="Execute another workflow",
        subtitle="execute workflow sub-workflow call",
        version=1.3,
        versions=(1, 1.1, 1.2, 1.3, 1.4),
        properties=_PROPERTIES,
    )

    def validate(self, node: Node) -> None:
        source = node.parameters.get("source", "database")
        if source in ("localFile", "url"):
            raise WorkflowValidationError(
                f'source "{source}" is not supported: import the workflow and call it from the '
                'database, or paste its JSON with the "parameter" source',
                node=node.name,
            )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        version = ctx.node.type_version
        items = caller_items(ctx, ctx.input_items, True, version >= 1.4)
        if ctx.get_parameter("mode", "once") == "each":
            return _each(ctx, items)
        workflow = _workflow(ctx, 0)
        if not ctx.get_parameter("options.waitForSubWorkflow", True, 0):
            ctx.start_workflow(workflow, items)
            return [ctx.input_items]
        outputs = ctx.execute_workflow(workflow, items).outputs
        return [_paired(branch, len(items)) for branch in outputs]


def _each(ctx: ExecuteFunctions, items: list[Item]) -> NodeOutput:
    """One call per item: its result items paired with it and naming the call."""
    out: list[list[Item]] = []
    for index, item in enumerate(items):
        try:
            workflow = _workflow(ctx, index)
            if not ctx.get_parameter("options.waitForSubWorkflow", True, index):
                sub_id = ctx.start_workflow(workflow, [item])
                out.extend([] for _ in range(1 - len(out)))
                out[0].append({**ctx.input_items[index], "metadata": _meta(sub_id, workflow)})
                continue
            called = ctx.execute_workflow(workflow, [item])
        except SubWorkflowError as err:
            raise NodeExecutionError(
                f"Error executing workflow with item at index {index}: {err.message}",
                item_index=index,
            ) from None
        for output, branch in enumerate(called.outputs):
            out.extend([] for _ in range(output + 1 - len(out)))
            out[output].extend(
                {**found, "pairedItem": {"item": index},
                 "metadata": _meta(called.execution_id, workflow)}
                for found in branch
            )  # fmt: skip
    return out or [[]]


def _workflow(ctx: ExecuteFunctions, index: int) -> Workflow:
    """n8n's getWorkflowInfo, for the item at `index`."""
    if ctx.get_parameter("source", "database", index) == "parameter":
        return ctx.load_workflow(code=ctx.get_parameter("workflowJson", "", index))
    value: Any = ctx.get_parameter("workflowId", "", index)
    if isinstance(value, dict):  # a resource locator: {"__rl": true, "value": ..., "mode": ...}
        value = value.get("value")
    return ctx.load_workflow(value)


def _paired(branch: list[Item], count: int) -> list[Item]:
    """n8n's pairing of a call's result items: a result as long as the input pairs item for
    item, any other with every input item (items that carry a pairing keep it)."""
    fallback = [{"item": i} for i in range(count)]
    same = len(branch) == count
    out = []
    for index, item in enumerate(branch):
        if "pairedItem" in item:
            out.append(item)
        else:
            out.append({**item, "pairedItem": {"item": index} if same else fallback})
    return out


def _meta(execution_id: str, workflow: Workflow) -> dict[str, Any]:
    return {"subExecution": {"executionId": execution_id, "workflowId": workflow.id}}
