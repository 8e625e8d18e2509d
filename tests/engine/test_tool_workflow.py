"""The Call n8n Workflow Tool in-process: its name and schema as n8n 2.41.1 sends them to the
model (recorded from n8n's requests to a fake model), the sub-workflow called with the model's
arguments through `$fromAI()`, and what the model is told back."""

from __future__ import annotations

from engine.context import ExecuteContext, Execution
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import load_workflow
from tests.sub_workflows import (
    CALLED,
    agent_with_workflow_tool,
    calculator_child,
    called_trigger,
    node,
    set_node,
    workflow,
)

SCHEMA_N8N_SENT = {  # n8n 2.41.1's request for $fromAI('input', 'the math expression', 'string')
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the math expression"}},
    "required": ["input"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}
TEXT_SCHEMA_N8N_SENT = {  # and for a tool without a schema (one text)
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}
QUESTION = {"json": {"sessionId": "s", "action": "sendMessage", "chatInput": "What is 19 * 23?"}}


def supplied_tool(flow: dict, child: dict):
    """The tool `flow`'s Agent is supplied, inside an execution of `flow` that finds `child`."""
    loaded = load_workflow(flow)
    services = Services(workflows=lambda workflow_id: load_workflow(child))
    execution = Execution("e1", loaded, Hooks(), services)
    ctx = ExecuteContext(execution, loaded.nodes["AI Agent"], [QUESTION], 0)
    return ctx.supply(loaded.nodes["Calculator workflow"], 0)


def test_a_2_2_tool_is_named_after_its_node_and_described_by_its_fromai_arguments():
    child = calculator_child()
    tool = supplied_tool(agent_with_workflow_tool(child["id"]), child)
    assert (tool.name, tool.description) == ("Calculator_workflow", "Computes a math expression")
    assert tool.parameters == SCHEMA_N8N_SENT


def test_the_models_arguments_reach_the_sub_workflow_and_its_items_come_back_as_json():
    child = calculator_child()
    tool = supplied_tool(agent_with_workflow_tool(child["id"]), child)
    told = tool.call({"input": "19 * 23", "id": "call_1"})
    assert told == '[\n  {\n    "result": "computed 19 * 23"\n  }\n]'  # 2.1+: every item's JSON
    # What n8n's Agent 3.x sent its model for this call (recorded): the items, compact.
    assert tool.observation(told) == '[{"result":"computed 19 * 23"}]'


def test_a_2_0_tool_tells_the_first_items_json_and_a_tool_without_schema_takes_one_text():
    child = calculator_child()
    flow = agent_with_workflow_tool(child["id"])
    tool_node = flow["nodes"][3]
    tool_node["typeVersion"] = 2
    tool_node["parameters"]["name"] = "calc_flow"
    tool = supplied_tool(flow, child)
    assert tool.name == "calc_flow"
    assert tool.call({"input": "1 + 1"}) == '{\n  "result": "computed 1 + 1"\n}'
    tool_node["parameters"]["workflowInputs"] = {"mappingMode": "defineBelow", "value": {},
                                                 "schema": []}  # fmt: skip
    everything = workflow("All", [node(CALLED, "n8n-nodes-base.executeWorkflowTrigger", 1.1,
                                       {"inputSource": "passthrough"})], [CALLED])  # fmt: skip
    plain = supplied_tool(flow, everything)
    assert plain.parameters == TEXT_SCHEMA_N8N_SENT
    assert plain.call({"input": "1 + 1"}) == '{\n  "query": "1 + 1"\n}'  # the text, as `query`


def test_a_failing_sub_workflow_is_told_to_the_model_as_n8n_tells_it():
    silent = workflow("Silent", [called_trigger(("input", "string")),
                                 set_node("Nothing", x="={{ $json.nope.deeper }}")],
                      [CALLED, "Nothing"])  # fmt: skip
    tool = supplied_tool(agent_with_workflow_tool(silent["id"]), silent)
    told = tool.call({"input": "x"})
    assert told == "There was an error: \"Cannot read properties of undefined (reading 'deeper')\""


def test_an_agent_answers_with_what_its_workflow_tool_returned():
    child = calculator_child()
    flow = load_workflow(agent_with_workflow_tool(child["id"]))
    result = run_workflow(flow, [QUESTION],
                          services=Services(workflows=lambda wid: load_workflow(child)))  # fmt: skip
    told = '[\n  {\n    "result": "computed 19 * 23"\n  }\n]'
    assert result.first_json() == {"output": f"Based on the tools: Calculator returned {told}."}
    call = result.run_data["Calculator workflow"][0]
    assert call["inputOverride"]["ai_tool"][0][0]["json"] == {"input": "19 * 23"}
