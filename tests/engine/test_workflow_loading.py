"""Loading workflows: n8n exports as they are, and clear errors naming the node."""

from __future__ import annotations

import copy

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.workflows import GREETING, REDIS_CHAT, SIMPLE_CHAT, example, node

TRIGGER = "When chat message received"


def broken(mutate) -> dict:
    workflow = copy.deepcopy(example(REDIS_CHAT))
    mutate(workflow)
    return workflow


def expect_error(workflow: dict, node_name: str, fragment: str) -> None:
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(workflow)
    assert info.value.node == node_name
    assert node_name in str(info.value) and fragment in str(info.value)


def test_an_unknown_node_type_names_the_node():
    def mutate(w):
        node(w, "Calculator")["type"] = "n8n-nodes-base.doesNotExist"

    expect_error(broken(mutate), "Calculator", 'unknown node type "n8n-nodes-base.doesNotExist"')


def test_an_agent_without_a_model_names_the_agent():
    def mutate(w):
        del w["connections"]["Mock Chat Model"]

    expect_error(broken(mutate), "AI Agent", 'no node connected to required input "Chat Model"')


def test_a_connection_to_a_missing_node_names_the_source():
    def mutate(w):
        w["connections"][TRIGGER]["main"][0].append({"node": "Nowhere", "type": "main", "index": 0})

    expect_error(broken(mutate), TRIGGER, 'unknown node "Nowhere"')


def test_a_sub_node_on_the_wrong_input_names_it():
    def mutate(w):
        w["connections"]["Calculator"] = {
            "ai_languageModel": [[{"node": "AI Agent", "type": "ai_languageModel", "index": 0}]]
        }

    expect_error(
        broken(mutate), "Calculator", 'cannot be the "Chat Model" of "AI Agent": it is a "Tool"'
    )


def test_a_bad_response_mode_names_the_trigger():
    def mutate(w):
        node(w, TRIGGER)["parameters"]["options"]["responseMode"] = "whenever"

    expect_error(broken(mutate), TRIGGER, 'unknown response mode "whenever"')


def test_an_n8n_export_with_sticky_notes_pin_data_and_meta_loads():
    workflow = load_workflow(example(REDIS_CHAT))
    assert "Sticky Note" not in workflow.nodes  # decoration only
    assert set(workflow.nodes) == {
        TRIGGER,
        "AI Agent",
        "Mock Chat Model",
        "Redis Chat Memory",
        "Calculator",
    }


def test_empty_parameters_mean_all_defaults():
    data = copy.deepcopy(example(SIMPLE_CHAT))
    node(data, "AI Agent")["parameters"] = {}
    node(data, "Simple Memory")["parameters"] = {}
    run = run_workflow(
        load_workflow(data),
        [{"json": {"sessionId": "d", "chatInput": "What is 2 + 2?"}}],
        services=Services(simple_memory=InProcessMemory()),
    )
    assert run.status == "success", run.error
    assert run.first_json() == {"output": "Based on the tools: Calculator returned 4."}
    sent = run.run_data["Mock Chat Model"][0]["inputOverride"]["ai_languageModel"][0][0]["json"]
    # No system message unless the workflow sets one (n8n's Agent from typeVersion 1.9).
    assert [m["type"] for m in sent["messages"]] == ["human"]


def test_every_expression_form_reads_earlier_nodes():
    data = copy.deepcopy(example(GREETING))
    node(data, "Edit Fields")["parameters"]["assignments"]["assignments"] = [
        {"id": "1", "name": "a", "value": "={{ $json.body.name }}", "type": "string"},
        {
            "id": "2",
            "name": "b",
            "value": "={{ $('Webhook').item.json.body.name }}",
            "type": "string",
        },
        {
            "id": "3",
            "name": "c",
            "value": "={{ $('Webhook').first().json.body.name }}",
            "type": "string",
        },
        {
            "id": "4",
            "name": "d",
            "value": '={{ $node["Webhook"].json.body.name }}',
            "type": "string",
        },
        {
            "id": "5",
            "name": "e",
            "value": "=Hi {{ $json.body.name.toUpperCase() }}!",
            "type": "string",
        },
        {"id": "6", "name": "f", "value": "={{ $json.body.missing ?? 'none' }}", "type": "string"},
    ]
    run = run_workflow(load_workflow(data), [{"json": {"body": {"name": "Ada"}}}])
    assert run.status == "success", run.error
    assert run.first_json() == {
        "a": "Ada",
        "b": "Ada",
        "c": "Ada",
        "d": "Ada",
        "e": "Hi ADA!",
        "f": "none",
    }


def test_a_failing_expression_fails_the_run_naming_node_and_parameter():
    data = copy.deepcopy(example(GREETING))
    node(data, "Edit Fields")["parameters"]["assignments"]["assignments"] = [
        {"id": "1", "name": "x", "value": "={{ $json.body.name.__class__ }}", "type": "string"},
    ]
    run = run_workflow(load_workflow(data), [{"json": {"body": {"name": "Ada"}}}])
    assert run.status == "error"
    assert run.error_node == "Edit Fields"
    assert "__class__" in run.error
