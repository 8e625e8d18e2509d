"""Workflow agents: active workflows whose Chat Trigger (typeVersion 1.2 or later) has
`availableInChat`, as n8n's Chat Hub finds them, with the agent's name, description, icon,
suggested prompts and file rules read from the trigger.

n8n's conditions (chat-hub-workflow.service): one Chat Trigger, `availableInChat`, response mode
streaming, lastNode or responseNodes (not a Respond to Webhook node's), and every AI Agent at
typeVersion 2.2 or later. A workflow that breaks one is left out of the list, and a message to
it is refused naming the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from api.errors import ApiError
from api.hub_identity import HubUser, may_use_workflow_agent
from core.workflow_store import WorkflowNotFound
from engine.nodes.agent import Agent
from engine.nodes.chat_trigger import ChatSettings, ChatTrigger, chat_settings
from engine.workflow import Node, Workflow

MIN_TRIGGER_VERSION = 1.2  # n8n's CHAT_TRIGGER_NODE_MIN_VERSION
MIN_AGENT_VERSION = 2.2
HUB_MODES = ("streaming", "lastNode", "responseNodes")
DEFAULT_ICON = {"type": "icon", "value": "bot"}


@dataclass(frozen=True)
class WorkflowAgent:
    raw: dict[str, Any]
    workflow: Workflow
    trigger: Node
    chat: ChatSettings

    @property
    def name(self) -> str:
        given = str(self.chat.params.get("agentName") or "").strip()
        return given or self.workflow.name or self.workflow.id

    @property
    def description(self) -> str | None:
        return str(self.chat.params.get("agentDescription") or "") or None

    @property
    def icon(self) -> dict[str, Any]:
        return icon_of(self.chat.params.get("agentIcon")) or dict(DEFAULT_ICON)

    @property
    def suggested_prompts(self) -> list[dict[str, Any]]:
        group = self.chat.params.get("suggestedPrompts") or {}
        rows = group.get("prompts") if isinstance(group, dict) else None
        rows = rows if isinstance(rows, list) else [rows] if isinstance(rows, dict) else []
        prompts = []
        for row in rows:
            text = str(row.get("text") or "").strip() if isinstance(row, dict) else ""
            if text:
                icon = icon_of(row.get("icon"))
                prompts.append({"text": text, **({"icon": icon} if icon else {})})
        return prompts

    @property
    def file_types(self) -> list[str] | None:
        """The MIME patterns its messages' files may have; None: it takes no files."""
        if self.chat.options.get("allowFileUploads") is not True:
            return None
        return self.chat.allowed_file_types

    @property
    def response_mode(self) -> str:
        return self.chat.response_mode


def icon_of(value: Any) -> dict[str, Any] | None:
    """An `{"type": "icon"|"emoji", "value"}` icon (the editor may have saved it as JSON text)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or value.get("type") not in ("icon", "emoji"):
        return None
    if not isinstance(value.get("value"), str) or not value["value"]:
        return None
    return {"type": value["type"], "value": value["value"]}


def workflow_agents(rt, user: HubUser) -> list[WorkflowAgent]:
    """The workflow agents `user` may chat with, by name."""
    found = []
    for raw in rt.workflows.list():
        if raw.get("active") is not True or not may_use_workflow_agent(user, raw):
            continue
        try:
            found.append(_agent(*rt.workflows.load(str(raw.get("id")))))
        except (ApiError, WorkflowNotFound):
            continue
    return sorted(found, key=lambda a: (a.name.lower(), a.workflow.id))


def workflow_agent(rt, user: HubUser, workflow_id: str,
                   stored: str | None | bool = False) -> WorkflowAgent:  # fmt: skip
    """The workflow agent to answer a message: 404 when there is none the user may use, 400
    naming the rule it breaks. `stored`: its JSON as the caller read it (False: read here)."""
    try:
        if stored is False:
            raw, workflow = rt.workflows.load(workflow_id)
        else:
            raw, workflow = rt.workflows.parsed(workflow_id, stored or None)
    except (WorkflowNotFound, ValueError):
        raise ApiError(404, "Workflow not found") from None
    if not may_use_workflow_agent(user, raw):
        raise ApiError(404, "Workflow not found")
    if raw.get("active") is not True:
        raise ApiError(400, "The workflow is not active: activate it to chat with it.")
    return _agent(raw, workflow)


def _agent(raw: dict[str, Any], workflow: Workflow) -> WorkflowAgent:
    triggers = [n for n in workflow.nodes.values() if n.type == ChatTrigger.type and not n.disabled]
    if len(triggers) != 1:
        raise ApiError(400, "The workflow must have exactly one Chat Trigger to chat with it.")
    trigger = triggers[0]
    chat = chat_settings(trigger)
    if trigger.type_version < MIN_TRIGGER_VERSION:
        raise ApiError(
            400, f"The Chat Trigger must be version {MIN_TRIGGER_VERSION} or later (it is "
            f"{trigger.type_version:g}): replace it with a new one.",
        )  # fmt: skip
    if chat.params.get("availableInChat") is not True:
        raise ApiError(400, "The workflow is not available in the Chat Hub (availableInChat).")
    if chat.response_mode not in HUB_MODES:
        raise ApiError(
            400, "The Chat Trigger's response mode must be Streaming, When Last Node Finishes "
            "or Using Response Nodes to chat with it in the hub.",
        )  # fmt: skip
    for node in workflow.nodes.values():
        if node.type == Agent.type and node.type_version < MIN_AGENT_VERSION:
            raise ApiError(400, f'The AI Agent "{node.name}" must be version 2.2 or later.')
    return WorkflowAgent(raw, workflow, trigger, chat)
