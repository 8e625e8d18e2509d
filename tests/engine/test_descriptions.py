"""Node descriptions: one declaration per node type, read by the engine (defaults, ai_* inputs,
parameter checks) and sent to the editor. A rule written in the declaration is enforced by
load_workflow, so the editor's form and the engine cannot disagree."""

from __future__ import annotations

import pytest

from engine.description import check_parameters, displayed
from engine.errors import WorkflowValidationError
from engine.node import NodeType
from engine.registry import node_types
from engine.workflow import load_workflow
from tests.workflows import REDIS_CHAT, example, node

TRIGGER = "When chat message received"


def broken(mutate) -> dict:
    workflow = example(REDIS_CHAT)
    mutate(workflow)
    return workflow


def load_error(workflow: dict) -> WorkflowValidationError:
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(workflow)
    return info.value


def test_every_node_type_declares_a_description_with_a_group_and_unique_parameter_names():
    """A name repeats only across declarations that display conditions tell apart: n8n declares
    a parameter once per case it shows in (the If node's `conditions` per version, the Merge
    node's `numberInputs` per mode), and the form shows the first that applies."""
    for name, cls in node_types().items():
        assert "description" in cls.__dict__, f"{name} declares no description"
        data = cls.description.to_json(name)
        assert data["name"] == name
        assert data["group"] in ("trigger", "agent", "model", "memory", "tool", "core")
        names = [p.name for p in cls.description.properties]
        for prop in cls.description.properties:
            if names.count(prop.name) > 1:
                assert prop.display_options, (name, prop.name)


def test_engine_defaults_and_ai_inputs_are_read_from_the_description():
    agent = node_types()["@n8n/n8n-nodes-langchain.agent"]
    assert agent.defaults["options"]["maxIterations"] == 10
    assert agent.defaults["text"] == "={{ $json.chatInput }}"
    assert agent.sub_inputs["ai_languageModel"].max_connections == 1
    assert agent.sub_inputs["ai_languageModel"].required
    assert agent.sub_inputs["ai_memory"].max_connections == 1
    assert agent.sub_inputs["ai_tool"].max_connections is None
    calculator = node_types()["@n8n/n8n-nodes-langchain.toolCalculator"]
    assert (calculator.kind, calculator.sub_output) == ("sub", "ai_tool")
    assert node_types()["@n8n/n8n-nodes-langchain.chatTrigger"].kind == "trigger"


def test_an_option_the_declaration_does_not_list_is_refused_naming_node_and_value():
    def mutate(w):
        node(w, "Redis Chat Memory")["parameters"]["sessionIdType"] = "fromTheMoon"

    err = load_error(broken(mutate))
    assert err.node == "Redis Chat Memory"
    assert 'unknown session id "fromTheMoon"' in err.message


def test_a_value_of_the_wrong_type_is_refused_with_the_parameter_path():
    def mutate(w):
        node(w, "AI Agent")["parameters"]["options"]["maxIterations"] = "many"

    err = load_error(broken(mutate))
    assert err.node == "AI Agent"
    assert err.message == "Max Iterations must be a number (options.maxIterations)"


def test_a_number_below_its_declared_minimum_is_refused():
    def mutate(w):
        node(w, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = -5

    err = load_error(broken(mutate))
    assert err.message == "Delay per Token (ms) must be at least 0 (delayPerTokenMs)"


def test_a_required_parameter_counts_only_where_display_options_show_it():
    def define_without_text(w):
        node(w, "AI Agent")["parameters"].update(promptType="define", text="")

    err = load_error(broken(define_without_text))
    assert err.message == "Prompt (User Message) is required (text)"

    def auto_without_text(w):
        node(w, "AI Agent")["parameters"].update(promptType="auto", text="")

    load_workflow(broken(auto_without_text))  # hidden: the Chat Trigger's chatInput is used


def test_expressions_are_left_to_run_time():
    def mutate(w):
        node(w, "AI Agent")["parameters"]["options"]["maxIterations"] = "={{ 3 }}"

    load_workflow(broken(mutate))


def test_display_options_show_and_hide():
    trigger = node_types()["@n8n/n8n-nodes-langchain.chatTrigger"].description
    mode = next(p for p in trigger.properties if p.name == "mode")
    assert not displayed(mode, {"public": False})
    assert displayed(mode, {"public": True})


def test_check_parameters_ignores_parameters_the_declaration_does_not_name():
    agent = node_types()["@n8n/n8n-nodes-langchain.agent"].description
    check_parameters(
        agent, {"hasOutputParser": True, "options": {"returnIntermediateSteps": 1}}, "A"
    )


def test_a_second_model_on_an_agent_is_refused():
    def mutate(w):
        w["nodes"].append({**node(w, "Mock Chat Model"), "name": "Model 2", "id": "m2"})
        w["connections"]["Model 2"] = {
            "ai_languageModel": [[{"node": "AI Agent", "type": "ai_languageModel", "index": 0}]]
        }

    err = load_error(broken(mutate))
    assert err.node == "AI Agent"
    assert err.message == 'takes at most 1 sub-node(s) at its "Chat Model" input'


def test_a_node_class_without_a_description_is_described_from_its_class_attributes():
    class Legacy(NodeType):
        type = "test.legacy"
        kind = "sub"
        sub_output = "ai_tool"

    data = Legacy.description.to_json(Legacy.type)
    assert (data["displayName"], data["inputs"], data["outputs"]) == ("legacy", [], ["ai_tool"])
    check_parameters(Legacy.description, {"anything": 1}, "Legacy")
