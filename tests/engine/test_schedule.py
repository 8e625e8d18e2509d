"""The executor's schedule (engine/schedule.py), as n8n's v1 order: children highest on the
canvas first, a node with several inputs held until they came (or until nothing else can run),
and the held inputs kept in the plain-JSON state of a waiting execution."""

from __future__ import annotations

import json

from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.workflow import load_workflow
from tests.engine.test_chat_node import HELLO, export_13, n8n_reply

TRIGGER = "When chat message received"


def _node(name: str, type_: str, position: list[int], **parameters) -> dict:
    return {
        "id": name,
        "name": name,
        "type": type_,
        "typeVersion": {"n8n-nodes-base.merge": 3.2, "@n8n/n8n-nodes-langchain.chat": 1.3}.get(
            type_, 1
        ),
        "position": position,
        "parameters": parameters,
    }


def _link(*pairs) -> dict:
    connections: dict = {}
    for source, output, target, index in pairs:
        outputs = connections.setdefault(source, {"main": []})["main"]
        outputs.extend([] for _ in range(output + 1 - len(outputs)))
        outputs[output].append({"node": target, "type": "main", "index": index})
    return connections


def _order(run) -> list[str]:
    runs = [
        (task["executionIndex"], name) for name, tasks in run.run_data.items() for task in tasks
    ]
    return [name for _, name in sorted(runs)]


def test_children_run_highest_on_the_canvas_first_whatever_the_connection_order():
    workflow = {
        "nodes": [
            _node("Start", "n8n-nodes-base.manualTrigger", [0, 0]),
            _node("Low", "n8n-nodes-base.noOp", [200, 300]),
            _node("High", "n8n-nodes-base.noOp", [200, -300]),
            _node("Middle", "n8n-nodes-base.noOp", [200, 0]),
            _node("After low", "n8n-nodes-base.noOp", [400, 300]),
        ],
        "connections": _link(
            ("Start", 0, "Low", 0),
            ("Start", 0, "High", 0),
            ("Start", 0, "Middle", 0),
            ("Low", 0, "After low", 0),
        ),
    }
    run = run_workflow(load_workflow(workflow), [{"json": {}}])
    assert _order(run) == ["Start", "High", "Middle", "Low", "After low"]


def test_a_merge_runs_once_both_inputs_came_with_both():
    workflow = {
        "nodes": [
            _node("Start", "n8n-nodes-base.manualTrigger", [0, 0]),
            _node("A", "n8n-nodes-base.noOp", [200, -100]),
            _node("B", "n8n-nodes-base.noOp", [200, 100]),
            _node("Merge", "n8n-nodes-base.merge", [400, 0]),
        ],
        "connections": _link(
            ("Start", 0, "A", 0), ("Start", 0, "B", 0), ("A", 0, "Merge", 0), ("B", 0, "Merge", 1)
        ),
    }
    run = run_workflow(load_workflow(workflow), [{"json": {"n": 1}}])
    assert _order(run) == ["Start", "A", "B", "Merge"]
    assert [i["json"] for i in run.run_data["Merge"][0]["data"]["main"][0]] == [{"n": 1}, {"n": 1}]
    sources = run.run_data["Merge"][0]["source"]
    assert [s["previousNode"] for s in sources] == ["A", "B"]


def test_inputs_held_for_a_merge_survive_a_chat_node_wait_in_the_plain_json_state():
    """Branch A reaches the Merge, branch B's Chat node waits for the user: the Merge's first
    input is kept in the waiting state, and the resumed run merges it with the reply."""
    base = export_13()
    trigger = next(n for n in base["nodes"] if n["name"] == TRIGGER)
    workflow = {
        **base,
        "nodes": [
            trigger,
            _node("A", "n8n-nodes-base.noOp", [200, -100]),
            _node(
                "Ask",
                "@n8n/n8n-nodes-langchain.chat",
                [200, 100],
                operation="sendAndWait",
                message="Your name?",
            ),
            _node("Merge", "n8n-nodes-base.merge", [400, 0]),
        ],
        "connections": _link(
            (TRIGGER, 0, "A", 0),
            (TRIGGER, 0, "Ask", 0),
            ("A", 0, "Merge", 0),
            ("Ask", 0, "Merge", 1),
        ),
    }
    loaded = load_workflow(workflow)
    hooks = Hooks().add_handler("sendMessage", lambda message: None)
    first = run_workflow(loaded, [HELLO], hooks=hooks, execution_id="e1")
    assert first.status == "waiting"
    state = json.loads(json.dumps(first.waiting))  # what Redis keeps
    assert [i["json"] for i in state["held"]["Merge"][0]["inputs"][0]] == [HELLO["json"]]
    assert state["held"]["Merge"][0]["inputs"][1] is None
    resume = {"state": state, "reply": n8n_reply("Ada")}
    second = run_workflow(loaded, [], hooks=hooks, resume=resume, execution_id="e1")
    assert second.status == "success"
    merged = second.run_data["Merge"][0]["data"]["main"][0]
    assert [i["json"] for i in merged] == [HELLO["json"], n8n_reply("Ada")["json"]]


def test_a_state_written_before_held_inputs_existed_still_resumes():
    base = export_13()
    run = run_workflow(
        load_workflow(base), [HELLO], hooks=Hooks().add_handler("sendMessage", lambda m: None)
    )
    state = json.loads(json.dumps(run.waiting))
    state.pop("held")
    state.pop("inputs")
    state["stack"] = [
        [f["node"], f["inputs"][0], f["sources"][0]["previousNode"]] for f in state["stack"]
    ]
    resumed = run_workflow(
        load_workflow(base),
        [],
        hooks=Hooks().add_handler("sendMessage", lambda m: None),
        resume={"state": state, "reply": n8n_reply("Ada")},
    )
    assert resumed.status == "waiting"  # the next Chat node (the approval) waits in turn
    assert resumed.waiting["node"] == "Confirm"
