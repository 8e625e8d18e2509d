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
