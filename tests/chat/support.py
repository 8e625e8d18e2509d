"""What the chat tests share: the calculator chat with trigger edits, the basic-auth login in the
test credentials file."""

from __future__ import annotations

import copy

from tests.e2e.deployment import fresh_ids
from tests.workflows import REDIS_CHAT, example, node

TRIGGER = "When chat message received"
ANSWER_84 = "Based on the tools: Calculator returned 84."
BASIC_USER, BASIC_PASSWORD = "ada", "correct horse"
BASIC_CREDENTIAL = {"id": "chatLogin1", "name": "Chat login"}


def chat_workflow(options: dict | None = None, delay_ms: float = 0, **trigger_params) -> dict:
    """A fresh copy (new ids, new URL) of the calculator chat; `options` are merged into the
    trigger's options, `trigger_params` replace its top-level parameters."""
    workflow = fresh_ids(copy.deepcopy(example(REDIS_CHAT)))
    trigger = node(workflow, TRIGGER)
    trigger["parameters"].update(trigger_params)
    trigger["parameters"]["options"].update(options or {})
    node(workflow, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = delay_ms
    return workflow


def trigger_output(record: dict) -> dict:
    """The item the Chat Trigger produced in an execution record."""
    return record["runData"][TRIGGER][0]["data"]["main"][0][0]
