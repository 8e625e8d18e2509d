"""Workflows for the tests of the Wait node, sub-workflows and the Call n8n Workflow Tool: built
as n8n 2.41.1 exports them (node types, versions and parameter shapes recorded from it)."""

from __future__ import annotations

import uuid
from typing import Any

CHAT = "When chat message received"
CALLED = "When Executed by Another Workflow"
MOCK = "Mock Chat Model"


def node(name: str, kind: str, version: float, parameters: dict, **extra: Any) -> dict:
    return {"id": uuid.uuid4().hex, "name": name, "type": kind, "typeVersion": version,
            "position": [0, 0], "parameters": parameters, **extra}  # fmt: skip


def chat_trigger(response_mode: str = "streaming") -> dict:
    parameters = {"public": True, "mode": "webhook", "options": {"responseMode": response_mode}}
    return node(CHAT, "@n8n/n8n-nodes-langchain.chatTrigger", 1.3, parameters,
                webhookId=str(uuid.uuid4()))  # fmt: skip


def called_trigger(*fields: tuple[str, str]) -> dict:
    """An Execute Workflow Trigger 1.1 declaring `fields` ((name, type), ...)."""
    values = [
        {"name": name, **({"type": kind} if kind != "string" else {})} for name, kind in fields
    ]
    return node(CALLED, "n8n-nodes-base.executeWorkflowTrigger", 1.1,
                {"workflowInputs": {"values": values}})  # fmt: skip


def set_node(name: str, /, **fields: str) -> dict:
    assignments = [
        {"id": uuid.uuid4().hex, "name": key, "value": value, "type": "string"}
        for key, value in fields.items()
    ]
    return node(name, "n8n-nodes-base.set", 3.4,
                {"assignments": {"assignments": assignments}, "options": {}})  # fmt: skip


def wait_seconds(name: str, amount: float) -> dict:
    return node(name, "n8n-nodes-base.wait", 1.1, {"amount": amount},
                webhookId=str(uuid.uuid4()))  # fmt: skip


def wait_for_call(name: str, method: str = "POST", credentials: dict | None = None,
                  **parameters: Any) -> dict:  # fmt: skip
    extra = {"credentials": credentials} if credentials else {}
    return node(name, "n8n-nodes-base.wait", 1.1,
                {"resume": "webhook", "httpMethod": method, "options": {}, **parameters},
                webhookId=str(uuid.uuid4()), **extra)  # fmt: skip


def agent(name: str = "AI Agent", **parameters: Any) -> dict:
    return node(name, "@n8n/n8n-nodes-langchain.agent", 2.2, {"options": {}, **parameters})


def mock_model(name: str = MOCK) -> dict:
    return node(name, "mini-n8n.lmChatMock", 1, {"delayPerTokenMs": 0})


def mapper(values: dict[str, str], types: dict[str, str]) -> dict:
    """A resource mapper's `workflowInputs`, as n8n's editor writes it."""
    schema = [
        {"id": key, "displayName": key, "required": False, "defaultMatch": False, "display": True,
         "canBeUsedToMatch": True, "type": types.get(key, "string"), "removed": False}
        for key in values
    ]  # fmt: skip
    return {"mappingMode": "defineBelow", "value": values, "matchingColumns": [],
            "schema": schema, "attemptToConvertTypes": False, "convertFieldsToString": True}  # fmt: skip


def execute_workflow(name: str, workflow_id: str, values: dict, types: dict,
                     version: float = 1.2, **options: Any) -> dict:  # fmt: skip
    locator = {"__rl": True, "value": workflow_id, "mode": "list"}
    parameters = {"workflowId": locator, "workflowInputs": mapper(values, types),
                  "options": options}  # fmt: skip
    return node(name, "n8n-nodes-base.executeWorkflow", version, parameters)


def workflow_tool(name: str, workflow_id: str, values: dict, description: str) -> dict:
    parameters = {
        "description": description,
        "workflowId": {"__rl": True, "value": workflow_id, "mode": "list"},
        "workflowInputs": {**mapper(values, {}), "convertFieldsToString": False},
    }
    return node(name, "@n8n/n8n-nodes-langchain.toolWorkflow", 2.2, parameters)


def workflow(name: str, nodes: list[dict], chain: list[str],
             ai: list[tuple[str, str, str]] = ()) -> dict:  # fmt: skip
    """`chain`: main connections in order; `ai`: (sub-node, connection type, consumer)."""
    connections: dict[str, dict] = {}
    for source, target in zip(chain, chain[1:], strict=False):
        connections[source] = {"main": [[{"node": target, "type": "main", "index": 0}]]}
    for source, kind, target in ai:
        connections[source] = {kind: [[{"node": target, "type": kind, "index": 0}]]}
    return {"id": uuid.uuid4().hex[:16], "name": name, "nodes": nodes,
            "connections": connections, "settings": {"executionOrder": "v1"}}  # fmt: skip


def answer_wait_answer(name: str, seconds: float) -> dict:
    """A streaming chat: an Agent answers, a Wait node waits `seconds`, another Agent answers
    ("You said: <message> again"); one mock model serves both Agents."""
    again = f"={{{{ $('{CHAT}').item.json.chatInput }}}} again"
    flow = workflow(
        name,
        [chat_trigger("streaming"), agent("Before"), wait_seconds("Wait", seconds),
         agent("After", promptType="define", text=again), mock_model()],
        [CHAT, "Before", "Wait", "After"],
        [(MOCK, "ai_languageModel", "Before")],
    )  # fmt: skip
    flow["connections"][MOCK]["ai_languageModel"][0].append(
        {"node": "After", "type": "ai_languageModel", "index": 0}
    )
    return flow


def greeter() -> dict:
    """A sub-workflow: declared inputs `name` (string) and `age` (number), and a greeting."""
    return workflow(
        "Greeter",
        [called_trigger(("name", "string"), ("age", "number")),
         set_node("Greet", greeting="=Hello {{ $json.name }}, next year you are {{ $json.age + 1 }}",
                  name="={{ $json.name }}")],
        [CALLED, "Greet"],
    )  # fmt: skip


def calculator_child() -> dict:
    """The workflow behind the Call n8n Workflow Tool: one input, `input`."""
    return workflow(
        "Calculator child",
        [called_trigger(("input", "string")),
         set_node("Result", result="=computed {{ $json.input }}")],
        [CALLED, "Result"],
    )  # fmt: skip


def agent_with_workflow_tool(child_id: str, response_mode: str = "streaming") -> dict:
    """A chat whose Agent's one tool is `child_id`, named so the mock model calls it."""
    tool = workflow_tool("Calculator workflow", child_id,
                         {"input": "={{ $fromAI('input', 'the math expression', 'string') }}"},
                         "Computes a math expression")  # fmt: skip
    return workflow(
        "Agent with a workflow tool",
        [chat_trigger(response_mode), agent(), mock_model(), tool],
        [CHAT, "AI Agent"],
        [(MOCK, "ai_languageModel", "AI Agent"), ("Calculator workflow", "ai_tool", "AI Agent")],
    )
