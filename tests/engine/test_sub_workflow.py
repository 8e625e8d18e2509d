"""The Execute Workflow node and its trigger in-process: the sub-workflow, found through the
services, runs inside the caller's execution with the caller's bounds, and its last node's
items come back (inputs mapped and checked as n8n 2.41.1 does)."""

from __future__ import annotations

import threading

import pytest

from engine import cpu
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.sub_workflow import MAX_DEPTH
from engine.workflow import Workflow, load_workflow
from tests.sub_workflows import (
    CALLED,
    CHAT,
    MOCK,
    agent,
    called_trigger,
    chat_trigger,
    execute_workflow,
    greeter,
    mock_model,
    node,
    set_node,
    wait_seconds,
    workflow,
)

MESSAGE = {"json": {"sessionId": "s", "action": "sendMessage", "chatInput": "Ada"}}
NAME_AND_AGE = ({"name": "={{ $json.chatInput }}", "age": "={{ 36 }}"}, {"age": "number"})


def store(*flows: dict):
    loaded: dict[str, Workflow] = {f["id"]: load_workflow(f) for f in flows}

    def find(workflow_id: str) -> Workflow:
        if workflow_id not in loaded:
            raise LookupError(workflow_id)
        return loaded[workflow_id]

    return find


def caller(child_id: str, values: dict, types: dict, **options) -> dict:
    call = execute_workflow("Execute Workflow", child_id, values, types, **options)
    return workflow("Caller", [chat_trigger(), call], [CHAT, "Execute Workflow"])


def run(flow: dict, *children: dict, items=None, **services):
    lent = Services(workflows=store(*children), **services)
    return run_workflow(load_workflow(flow), items or [MESSAGE], services=lent,
                        execution_id="parent")  # fmt: skip


def outputs(result, name: str = "Execute Workflow"):
    return [
        [item["json"] for item in branch] for branch in result.run_data[name][0]["data"]["main"]
    ]


def test_the_sub_workflow_gets_the_mapped_inputs_and_its_last_nodes_items_come_back():
    child = greeter()
    result = run(caller(child["id"], *NAME_AND_AGE), child)
    assert result.status == "success", result.error
    assert outputs(result) == [[{"greeting": "Hello Ada, next year you are 37", "name": "Ada"}]]
    assert result.run_data["Execute Workflow"][0]["data"]["main"][0][0]["pairedItem"] == {"item": 0}
    assert "Greet" not in result.run_data  # the child's own run data is not the caller's


@pytest.mark.parametrize(
    ("age", "options", "version", "expected"),
    [
        ("={{ '41' }}", {}, 1.2, "Invalid input for 'age' [item 0]: 'age' expects a number but we got '41'"),
        ("={{ '41' }}", {"attemptToConvertTypes": True}, 1.2, 42),
        ("={{ 'forty' }}", {"attemptToConvertTypes": True}, 1.2, "expects a number but we got 'forty'"),
        ("={{ null }}", {}, 1.2, None),  # unset, as in n8n: the trigger fills in null
    ],
)  # fmt: skip
def test_mapped_values_are_checked_against_their_type_as_n8n_checks_them(
    age, options, version, expected
):
    child = greeter()
    flow = caller(child["id"], {"name": "Bo", "age": age}, {"age": "number"}, version=version)
    flow["nodes"][1]["parameters"]["workflowInputs"].update(options)
    result = run(flow, child)
    if isinstance(expected, str):
        assert (result.status, result.error_node) == ("error", "Execute Workflow")
        assert expected in result.error
    else:
        greeting = outputs(result)[0][0]["greeting"]
        assert greeting == f"Hello Bo, next year you are {expected if expected else 1}"


def test_a_value_for_a_text_field_is_converted_as_each_version_converts_it():
    child = workflow("Echo", [called_trigger(("text", "any")), set_node("Echo", kind="={{ typeof $json.text }}")],
                     [CALLED, "Echo"])  # fmt: skip
    cases = (  # (version, attemptToConvertTypes, convertFieldsToString, what the child gets)
        (1.4, True, False, "string"),  # 1.4 always converts to text, when it converts at all
        (1.3, True, False, "number"),
        (1.3, True, True, "string"),
        (1.4, False, False, "'text' expects a string but we got '7'"),  # strict: no conversion
    )
    for version, attempt, convert, expected in cases:
        flow = caller(child["id"], {"text": "={{ 7 }}"}, {"text": "string"}, version=version)
        flow["nodes"][1]["parameters"]["workflowInputs"].update(
            attemptToConvertTypes=attempt, convertFieldsToString=convert
        )
        result = run(flow, child)
        got = result.error if result.status == "error" else outputs(result)[0][0]["kind"]
        assert expected in got, (version, attempt, convert)


