"""The workflow agents of the page's tests: the bundled Support bot example (Chat Trigger 1.4,
availableInChat, Redis memory, Calculator), under a fresh id each, as the test needs it."""

from __future__ import annotations

from tests.e2e.deployment import fresh_ids
from tests.workflows import example, node

SUPPORT_BOT = "chat-hub-support-bot.json"
TRIGGER = "When chat message received"


def support_bot(delay_ms: float = 0, files: bool = True, name: str = "Support bot") -> dict:
    workflow = fresh_ids(example(SUPPORT_BOT))
    node(workflow, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = delay_ms
    params = node(workflow, TRIGGER)["parameters"]
    params["agentName"] = name
    if not files:
        params["options"].pop("allowFileUploads")
        params["options"].pop("allowedFilesMimeTypes")
    return workflow


def key(workflow: dict) -> str:
    """The picker's value for a workflow agent."""
    return f"n8n:{workflow['id']}"
