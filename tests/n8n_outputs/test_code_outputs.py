"""The Code node against n8n 2.41.1: each case under code/ is a workflow n8n ran (`n8n execute`
after `n8n import:workflow`, a Manual Trigger first) with the items or the error it recorded;
the same workflow here gives the same items (json and pairedItem) or the same error message.

Format, shared with the other nodes' cases: {"n8n", "workflow", "input" (the trigger's items),
"outputs": {"<node name>": [[items]]}}, and "error": {"node", "message"} for a failed run. The
Manual Trigger (no node here: a workflow starts from a chat, a webhook or the editor) is run as
a No Op that passes `input` on, as n8n's gives its one empty item.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from sandbox.isolate import InProcessRunner

CASES = sorted((Path(__file__).resolve().parent / "code").glob("*.json"))


def _here(workflow: dict) -> dict:
    workflow = copy.deepcopy(workflow)
    for node in workflow["nodes"]:
        if node["type"] == "n8n-nodes-base.manualTrigger":
            node["type"] = "n8n-nodes-base.noOp"
    return workflow


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_code_node_gives_what_n8n_gave(path):
    case = json.loads(path.read_text())
    run = run_workflow(
        load_workflow(_here(case["workflow"])),
        case["input"],
        services=Services(code_runner=InProcessRunner()),
    )
    if "error" in case:
        assert (run.status, run.error_node, run.error) == (
            "error",
            case["error"]["node"],
            case["error"]["message"],
        )
        return
    assert run.status == "success", run.error
    for name, expected in case["outputs"].items():
        assert run.run_data[name][-1]["data"]["main"] == expected, name
