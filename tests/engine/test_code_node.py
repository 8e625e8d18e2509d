"""The Code node (n8n-nodes-base.code) run whole in-process, its JavaScript on a V8 isolate of
this process (sandbox/isolate.py InProcessRunner): items in and out in both modes, n8n's
globals, n8n's words for wrong return shapes, and the limits (time, memory, the execution's
CPU), each asserted by the error it ends with, never by how long it took."""

from __future__ import annotations

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from sandbox.isolate import InProcessRunner

ITEMS = [{"json": {"name": "Ada", "n": 1}}, {"json": {"name": "Bob", "n": 2}}]


def workflow(code: str, mode: str = "runOnceForAllItems", **params) -> dict:
    """Start (No Op) -> Before (Set: greeting) -> Code."""
    return {
        "name": "Code test",
        "id": "wf-code",
        "nodes": [
            {"id": "1", "name": "Start", "type": "n8n-nodes-base.noOp", "typeVersion": 1,
             "position": [0, 0], "parameters": {}},
            {"id": "2", "name": "Before", "type": "n8n-nodes-base.set", "typeVersion": 3.4,
             "position": [200, 0], "parameters": {"includeOtherFields": True, "assignments": {
                 "assignments": [{"name": "greeting", "value": "=hi {{ $json.name }}",
                                  "type": "string"}]}}},
            {"id": "3", "name": "Code", "type": "n8n-nodes-base.code", "typeVersion": 2,
             "position": [400, 0], "parameters": {"jsCode": code, "mode": mode, **params}},
        ],
        "connections": {
            "Start": {"main": [[{"node": "Before", "type": "main", "index": 0}]]},
            "Before": {"main": [[{"node": "Code", "type": "main", "index": 0}]]},
        },
    }  # fmt: skip


def run(code: str, mode: str = "runOnceForAllItems", runner=None, items=ITEMS, **services):
    runner = runner or InProcessRunner(timeout_seconds=5.0, memory_mb=64)
    return run_workflow(
        load_workflow(workflow(code, mode)),
        items,
        services=Services(code_runner=runner, **services),
        execution_id="exec-1",
    )


def output(result) -> list[dict]:
    assert result.status == "success", result.error
    return result.run_data["Code"][-1]["data"]["main"][0]


def test_all_items_mode_returns_the_items_the_code_returns():
    result = run("return $input.all().map(i => ({json: {upper: i.json.name.toUpperCase()}}))")
    assert output(result) == [  # paired with the input item at their index, as n8n does
        {"json": {"upper": "ADA"}, "pairedItem": {"item": 0}},
        {"json": {"upper": "BOB"}, "pairedItem": {"item": 1}},
    ]


def test_plain_objects_and_a_single_object_are_wrapped_in_json_as_n8n_normalizes():
    assert [i["json"] for i in output(run("return [{a: 1}, {a: 2}]"))] == [{"a": 1}, {"a": 2}]
    assert output(run("return {a: 1}")) == [{"json": {"a": 1}, "pairedItem": {"item": 0}}]
    assert output(run("return null")) == []


def test_ns_default_code_adds_a_field_to_every_item_through_input_all():
    result = run_workflow(
        load_workflow({**workflow(""), "nodes": [
            *workflow("")["nodes"][:2],
            {"id": "3", "name": "Code", "type": "n8n-nodes-base.code", "typeVersion": 2,
             "position": [0, 0], "parameters": {}},
        ]}),
        ITEMS,
        services=Services(code_runner=InProcessRunner()),
    )  # fmt: skip
    assert [item["json"]["myNewField"] for item in output(result)] == [1, 1]


def test_each_item_mode_runs_once_per_item_with_its_json_and_pairs_it():
    code = "$input.item.json.double = $json.n * 2; return $input.item;"
    assert output(run(code, "runOnceForEachItem")) == [
        {"json": {"name": "Ada", "n": 1, "greeting": "hi Ada", "double": 2},
         "pairedItem": {"item": 0}},
        {"json": {"name": "Bob", "n": 2, "greeting": "hi Bob", "double": 4},
         "pairedItem": {"item": 1}},
    ]  # fmt: skip


def test_each_item_mode_drops_an_item_whose_code_returns_null():
    code = "if ($json.n === 1) return null; return {json: {kept: $json.name}};"
    assert output(run(code, "runOnceForEachItem")) == [
        {"json": {"kept": "Bob"}, "pairedItem": {"item": 1}}
    ]


def test_legacy_items_json_and_named_nodes_are_there():
    code = """
    return [{json: {
      count: items.length,
      first: $json.name,
      start: $('Start').first().json.name,
      startLast: $('Start').last().json.name,
      before: $('Before').all().map(i => i.json.greeting),
      paired: $('Before').item.json.greeting,
      node: $node["Start"].json.name,
      executed: $('Start').isExecuted,
    }}]"""
    assert output(run(code))[0]["json"] == {
        "count": 2,
        "first": "Ada",
        "start": "Ada",
        "startLast": "Bob",
        "before": ["hi Ada", "hi Bob"],
        "paired": "hi Ada",
        "node": "Ada",
        "executed": True,
    }


