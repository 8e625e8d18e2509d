"""The HTTP Request Tool in-process: `$fromAI()` arguments as the tool's schema and in its
parameters, its name and description as n8n makes them, and an Agent calling it (the mock model
calls a tool named in the message with the message's key=value words)."""

from __future__ import annotations

import json

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.from_ai import FromAIArgument, arguments, calls_in, schema
from engine.hooks import Hooks
from engine.http_properties import TOOL_DESCRIPTION
from engine.node_tool import node_tool, tool_name
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.engine.http_cases import RecordingClient, answer
from tests.workflows import SIMPLE_CHAT, example

MARKED = "={{ /*n8n-auto-generated-fromAI-override*/ $fromAI('city', `The city`, 'string') }}"


def test_from_ai_calls_declare_the_tools_arguments_as_n8n_parses_them():
    assert calls_in("={{ $fromAI('limit', 'How many', 'number', 5) }}") == [
        FromAIArgument("limit", "How many", "number", 5)
    ]
    assert calls_in(MARKED) == [FromAIArgument("city", "The city", "string")]
    assert calls_in("=a {{ $fromai(\"q\", 'it\\'s, ok') }} b") == [
        FromAIArgument("q", "it's, ok", "string")
    ]
    found = arguments({"url": "={{ 'https://x.example/?q=' + $fromAI('q') }}",
                       "options": {"x": "={{ $fromAI('body', 'JSON', 'json') }}"}}, "T")  # fmt: skip
    assert schema(found) == {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "body": {
                "anyOf": [
                    {"type": "object", "minProperties": 1, "additionalProperties": True},
                    {"type": "array", "minItems": 1},
                ],
                "description": "JSON",
            },
        },  # fmt: skip
        "required": ["q", "body"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"url": "={{ $fromAI('') }}"}, "You must specify a key when using $fromAI()"),
        ({"url": "={{ $fromAI('a b') }}"}, "Parameter key `a b` is invalid"),
        ({"url": "={{ $fromAI('k', 'x') }}", "b": "={{ $fromAI('k', 'y') }}"},
         "Duplicate key 'k' found with different description or type"),
        ({"url": "={{ $fromAI('k', 'x', 'date') }}"}, "Invalid type: date"),
    ],
)  # fmt: skip
def test_a_from_ai_call_that_declares_no_argument_is_refused_at_import(parameters, message):
    workflow = agent_with_tool({"method": "GET", **parameters})
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(workflow)
    assert info.value.node == "HTTP Request" and message in info.value.message


def test_tool_names_are_node_names_made_safe_as_n8n_makes_them():
    assert tool_name("HTTP Request") == "HTTP_Request"
    assert tool_name("Weather (v2)!") == "Weather_v2_"
    assert tool_name("x" * 70 + "-y") == "x" * 64


def agent_with_tool(parameters: dict, tool_description: str | None = None) -> dict:
    """The Simple Memory calculator chat with an HTTP Request Tool beside the Calculator."""
    workflow = example(SIMPLE_CHAT)
    params = dict(parameters)
    if tool_description is not None:
        params["toolDescription"] = tool_description
    workflow["nodes"].append({
        "id": "tool-http", "name": "HTTP Request", "type": "n8n-nodes-base.httpRequestTool",
        "typeVersion": 4.2, "position": [600, 300], "parameters": params})  # fmt: skip
    workflow["connections"]["HTTP Request"] = {
        "ai_tool": [[{"node": "AI Agent", "type": "ai_tool", "index": 0}]]
    }
    return workflow


def chat(workflow: dict, client: RecordingClient, message: str):
    services = Services(simple_memory=InProcessMemory(), http=client)
    item = {"json": {"sessionId": "s1", "action": "sendMessage", "chatInput": message}}
    return run_workflow(load_workflow(workflow), [item], hooks=Hooks(), services=services)


