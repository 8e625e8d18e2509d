"""Personal agents: name, description, icon, system prompt, up to 6 suggested prompts, a model
(the OpenAI-compatible node with a credential the admin lists, or the mock) and tools (the
engine's: GET /rest/chat/tools). n8n lists them through `/models` only and updates with POST;
ours also answers `GET /agents` and takes PATCH."""

from __future__ import annotations

import uuid

from flask import Response, jsonify

from api.errors import ApiError
from api.hub import bp, generated, requests
from api.hub.conversations import bodies_object
from api.hub.dto import agent_dto
from api.hub.responders import credential_for
from api.hub.state import hub
from api.hub_identity import current_user
from core.clock import now_ms
from core.hub_records import HubAgent
from core.hub_store import HubLimit


@bp.get("/tools")
def list_tools():
    return jsonify({"data": generated.tools()})


@bp.get("/agents")
def list_agents():
    return jsonify({"data": [agent_dto(a) for a in hub().agents.list(current_user().id)]})


@bp.post("/agents")
def create_agent():
    user, h = current_user(), hub()
    fields = requests.agent_fields(bodies_object(), creating=True)
    at = now_ms()
    agent = HubAgent(
        id=str(uuid.uuid4()), owner_id=user.id, name=fields["name"],
        provider=fields["provider"], model=fields["model"], created_at=at, updated_at=at,
    )  # fmt: skip
    _apply(agent, fields)
    try:
        h.agents.add(agent)
    except HubLimit as err:
        raise ApiError(409, str(err)) from None
    return jsonify({"data": agent_dto(agent)})


@bp.get("/agents/<agent_id>")
def get_agent(agent_id: str):
    return jsonify({"data": agent_dto(_owned(agent_id))})


@bp.route("/agents/<agent_id>", methods=["PATCH", "POST"])
def update_agent(agent_id: str):
    agent = _owned(agent_id)
    fields = requests.agent_fields(bodies_object(), creating=False)
    _apply(agent, fields)
    agent.updated_at = now_ms()
    hub().agents.save(agent)
    return jsonify({"data": agent_dto(agent)})


@bp.delete("/agents/<agent_id>")
def delete_agent(agent_id: str):
    if not hub().agents.delete(current_user().id, agent_id):
        raise ApiError(404, "Agent not found")
    return Response(status=204)


def _owned(agent_id: str) -> HubAgent:
    agent = hub().agents.get(current_user().id, agent_id)
    if agent is None:
        raise ApiError(404, "Agent not found")
    return agent


def _apply(agent: HubAgent, fields: dict) -> None:
    """The fields given, then the rules: a model the admin lists, tools the engine has."""
    names = {
        "name": "name", "description": "description", "icon": "icon",
        "systemPrompt": "system_prompt", "suggestedPrompts": "suggested_prompts",
        "credentialId": "credential_id", "provider": "provider", "model": "model",
        "toolIds": "tool_ids",
    }  # fmt: skip
    for field, attr in names.items():
        if field in fields:
            setattr(agent, attr, fields[field])
    unknown = [t for t in agent.tool_ids if t not in generated.TOOLS]
    if unknown:
        raise ApiError(400, f"Unknown tool {unknown[0]}: see GET /rest/chat/tools")
    credential = credential_for(hub(), agent.provider, agent.model, agent.credential_id)
    agent.credential_id = credential["id"] if credential else None
