"""What answers a conversation (`Responder`): the workflow to run, its Chat Trigger and response
mode, the files it takes, how its titles are made, from n8n's model reference
(`{"provider": "n8n", "workflowId"}`, `{"provider": "custom-agent", "agentId"}`, or a model of a
provider: `{"provider": "openai", "model"}` with a credential, our `{"provider": "mock"}`).

A model is offered only where the admin listed it (MINI_N8N_CHAT_HUB_MODELS, per credential;
the mock unless MINI_N8N_CHAT_HUB_MOCK_MODEL=false), and checked again on every message, as
n8n checks its allowedModels on send: a personal agent whose model was taken off the list stops
answering rather than reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.errors import ApiError
from api.hub import generated
from api.hub.state import HubRuntime
from api.hub.workflow_agents import workflow_agent
from api.hub_identity import HubUser
from core.credentials import CredentialError
from core.hub_records import ModelRef
from core.hub_settings import ENV_CREDENTIAL, MOCK_PROVIDER, OPENAI_PROVIDER
from engine.nodes.lm_chat_openai import LmChatOpenAi, model_name
from engine.workflow import Workflow

# What the hub's own agents take as files: text, which they read inline (the engine passes no
# images to a model).
TEXT_FILE_TYPES = ["text/*", "application/json", "application/xml", "application/yaml",
                   "application/x-yaml"]  # fmt: skip
MOCK_NODE = "mini-n8n.lmChatMock"


@dataclass(frozen=True)
class TitleModel:
    """How a conversation's title is asked for: the mock's rule, or an OpenAI-compatible
    model with its credential."""

    provider: str
    model: str = ""
    credential: dict[str, str] | None = None


@dataclass(frozen=True)
class Responder:
    ref: ModelRef
    name: str
    icon: dict[str, Any] | None
    raw: dict[str, Any]
    workflow: Workflow
    trigger: str
    response_mode: str
    file_types: list[str] | None  # None: it takes no files
    credential_id: str | None
    title: TitleModel
    generated: bool  # the hub built it (its memory is the hub's to fill)
    system_message: str = ""  # a built one's, sent in the trigger's item


def responder(h: HubRuntime, user: HubUser, ref: ModelRef, credential_id: str | None,
              time_zone: str | None, stored: str | None | bool = False) -> Responder:  # fmt: skip
    """What answers `ref`; `stored`: a workflow agent's JSON as the caller read it."""
    if ref.provider == "n8n":
        return _workflow_agent(h, user, ref, stored)
    if ref.provider == "custom-agent":
        agent = h.agents.get(user.id, ref.agent_id or "")
        if agent is None:
            raise ApiError(404, "Agent not found")
        credential = credential_for(h, agent.provider, agent.model, agent.credential_id)
        prompt = generated.system_prompt(time_zone, agent.system_prompt)
        wf_id = f"hub-agent-{agent.id}"
        model = generated.model_node(agent.provider, agent.model, credential)
        built = generated.agent_workflow(wf_id, agent.name, model, agent.tool_ids,
                                         h.settings.context_window)  # fmt: skip
        return _generated(ref, agent.name, agent.icon, built, credential,
                          TitleModel(agent.provider, agent.model, credential), prompt)  # fmt: skip
    if ref.provider in (OPENAI_PROVIDER, MOCK_PROVIDER):
        model_id = ref.model or ""
        credential = credential_for(h, ref.provider, model_id, credential_id)
        cred_id = credential["id"] if credential else None
        wf_id = generated.model_workflow_id(ref.provider, model_id, cred_id)
        node = generated.model_node(ref.provider, model_id, credential)
        built = generated.agent_workflow(wf_id, model_id, node, [], h.settings.context_window)
        title = TitleModel(ref.provider, model_id, credential)
        return _generated(ref, model_id, None, built, credential, title,
                          generated.system_prompt(time_zone))  # fmt: skip
    raise ApiError(400, f'Unknown provider "{ref.provider}"')


def _workflow_agent(h: HubRuntime, user: HubUser, ref: ModelRef,
                    stored: str | None | bool) -> Responder:  # fmt: skip
    agent = workflow_agent(h.rt, user, ref.workflow_id or "", stored)
    return Responder(
        ref=ref,
        name=agent.name,
        icon=agent.icon,
        raw=agent.raw,
        workflow=agent.workflow,
        trigger=agent.trigger.name,
        response_mode=agent.response_mode,
        file_types=agent.file_types,
        credential_id=None,
        title=_title_of(agent.workflow),
        generated=False,
    )


def _generated(ref: ModelRef, name: str, icon: dict[str, Any] | None,
               built: tuple[dict[str, Any], Workflow], credential: dict[str, str] | None,
               title: TitleModel, system_message: str) -> Responder:  # fmt: skip
    return Responder(
        ref=ref,
        name=name,
        icon=icon,
        raw=built[0],
        workflow=built[1],
        trigger=generated.TRIGGER,
        response_mode="streaming",
        file_types=TEXT_FILE_TYPES,
        credential_id=credential["id"] if credential else None,
        title=title,
        generated=True,
        system_message=system_message,
    )


def credential_for(h: HubRuntime, provider: str, model: str,
                credential_id: str | None) -> dict[str, str] | None:  # fmt: skip
    """The credential reference ({"id", "name"}) a model is reached with, once the admin's
    list allows it (400 naming what is not allowed)."""
    if provider == MOCK_PROVIDER:
        if not h.settings.mock_model:
            raise ApiError(400, "Provider is not enabled")
        return None
    if provider != OPENAI_PROVIDER:
        raise ApiError(400, f'Unknown provider "{provider}"')
    if not credential_id:
        raise ApiError(400, "Choose a credential for this model.")
    if not h.settings.allowed(credential_id, model):
        raise ApiError(400, f"Model {model} is not allowed")
    ref = {} if credential_id == ENV_CREDENTIAL else {"id": credential_id}
    try:
        found = h.rt.credentials.resolve("openAiApi", ref)
    except CredentialError as err:  # names the credential, never a secret
        raise ApiError(400, str(err)) from None
    if credential_id != ENV_CREDENTIAL and found.id != credential_id:
        raise ApiError(400, f'The credential "{credential_id}" is not configured.')
    return {"id": found.id, "name": found.name}


def _title_of(workflow: Workflow) -> TitleModel:
    """n8n asks the workflow's first supported model node for the title."""
    for node in workflow.nodes.values():
        if node.type == LmChatOpenAi.type and not node.disabled:
            model = model_name(node.parameters.get("model")) or ""
            if model and not model.startswith("="):
                credential = (node.credentials or {}).get("openAiApi") or {}
                return TitleModel(OPENAI_PROVIDER, model, dict(credential))
    return TitleModel(MOCK_PROVIDER)
