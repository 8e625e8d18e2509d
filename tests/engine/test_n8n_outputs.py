"""The differential tests: every case under tests/n8n_outputs/<node>/<case>.json runs here and
must give what n8n 2.41.1 gave for the same export and input (recorded by
scripts/record-n8n-outputs; how to add a case: CONTRIBUTING.md, "Adding a differential case").

Compared, for each node but the trigger: whether it ran, and the JSON of the items of each of
its outputs in its first run, in order. Not compared: `pairedItem` (n8n's trigger stand-in, a
Code node, pairs its items where the engine's trigger does not) and `binary`. A case that
failed on n8n ("error") must fail here at the same node, and the nodes that ran before it must
give the same items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.executor import run_workflow
from engine.workflow import load_workflow

CASES = Path(__file__).resolve().parents[1] / "n8n_outputs"
CHAT_ITEM_KEYS = ("sessionId", "action", "chatInput")


def _cases() -> list[Path]:
    return sorted(CASES.glob("*/*.json"))


def input_items(given: Any) -> list[dict]:
    """The items the trigger hands on: the case's items, or a chat message as a Chat Trigger
    gives it (what scripts/record-n8n-outputs has its stand-in return)."""
    if isinstance(given, dict):
        message = {"sessionId": "differential", "action": "sendMessage", **given}
        return [{"json": {k: message[k] for k in CHAT_ITEM_KEYS if k in message}}]
    return [{"json": item.get("json", {})} for item in given]


def _json_only(outputs: list[list[dict]]) -> list[list[Any]]:
    return [[item.get("json") for item in items or []] for items in outputs]


@pytest.mark.parametrize("path", _cases(), ids=lambda p: str(p.relative_to(CASES).with_suffix("")))
def test_the_engine_gives_the_items_n8n_gave(path: Path):
    case = json.loads(path.read_text())
    workflow = load_workflow(case["workflow"])
    run = run_workflow(workflow, input_items(case["input"]))
    trigger = run.run_data and next(iter(run.run_data))
    ran = {
        name: _json_only(runs[0].get("data", {}).get("main", []))
        for name, runs in run.run_data.items()
        if name != trigger and runs and runs[0].get("executionStatus") == "success"
    }
    expected = {name: _json_only(outputs) for name, outputs in case["outputs"].items()}
    assert ran == expected
    if "error" in case:
        assert (run.status, run.error_node) == ("error", case["error"]["node"]), run.error
    else:
        assert run.status == "success", run.error


def test_every_case_names_its_n8n_version_and_has_been_recorded():
    assert _cases(), "no differential case found"
    for path in _cases():
        case = json.loads(path.read_text())
        assert case["n8n"] == "2.41.1", path
        assert case["outputs"] or "error" in case, f"{path}: run scripts/record-n8n-outputs"
