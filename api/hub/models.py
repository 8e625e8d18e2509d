"""`POST /rest/chat/models`: what the picker offers, per provider, as n8n's ChatModelsResponse
(`{<provider>: {"models": [ChatModelDto, ...]}}`): workflow agents (`n8n`), personal agents
(`custom-agent`), the models the admin lists for each OpenAI-compatible credential (`openai`,
each entry naming its `credentialId`: ours) and the mock model (`mock`: ours). n8n's other
providers are there, empty, so a client that reads them finds them.

Body `{"credentials": {"openai": "<credential id>" | null}}`: a credential id narrows `openai`
to that credential's models; none lists every listed credential's."""

from __future__ import annotations

from typing import Any

from flask import jsonify

from api.errors import ApiError
from api.hub import bp
from api.hub.conversations import bodies_object
from api.hub.dto import iso
from api.hub.responders import TEXT_FILE_TYPES
from api.hub.state import HubRuntime, hub
from api.hub.workflow_agents import workflow_agents
from api.hub_identity import HubUser, current_user
from core.credentials import CredentialError
from core.hub_settings import ENV_CREDENTIAL, MOCK_MODEL, MOCK_PROVIDER, OPENAI_PROVIDER

N8N_PROVIDERS = (
    "openai", "anthropic", "google", "azureOpenAi", "azureEntraId", "ollama", "awsBedrock",
    "vercelAiGateway", "xAiGrok", "groq", "openRouter", "deepSeek", "cohere", "mistralCloud",
    "nvidia", "n8n", "custom-agent",
)  # fmt: skip
TEXT_TYPES = ",".join(TEXT_FILE_TYPES)


@bp.post("/models")
def list_models():
    body = bodies_object()
    credentials = body.get("credentials") or {}
    if not isinstance(credentials, dict):
        raise ApiError(400, '"credentials" must be an object of credential ids by provider')
    h, user = hub(), current_user()
    answer: dict[str, Any] = {p: {"models": []} for p in N8N_PROVIDERS}
    answer["n8n"]["models"] = _workflow_agents(h, user)
    answer["custom-agent"]["models"] = _personal_agents(h, user)
    answer[OPENAI_PROVIDER] = _openai(h, credentials.get(OPENAI_PROVIDER))
    answer[MOCK_PROVIDER] = {"models": [_mock()] if h.settings.mock_model else []}
    return jsonify({"data": answer})


def model_dto(model: dict[str, Any], name: str, **extra: Any) -> dict[str, Any]:
    files = extra.pop("files", None)
    return {
        "model": model,
        "name": name,
        "description": extra.pop("description", None),
        "icon": extra.pop("icon", None),
        "updatedAt": extra.pop("updatedAt", None),
        "createdAt": extra.pop("createdAt", None),
        "metadata": {
            "allowFileUploads": files is not None,
            "allowedFilesMimeTypes": ",".join(files or []),
            "capabilities": {"functionCalling": extra.pop("functionCalling", True)},
            "available": True,
        },
        "groupName": None,
        "groupIcon": None,
        **extra,
    }


def _workflow_agents(h: HubRuntime, user: HubUser) -> list[dict[str, Any]]:
    return [
        model_dto(
            {"provider": "n8n", "workflowId": a.workflow.id},
            a.name,
            description=a.description,
            icon=a.icon,
            files=a.file_types,
            functionCalling=False,
            suggestedPrompts=a.suggested_prompts,
        )  # fmt: skip
        for a in workflow_agents(h.rt, user)
    ]


def _personal_agents(h: HubRuntime, user: HubUser) -> list[dict[str, Any]]:
    return [
        model_dto(
            {"provider": "custom-agent", "agentId": a.id},
            a.name,
            description=a.description,
            icon=a.icon,
            files=TEXT_FILE_TYPES,
            createdAt=iso(a.created_at),
            updatedAt=iso(a.updated_at),
            suggestedPrompts=a.suggested_prompts,
        )  # fmt: skip
        for a in h.agents.list(user.id)
    ]


def _openai(h: HubRuntime, only: Any) -> dict[str, Any]:
    models = []
    for credential_id, names in h.settings.models.items():
        if only and only != credential_id:
            continue
        if not _configured(h, credential_id):
            continue
        models += [
            model_dto(
                {"provider": OPENAI_PROVIDER, "model": name},
                name,
                files=TEXT_FILE_TYPES,
                credentialId=credential_id,
            )  # fmt: skip
            for name in names
        ]
    return {"models": models}


def _configured(h: HubRuntime, credential_id: str) -> bool:
    try:
        store = h.rt.credentials
    except CredentialError:
        return False
    if credential_id == ENV_CREDENTIAL:
        return store.has_type("openAiApi")
    return any(c["id"] == credential_id and c["type"] == "openAiApi" for c in store.redacted())


def _mock() -> dict[str, Any]:
    return model_dto({"provider": MOCK_PROVIDER, "model": MOCK_MODEL}, "Mock model",
                     description="A deterministic model for demos and tests.",
                     files=TEXT_FILE_TYPES)  # fmt: skip
