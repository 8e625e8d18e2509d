"""Execute Workflow Trigger (`n8n-nodes-base.executeWorkflowTrigger`, n8n's "When Executed by
Another Workflow"): where a sub-workflow starts when an Execute Workflow node or the Call n8n
Workflow Tool calls it (engine/sub_workflow.py). Versions 1, 1.1 and 1.2 as n8n 2.41.1 has them.

- 1: passes on every item it was called with.
- 1.1+: `inputSource` declares what it takes: its fields (`workflowInputs.values`: name and type,
  the default), a JSON example whose keys are the fields, or all data ("passthrough"). With
  declared fields each item keeps those only, in their order, a missing one null
  (engine/workflow_inputs.py); the caller's mapping checks the types.
- 1.1: `returnOutput`: the caller gets the last node's last run (lastRunOnly, the default) or
  every run's items (allRuns); 1.2 always gives every run's.

It listens on no URL: a workflow whose only trigger it is cannot be activated, and needs not be.
"""

from __future__ import annotations

from engine.description import FieldGroup, NodeDescription, Option, Property
from engine.node import ExecuteFunctions, NodeOutput, NodeType
from engine.registry import register
from engine.workflow_inputs import FIELDS, JSON_EXAMPLE, PASSTHROUGH, callee_fields, callee_items

_FROM_1_1 = {"@version": ({"_cnd": {"gte": 1.1}},)}
_TYPES = (
    Option("any", "Allow Any Type"),
    Option("string", "String"),
    Option("number", "Number"),
    Option("boolean", "Boolean"),
    Option("array", "Array"),
    Option("object", "Object"),
)
_EXAMPLE = (
    '{\n  "aField": "a string",\n  "aNumber": 123,\n  "thisFieldAcceptsAnyType": null,\n'
    '  "anArray": []\n}'
)


@register
class ExecuteWorkflowTrigger(NodeType):
    type = "n8n-nodes-base.executeWorkflowTrigger"
    description = NodeDescription(
        display_name="When Executed by Another Workflow",
        group="trigger",
        description="Starts the workflow when an Execute Workflow node or an agent's workflow "
        "tool calls it.",
        subtitle="execute workflow trigger sub-workflow called",
        version=1.1,
        versions=(1, 1.1, 1.2),
        inputs=(),
        properties=(
            Property(
                "inputSource",
                "Input data mode",
                "options",
                FIELDS,
                options=(
                    Option(FIELDS, "Define using fields below", "Provide input fields via UI"),
                    Option(
                        JSON_EXAMPLE,
                        "Define using JSON example",
                        "Generate a schema from an example JSON object",
                    ),
                    Option(
                        PASSTHROUGH,
                        "Accept all data",
                        "Use all incoming data from the parent workflow",
                    ),
                ),
                display_options={"show": _FROM_1_1},
            ),
            Property(
                JSON_EXAMPLE,
                "JSON Example",
                "json",
                _EXAMPLE,
                display_options={"show": {**_FROM_1_1, "inputSource": (JSON_EXAMPLE,)}},
            ),
            Property(
                FIELDS,
                "Workflow Input Schema",
                "fixedCollection",
                {},
                description="Define expected input fields. If no inputs are provided, all data "
                "from the calling workflow will be passed through.",
                placeholder="Add field",
                type_options={"multipleValues": True, "sortable": True},
                groups=(
                    FieldGroup(
                        "values",
                        "Values",
                        (
                            Property(
                                "name",
                                "Name",
                                "string",
                                "",
                                required=True,
                                placeholder="e.g. fieldName",
                            ),  # fmt: skip
                            Property("type", "Type", "options", "string", options=_TYPES),
                        ),
                    ),
                ),
                display_options={"show": {**_FROM_1_1, "inputSource": (FIELDS,)}},
            ),
            Property(
                "returnOutput",
                "Items to Return",
                "options",
                "lastRunOnly",
                options=(
                    Option("allRuns", "All Items From Every Run"),
                    Option("lastRunOnly", "Items From the Last Run Only"),
                ),
                display_options={"show": {"@version": ({"_cnd": {"lt": 1.2}},)}},
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        if ctx.node.type_version < 1.1:
            return [ctx.input_items]
        return [callee_items(ctx.input_items, callee_fields(ctx))]
