"""Workflow fixtures: the bundled examples, loaded as JSON, with small edits for a test."""

from __future__ import annotations

import copy
import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workflows"
REDIS_CHAT = "chat-calculator-redis.json"
SIMPLE_CHAT = "chat-calculator-simple-memory.json"
GREETING = "webhook-greeting-last-node.json"


def example(name: str) -> dict:
    return json.loads((EXAMPLES / name).read_text())


def node(workflow: dict, name: str) -> dict:
    return next(n for n in workflow["nodes"] if n["name"] == name)


def with_model_delay(workflow: dict, delay_ms: float) -> dict:
    workflow = copy.deepcopy(workflow)
    node(workflow, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = delay_ms
    return workflow


def with_response_mode(workflow: dict, mode: str) -> dict:
    workflow = copy.deepcopy(workflow)
    trigger = node(workflow, "When chat message received")
    trigger["parameters"].setdefault("options", {})["responseMode"] = mode
    return workflow


def webhook_to_sets(values: list[str], count: int = 1, path: str = "bounded") -> dict:
    """Webhook (lastNode) -> `count` Set nodes in a chain, each assigning `values` (expressions)
    to fields v0, v1, ...: a workflow whose work is all in its expressions."""
    data = example(GREETING)
    webhook, template = data["nodes"]
    webhook["parameters"]["path"] = path
    assignments = [
        {"id": f"a{i}", "name": f"v{i}", "value": value, "type": "string"}
        for i, value in enumerate(values)
    ]
    template["parameters"]["assignments"]["assignments"] = assignments
    names = [f"Set {i}" for i in range(count)]
    data["nodes"] = [webhook] + [
        {**copy.deepcopy(template), "id": f"set-{i}", "name": name, "position": [240 * i, 0]}
        for i, name in enumerate(names, start=1)
    ]
    chain = ["Webhook", *names]
    data["connections"] = {
        source: {"main": [[{"node": target, "type": "main", "index": 0}]]}
        for source, target in zip(chain, chain[1:], strict=False)
    }
    return data