def test_the_trigger_keeps_its_declared_fields_a_missing_one_null_or_passes_all_data():
    declared = workflow("Declared", [called_trigger(("a", "string"), ("b", "number"))], [CALLED])
    flow = caller(declared["id"], {"a": "=x", "extra": "=y"}, {})
    assert outputs(run(flow, declared)) == [[{"a": "x", "b": None}]]
    example = workflow("Example", [node(CALLED, "n8n-nodes-base.executeWorkflowTrigger", 1.1,
                                        {"inputSource": "jsonExample", "jsonExample": '{"b": 1}'})],
                       [CALLED])  # fmt: skip
    assert outputs(run(caller(example["id"], {"a": "=x"}, {}), example)) == [[{"b": None}]]
    everything = workflow("All", [node(CALLED, "n8n-nodes-base.executeWorkflowTrigger", 1.1,
                                       {"inputSource": "passthrough"})], [CALLED])  # fmt: skip
    result = run(caller(everything["id"], {"a": "=x"}, {}), everything)
    assert outputs(result) == [[{**MESSAGE["json"], "a": "x"}]]


def test_a_field_the_schema_marks_removed_is_left_out():
    everything = workflow("All", [node(CALLED, "n8n-nodes-base.executeWorkflowTrigger", 1,
                                       {})], [CALLED])  # fmt: skip
    flow = caller(everything["id"], {"a": "=x", "b": "=y"}, {})
    schema = flow["nodes"][1]["parameters"]["workflowInputs"]["schema"]
    schema[1]["removed"] = True
    assert outputs(run(flow, everything)) == [[{**MESSAGE["json"], "a": "x"}]]


def test_each_mode_calls_once_per_item_and_pairs_what_comes_back_with_its_item():
    child = greeter()
    flow = caller(child["id"], {"name": "={{ $json.who }}", "age": "={{ 1 }}"}, {"age": "number"})
    flow["nodes"][1]["parameters"]["mode"] = "each"
    items = [{"json": {"who": "Ada"}}, {"json": {"who": "Bo"}}]
    result = run(flow, child, items=items)
    produced = result.run_data["Execute Workflow"][0]["data"]["main"][0]
    assert [i["json"]["name"] for i in produced] == ["Ada", "Bo"]
    assert [i["pairedItem"] for i in produced] == [{"item": 0}, {"item": 1}]
    assert [i["metadata"]["subExecution"]["executionId"] for i in produced] == [
        "parent.1",
        "parent.2",
    ]


def test_a_failing_sub_workflow_fails_the_call_with_its_message():
    failing = workflow("Fails", [called_trigger(("n", "number")),
                                 set_node("Boom", x="={{ $json.n.toFixed(2).nope() }}")],
                       [CALLED, "Boom"])  # fmt: skip
    once = run(caller(failing["id"], {"n": "={{ 1 }}"}, {"n": "number"}), failing)
    assert (once.status, once.error_node) == ("error", "Execute Workflow")
    assert 'unsupported method "nope"' in once.error
    each = caller(failing["id"], {"n": "={{ 1 }}"}, {"n": "number"})
    each["nodes"][1]["parameters"]["mode"] = "each"
    assert run(each, failing).error.startswith("Error executing workflow with item at index 0: ")


@pytest.mark.parametrize(
    ("lent", "expected"),
    [(True, "Workflow does not exist."), (False, "no workflow store to find the sub-workflow in")],
)
def test_a_sub_workflow_that_cannot_be_found_fails_the_call_saying_why(lent, expected):
    flow = caller("nope", {}, {})
    services = Services(workflows=store()) if lent else Services()
    result = run_workflow(load_workflow(flow), [MESSAGE], services=services)
    assert (result.status, result.error_node) == ("error", "Execute Workflow")
    assert expected in result.error


def test_a_workflow_that_calls_itself_without_end_stops_at_the_depth_limit():
    flow = caller("self", {}, {})
    flow["id"] = "self"
    flow["nodes"].append(called_trigger())  # a call starts it here, the chat the first time
    flow["connections"][CALLED] = flow["connections"][CHAT]
    result = run(flow, flow)
    assert result.status == "error"
    assert f"more than {MAX_DEPTH} levels deep" in result.error


