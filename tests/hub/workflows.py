"""The hub's workflow agents: the calculator chat as "Support bot" (Chat Trigger 1.4,
availableInChat, Redis memory, Calculator, AI Agent 3.1), and n8n's Chat-node export as an
agent that asks and takes an approval."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tests.e2e.deployment import fresh_ids
from tests.workflows import REDIS_CHAT, example, node

EXPORTS = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports"
TRIGGER = "When chat message received"


def support_bot(name: str = "Support bot", files: str | None = "text/plain",
                delay_ms: float = 0, mode: str | None = None, share: object = "all") -> dict:  # fmt: skip
    """`files`: the MIME types it takes (None: no files); `mode`: the response mode (None:
    the hub's default, streaming); `share`: the chat users it is shared with."""
    workflow = fresh_ids(example(REDIS_CHAT))
    workflow["name"] = f"{name} workflow"
    if share is not None:
        workflow["settings"]["chatHubShare"] = share
    trigger = node(workflow, TRIGGER)
    trigger["typeVersion"] = 1.4
    params = trigger["parameters"]
    params.update(public=False, availableInChat=True, agentName=name,
                  agentDescription="Answers arithmetic and remembers names.",
                  agentIcon={"type": "emoji", "value": "🤖"},
                  suggestedPrompts={"prompts": [{"text": "What is 19 * 23?"}]})  # fmt: skip
    options = {"loadPreviousSession": "memory"}
    if files is not None:
        options.update(allowFileUploads=True, allowedFilesMimeTypes=files)
    if mode is not None:
        options["responseMode"] = mode
    params["options"] = options
    node(workflow, "AI Agent")["typeVersion"] = 3.1
    node(workflow, "Mock Chat Model")["parameters"]["delayPerTokenMs"] = delay_ms
    return workflow


def asking_agent() -> dict:
    """n8n 2.41.1's export of Chat nodes 1.3 (a message, a question, an approval), in the hub."""
    workflow = fresh_ids(json.loads((EXPORTS / "chat-nodes-1-3.json").read_text())[0])
    trigger = workflow["nodes"][0]
    trigger["parameters"].update(availableInChat=True, agentName="Asking agent")
    workflow.setdefault("settings", {})["chatHubShare"] = "all"
    return workflow


def with_openai(workflow: dict, credential: dict, model: str = "gpt-test") -> dict:
    """The workflow's mock model replaced by the OpenAI-compatible node and `credential`."""
    workflow = copy.deepcopy(workflow)
    mock = node(workflow, "Mock Chat Model")
    mock.update(type="@n8n/n8n-nodes-langchain.lmChatOpenAi", typeVersion=1.2,
                parameters={"model": {"__rl": True, "mode": "list", "value": model}},
                credentials={"openAiApi": credential})  # fmt: skip
    return workflow
