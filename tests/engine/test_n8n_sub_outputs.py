"""Differential cases of the Execute Workflow and Wait nodes: tests/n8n_outputs/execute-workflow/
and tests/n8n_outputs/wait/, each what n8n 2.41.1 gave for the same export and chat message
(recorded by hand on the n8n beside us: the workflow and its `subWorkflows` imported and
published, the chat message sent to its Chat Trigger, the run data read from n8n's database).

As the other differential cases: for each node but the trigger, the JSON of the items of each of
its outputs in its first run, in order (not `pairedItem`, not `binary`); a case n8n failed fails
here at the same node. A case's sub-workflows are lent as the stored workflows, and a Wait
node's wait is ended as the workers' sweep ends it when its time comes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.executor import run_workflow
from engine.run_data import Run
from engine.services import Services
from engine.workflow import Workflow, load_workflow

CASES = Path(__file__).resolve().parents[1] / "n8n_outputs"
KINDS = ("execute-workflow", "wait")
CHAT_ITEM_KEYS = ("sessionId", "action", "chatInput")


def _cases() -> list[Path]:
    return sorted(p for kind in KINDS for p in (CASES / kind).glob("*.json"))


def _input_items(given: Any) -> list[dict]:
    if isinstance(given, dict):  # a chat message, as a Chat Trigger gives it
        message = {"sessionId": "differential", "action": "sendMessage", **given}
        return [{"json": {k: message[k] for k in CHAT_ITEM_KEYS if k in message}}]
    return [{"json": item.get("json", {})} for item in given]


def _json_only(outputs: list[list[dict]]) -> list[list[Any]]:
    return [[item.get("json") for item in items or []] for items in outputs]


def run_case(case: dict) -> Run:
    stored = {w["id"]: load_workflow(w) for w in case.get("subWorkflows", [])}

    def find(workflow_id: str) -> Workflow:
        if workflow_id not in stored:
            raise LookupError(workflow_id)
        return stored[workflow_id]

    workflow = load_workflow(case["workflow"])
    services = Services(workflows=find)
    run = run_workflow(workflow, _input_items(case["input"]), services=services)
    while run.status == "waiting":  # its time came: the sweep resumes it with no reply
        resume = {"state": run.waiting, "reply": None, "expired": True}
        run = run_workflow(workflow, [], services=services, resume=resume)
    return run


@pytest.mark.parametrize("path", _cases(), ids=lambda p: str(p.relative_to(CASES).with_suffix("")))
def test_the_engine_gives_the_items_n8n_gave(path: Path):
    case = json.loads(path.read_text())
    run = run_case(case)
    trigger = case["workflow"]["nodes"][0]["name"]
    ran = {
        name: _json_only(runs[0].get("data", {}).get("main", []))
        for name, runs in run.run_data.items()
        if name != trigger and runs and runs[0].get("executionStatus") == "success"
    }
    assert ran == {name: _json_only(outputs) for name, outputs in case["outputs"].items()}
    if "error" in case:
        assert (run.status, run.error_node) == ("error", case["error"]["node"]), run.error
        assert run.error.startswith(case["error"]["message"])
    else:
        assert run.status == "success", run.error


def test_every_sub_workflow_and_wait_case_was_recorded_from_n8n_2_41_1():
    assert len(_cases()) >= 3
    for path in _cases():
        case = json.loads(path.read_text())
        assert case["n8n"] == "2.41.1", path
        assert case["outputs"] or "error" in case, path
