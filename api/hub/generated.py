"""The workflows the hub builds on the fly, as n8n's Chat Hub does: a personal agent or a model
chatted with directly runs as Chat Trigger → AI Agent (typeVersion 3.1, streaming) with its
model, a Redis Chat Memory keyed by the conversation (which the hub fills with the branch shown
before each run: api/hub/branch_memory.py) and, for an agent, its tools. The title of a
conversation asks the same model through one more (api/hub/titles.py).

Nothing is stored as a workflow: the JSON travels as the execution's workflow version (a
snapshot, core/workflow_snapshots.py) under an id of its own, `hub-agent-<agentId>` or
`hub-model-<digest>`, whose executions REST lists as any workflow's. What changes from one
message to the next (the system message, which holds the user's date and time) travels in the
trigger's item (`$json.systemMessage`), so an agent's workflow is one version, built once
(`agent_workflow` hands out the same object for the same agent: one snapshot, never re-encoded).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.hub_settings import MOCK_PROVIDER
from core.jsontext import dumps
from engine.workflow import Workflow, load_workflow

TRIGGER, AGENT, MODEL, MEMORY = "When chat message received", "AI Agent", "Chat Model", "Memory"
CALCULATOR_TOOL_ID = "00000000-0000-4000-8000-00000000ca1c"
# The tools a personal agent may have: the engine's own (n8n's are node definitions per user).
TOOLS: dict[str, dict[str, Any]] = {
    CALCULATOR_TOOL_ID: {
        "id": CALCULATOR_TOOL_ID,
        "name": "Calculator",
        "type": "@n8n/n8n-nodes-langchain.toolCalculator",
        "typeVersion": 1,
        "parameters": {},
    }
}
BASE_PROMPT = "You are a helpful assistant."
# The Agent's system message: the item's, so the workflow stays one version across messages.
SYSTEM_MESSAGE = "={{ $json.systemMessage }}"
MAX_BUILT = 1024
_BUILT: dict[str, tuple[dict[str, Any], Workflow]] = {}
# A generated memory list outlives no conversation for long: the hub writes it before each run.
MEMORY_TTL_SECONDS = 7 * 24 * 3600


def tools() -> list[dict[str, Any]]:
    """n8n's `GET /rest/chat/tools` answer: each tool's node definition, enabled."""
    return [{"definition": dict(t), "enabled": True} for t in TOOLS.values()]


def model_workflow_id(provider: str, model: str, credential_id: str | None) -> str:
    digest = hashlib.sha1(f"{provider}\n{model}\n{credential_id or ''}".encode()).hexdigest()
    return f"hub-model-{digest[:16]}"


def agent_workflow(
    workflow_id: str, name: str, model: dict[str, Any], tool_ids: list[str], window: int
) -> tuple[dict[str, Any], Workflow]:
    """Chat Trigger → AI Agent with `model` (a node from `model_node`), a Redis Chat Memory of
    `window` turns (none for 0) and the tools named by `tool_ids`; its system message is the
    item's `systemMessage`. Its JSON and the workflow parsed from it: the same objects for the
    same arguments (the last MAX_BUILT)."""
    key = dumps([workflow_id, name, model, tool_ids, window])
    built = _BUILT.get(key)
    if built is None:
        if len(_BUILT) >= MAX_BUILT:
            _BUILT.clear()
        raw = _build(workflow_id, name, model, tool_ids, window)
        built = _BUILT[key] = (raw, load_workflow(raw))
    return built


def _build(workflow_id: str, name: str, model: dict[str, Any], tool_ids: list[str],
           window: int) -> dict[str, Any]:  # fmt: skip
    nodes = [
        _node(TRIGGER, "@n8n/n8n-nodes-langchain.chatTrigger", 1.4, [0, 0], {
            "public": False, "path": f"hub/{workflow_id}",
            "options": {"responseMode": "streaming"},
        }),
        _node(AGENT, "@n8n/n8n-nodes-langchain.agent", 3.1, [260, 0], {
            "promptType": "auto", "options": {"systemMessage": SYSTEM_MESSAGE},
        }),
        {**model, "name": MODEL, "id": f"{workflow_id}-model", "position": [160, 220]},
        _node(MEMORY, "@n8n/n8n-nodes-langchain.memoryRedisChat", 1.5, [310, 220], {
            "sessionTTL": MEMORY_TTL_SECONDS, "contextWindowLength": window,
        }),
    ]  # fmt: skip
    connections: dict[str, Any] = {
        TRIGGER: {"main": [[_to(AGENT, "main")]]},
        MODEL: {"ai_languageModel": [[_to(AGENT, "ai_languageModel")]]},
        MEMORY: {"ai_memory": [[_to(AGENT, "ai_memory")]]},
    }
    if window <= 0:  # no memory: a title asks once
        nodes = [n for n in nodes if n["name"] != MEMORY]
        connections.pop(MEMORY)
    for index, tool_id in enumerate(tool_ids):
        tool = TOOLS[tool_id]
        tool_name = str(tool["name"]) if index == 0 else f"{tool['name']} {index + 1}"
        nodes.append(
            _node(
                tool_name,
                tool["type"],
                tool["typeVersion"],
                [460 + 120 * index, 220],
                dict(tool["parameters"]),
            )  # fmt: skip
        )
        connections[tool_name] = {"ai_tool": [[_to(AGENT, "ai_tool")]]}
    return {
        "id": workflow_id,
        "name": name,
        "nodes": nodes,
        "connections": connections,
        "active": False,
        "settings": {"executionOrder": "v1"},
    }


def model_node(provider: str, model: str, credential: dict[str, str] | None) -> dict[str, Any]:
    """The model sub-node: the mock, or the OpenAI-compatible node with its credential."""
    if provider == MOCK_PROVIDER:
        return {"type": "mini-n8n.lmChatMock", "typeVersion": 1, "parameters": {}}
    return {
        "type": "@n8n/n8n-nodes-langchain.lmChatOpenAi",
        "typeVersion": 1.2,
        "parameters": {"model": {"__rl": True, "mode": "list", "value": model}, "options": {}},
        "credentials": {"openAiApi": dict(credential or {})},
    }


def system_prompt(time_zone: str | None, instructions: str = "") -> str:
    """n8n's base prompt for the hub's own agents: who it is and the user's date and time; a
    personal agent's instructions follow it."""
    try:
        zone = ZoneInfo(time_zone) if time_zone else None
    except (ZoneInfoNotFoundError, ValueError):
        zone = None
    now = datetime.now(zone).astimezone(zone)
    where = f" ({time_zone})" if zone is not None else ""
    prompt = f"{BASE_PROMPT}\nThe user's current date and time is {now.isoformat()}{where}."
    if instructions.strip():
        quoted = "\n".join(f"> {line}" for line in instructions.strip().splitlines())
        prompt += f"\n\n## Instructions from the user\n{quoted}"
    return prompt


def _node(name: str, type_: str, version: float, position: list[int],
          parameters: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    return {"id": name, "name": name, "type": type_, "typeVersion": version,
            "position": position, "parameters": parameters}  # fmt: skip


def _to(target: str, kind: str) -> dict[str, Any]:
    return {"node": target, "type": kind, "index": 0}