def test_execution_workflow_and_dates_are_there():
    code = """return [{json: {
      execution: $execution.id, mode: $execution.mode, workflow: $workflow.name,
      workflowId: $workflow.id, today: $today.toISODate() === $now.toISODate(),
      midnight: $today.hour, isLuxon: DateTime.isDateTime($now),
    }}]"""
    assert output(run(code))[0]["json"] == {
        "execution": "exec-1",
        "mode": "test",
        "workflow": "Code test",
        "workflowId": "wf-code",
        "today": True,
        "midnight": 0,
        "isLuxon": True,
    }


def test_console_log_lines_go_with_the_nodes_run_formatted_as_n8n_does():
    result = run("console.log('hello', {a: 1}, [2]); console.warn('dropped'); return []")
    assert result.run_data["Code"][-1]["console"] == ["'hello' {\"a\":1} [2]"]


def test_a_thrown_error_fails_the_node_with_its_message():
    result = run("const a = 1;\nthrow new Error('no luck');")
    assert result.status == "error"
    assert (result.error, result.error_node) == ("no luck [line 2]", "Code")


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("return 5", "Code doesn't return items properly"),
        ("return [1, 2]", "Code doesn't return items properly"),
        ("", "Code doesn't return items properly"),
        ("return [{json: {a: 1}}, {a: 2}]", "Unknown top-level item key: a [item 1]"),
        ("return [{json: 1}]", "A 'json' property isn't an object [item 0]"),
        ("return [{json: {}, extra: 1}]", "Invalid output format [item 0]"),
        ("return $('Nowhere').all()", "Referenced node doesn't exist"),
        ("return require('fs')", "Module 'fs' is disallowed"),
    ],
)
def test_wrong_return_shapes_fail_with_ns_words(code, message):
    result = run(code)
    assert (result.status, result.error) == ("error", message)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("return 5", "A 'json' property isn't an object [item 0]"),
        ("return [$json]", "A 'json' property isn't an object [item 0]"),
        ("return $input.all()", "Can't use .all() here [line 1, for item 0]"),
        (
            "// first\nconst x = $input.first();\nreturn x",
            "Can't use .first() here [line 2, for item 0]",
        ),
    ],
)
def test_wrong_shapes_in_each_item_mode_fail_with_ns_words(code, message):
    result = run(code, "runOnceForEachItem")
    assert (result.status, result.error) == ("error", message)


def test_python_is_refused_at_import_naming_the_node():
    with pytest.raises(WorkflowValidationError, match="Python in the Code node is not supported"):
        load_workflow(workflow("print(1)", language="pythonNative"))


def test_without_a_runner_the_node_fails_saying_so():
    result = run_workflow(load_workflow(workflow("return []")), ITEMS, services=Services())
    assert result.status == "error"
    assert "no JavaScript runner" in result.error


def test_a_loop_that_never_ends_is_stopped_by_the_time_limit():
    runner = InProcessRunner(timeout_seconds=0.3, memory_mb=64)
    result = run("console.log('looping'); while (true) {}", runner=runner)
    assert (result.status, result.error) == (
        "error",
        "Task execution timed out after 0.3 seconds (MINI_N8N_CODE_TIMEOUT)",
    )
    assert result.run_data["Code"][-1]["console"] == ["'looping'"]


def test_code_that_allocates_past_its_memory_is_stopped():
    result = run("const all = []; for (;;) all.push({n: Math.random(), s: 'x' + Math.random()})")
    assert result.status == "error"
    assert result.error.startswith("Node ran out of memory")


def test_a_spinning_code_node_is_bounded_by_the_executions_cpu_time():
    """The isolate's time cap is what the execution's CPU bound leaves (0.2 s here, well under
    the node's own 30 s), and the run's cost is charged to the execution, which stops."""
    runner = InProcessRunner(timeout_seconds=30.0, memory_mb=64)
    result = run("while (true) {}", runner=runner, cpu_seconds=0.2)
    assert result.status == "error"
    assert result.error == (
        "The execution used more than 0.2 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)."
    )


def test_each_run_has_a_fresh_isolate_so_nothing_of_one_run_reaches_the_next():
    runner = InProcessRunner()
    run("globalThis.secret = 'kept?'; Object.prototype.leak = 1; return []", runner=runner)
    code = "return [{json: {secret: typeof secret, leak: ({}).leak === undefined}}]"
    assert output(run(code, runner=runner))[0]["json"] == {"secret": "undefined", "leak": True}