def test_the_sub_workflows_cpu_counts_against_the_callers_bound(monkeypatch):
    """CPU is spent (on a fake clock) while a mock model waits between its tokens: the caller's
    Agent spends 20 s, within its 25 s; the child's 20 s more go past them, and the caller fails
    (a child bounded on its own would have passed)."""
    monkeypatch.setattr(cpu, "PAUSE_SECONDS", 0.0)  # every checkpoint looks at the clock
    spent = [0.0]

    def spend(_seconds: float) -> None:
        spent[0] += 10.0

    slow = {"delayPerTokenMs": 1}
    child = workflow("Child", [called_trigger(("chatInput", "string")), agent(),
                               node(MOCK, "mini-n8n.lmChatMock", 1, slow), set_node("After", x="=1")],
                     [CALLED, "AI Agent", "After"], [(MOCK, "ai_languageModel", "AI Agent")])  # fmt: skip
    call = execute_workflow("Execute Workflow", child["id"], {"chatInput": "=Ada"}, {})
    flow = workflow("Caller", [chat_trigger(), agent(), node(MOCK, "mini-n8n.lmChatMock", 1, slow),
                               call],
                    [CHAT, "AI Agent", "Execute Workflow"], [(MOCK, "ai_languageModel", "AI Agent")])  # fmt: skip
    result = run(flow, child, cpu_seconds=25, cpu_clock=lambda: spent[0], sleep=spend,
                 pause=lambda: None)  # fmt: skip
    assert spent[0] == 40.0  # "You said: Ada": two waits between three tokens, in each Agent
    assert (result.status, result.error_node) == ("error", "Execute Workflow")
    assert "more than 25 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)" in result.error


def test_a_stop_of_the_caller_stops_the_sub_workflow():
    child = greeter()
    cancel = threading.Event()
    cancel.set()
    flow = load_workflow(caller(child["id"], *NAME_AND_AGE))
    services = Services(workflows=store(child))
    result = run_workflow(flow, [MESSAGE], services=services, cancel=cancel)
    assert result.status == "canceled"


def test_a_sub_workflows_agent_does_not_stream_to_the_callers_client():
    child = workflow("Agent child", [called_trigger(("chatInput", "string")), agent(), mock_model()],
                     [CALLED, "AI Agent"], [(MOCK, "ai_languageModel", "AI Agent")])  # fmt: skip
    chunks: list[dict] = []
    flow = load_workflow(caller(child["id"], {"chatInput": "={{ $json.chatInput }}"}, {}))
    result = run_workflow(flow, [MESSAGE], services=Services(workflows=store(child)),
                          hooks=Hooks().add_handler("sendChunk", chunks.append), streaming=True)  # fmt: skip
    assert outputs(result) == [[{"output": "You said: Ada"}]]
    assert chunks == []  # n8n's sub-executions have no chunk handler either


def test_a_sub_workflow_that_would_wait_fails_the_call():
    child = workflow("Waits", [called_trigger(), wait_seconds("Wait", 1)], [CALLED, "Wait"])
    result = run(caller(child["id"], {}, {}), child)
    assert result.status == "error"
    assert 'waits at "Wait"' in result.error


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ({"callerPolicy": "none"}, True),
        ({"callerPolicy": "workflowsFromAList", "callerIds": "other, x"}, True),
        ({"callerPolicy": "workflowsFromAList", "callerIds": "other, caller"}, False),
        ({"callerPolicy": "workflowsFromSameOwner"}, False),
    ],
)
def test_a_sub_workflows_caller_policy_is_kept(settings, refused):
    child = greeter()
    child["settings"].update(settings)
    flow = caller(child["id"], *NAME_AND_AGE)
    flow["id"] = "caller"
    result = run(flow, child)
    assert (result.status == "error") == refused
    if refused:
        assert f"The sub-workflow ({child['id']}) cannot be called by this workflow" in result.error


def test_a_sub_workflow_given_as_json_in_the_node_runs_too():
    flow = caller("unused", {}, {})
    parameters = flow["nodes"][1]["parameters"]
    parameters.update(source="parameter", workflowJson=__import__("json").dumps(greeter()))
    del parameters["workflowInputs"]
    result = run(flow)
    assert result.status == "success", result.error
    assert outputs(result)[0][0]["name"] is None  # nothing mapped: the trigger's null


def test_not_waiting_for_the_sub_workflow_starts_it_elsewhere_and_passes_the_items_on():
    started: list[tuple] = []

    def start(workflow, trigger, items, caller_id):
        started.append((workflow.id, trigger, items, caller_id))
        return "other-execution"

    child = greeter()
    flow = caller(child["id"], *NAME_AND_AGE, waitForSubWorkflow=False)
    result = run(flow, child, start_workflow=start)
    assert outputs(result) == [[MESSAGE["json"]]]
    assert started == [(child["id"], CALLED, [{"json": {**MESSAGE["json"], "name": "Ada", "age": 36},
                                               "pairedItem": {"item": 0}}], "parent")]  # fmt: skip
    without = run(flow, child)
    assert "cannot start a sub-workflow without waiting for it" in without.error