def test_the_agent_calls_the_tool_with_the_models_arguments_and_reads_its_items():
    client = RecordingClient(lambda r: answer(200, {"city": "Paris", "temp": 21}))
    workflow = agent_with_tool(
        {"url": "=https://weather.example/now?city={{ $fromAI('city', 'The city', 'string') }}"},
        "Tells the weather of a city",
    )
    run = chat(workflow, client, "ask HTTP_Request city=Paris")
    assert run.status == "success", run.error
    assert client.requests[0].url == "https://weather.example/now?city=Paris"
    result = '[{"city":"Paris","temp":21}]'
    assert run.first_json() == {"output": f"Based on the tools: HTTP_Request returned {result}."}
    tool_run = run.run_data["HTTP Request"][0]
    assert tool_run["inputOverride"]["ai_tool"][0][0]["json"] == {"city": "Paris"}
    assert tool_run["data"]["ai_tool"][0][0]["json"] == {"response": result}
    model_input = run.run_data["Mock Chat Model"][0]["inputOverride"]["ai_languageModel"][0][0]
    assert "HTTP_Request" in model_input["json"]["tools"]


def test_a_failing_tool_fails_the_agent_with_the_tools_error_as_n8n_does():
    client = RecordingClient(lambda r: answer(404, {"message": "no such city"}))
    workflow = agent_with_tool({"url": "=https://weather.example/{{ $fromAI('city') }}"})
    run = chat(workflow, client, "ask HTTP_Request city=Atlantis")
    assert run.status == "error"
    error = run.run_data["HTTP Request"][0]["error"]
    assert (error["message"], error["httpCode"]) == (
        "The resource you are requesting could not be found",
        "404",
    )
    assert json.loads(json.dumps(run.run_data["HTTP Request"][0]["inputOverride"])) == {
        "ai_tool": [[{"json": {"city": "Atlantis"}}]]}  # fmt: skip


def test_optimize_response_keeps_the_chosen_fields_of_the_data_field():
    body = {"records": [{"id": 1, "name": "a", "meta": {"x": 1}}, {"id": 2, "name": "b"}]}
    client = RecordingClient(lambda r: answer(200, body))
    workflow = agent_with_tool({
        "url": "=https://x.example/?q={{ $fromAI('q') }}", "optimizeResponse": True,
        "dataField": "records", "fieldsToInclude": "selected", "fields": "id, meta.x"})  # fmt: skip
    run = chat(workflow, client, "ask HTTP_Request q=1")
    response = run.run_data["HTTP Request"][0]["data"]["ai_tool"][0][0]["json"]["response"]
    assert json.loads(response) == [{"id": 1, "meta": {"x": 1}}, {"id": 2, "meta": {"x": None}}]


class _Supply:
    """What node_tool reads of a sub-node's context."""

    def __init__(self, name: str, parameters: dict):
        self.node = type("N", (), {"name": name, "parameters": parameters})()

    def get_parameter(self, path: str, default=None, item_index=None):
        return self.node.parameters.get(path, default)


@pytest.mark.parametrize(
    ("parameters", "description"),
    [
        ({}, "Makes an HTTP request and returns the response data"),
        ({"toolDescription": "  "}, "Makes an HTTP request and returns the response data"),
        ({"toolDescription": "Gets the weather"}, "Gets the weather"),
        ({"toolDescription": "Ignored", "descriptionType": "auto"},
         "Makes an HTTP request and returns the response data"),
    ],
)  # fmt: skip
def test_the_tools_name_description_and_schema_are_n8ns(parameters, description):
    params = {
        "url": "={{ 'https://x.example/' + $fromAI('path', 'Where', 'string') }}",
        **parameters,
    }
    tool = node_tool(_Supply("Weather API", params), TOOL_DESCRIPTION, lambda ctx: [])
    assert (tool.name, tool.description) == ("Weather_API", description)
    assert tool.parameters["properties"] == {"path": {"type": "string", "description": "Where"}}
