"""The hub's request bodies, checked as n8n's zod schemas check them (@n8n/api-types
chat-hub.js): ChatHubSendMessageRequest, ChatHubEditMessageRequest,
ChatHubRegenerateMessageRequest, ChatHubUpdateConversationRequest, ChatHubCreateAgentRequest,
ChatHubUpdateAgentRequest. A body that breaks one is a 400 naming the field, and changes nothing.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from api.errors import ApiError
from api.hub import attachments
from api.hub.workflow_agents import icon_of
from api.rest.workflows import ID
from core.hub_records import ModelRef
from core.hub_settings import MOCK_PROVIDER, OPENAI_PROVIDER

MAX_TITLE = 256
MAX_PROMPTS = 6
PROVIDERS = ("n8n", "custom-agent", OPENAI_PROVIDER, MOCK_PROVIDER)
TIME_ZONE = re.compile(r"^[A-Za-z0-9_+\-/]{1,64}$")


@dataclass(frozen=True)
class Send:
    message_id: str
    session_id: str
    text: str
    model: ModelRef
    previous_message_id: str | None
    credential_id: str | None
    files: list[attachments.File]
    time_zone: str | None


@dataclass(frozen=True)
class Edit:
    message_id: str
    text: str
    model: ModelRef
    credential_id: str | None
    files: list[attachments.File]
    keep: list[int]
    time_zone: str | None


@dataclass(frozen=True)
class Regenerate:
    model: ModelRef
    credential_id: str | None
    time_zone: str | None


def send(body: dict[str, Any]) -> Send:
    return Send(
        message_id=uuid_field(body, "messageId"),
        session_id=uuid_field(body, "sessionId"),
        text=string(body, "message"),
        model=model(body.get("model")),
        previous_message_id=uuid_field(body, "previousMessageId", nullable=True),
        credential_id=credential(body),
        files=attachments.parse(body.get("attachments"), "attachments"),
        time_zone=time_zone(body),
    )


def edit(body: dict[str, Any]) -> Edit:
    keep = body.get("keepAttachmentIndices", [])
    if not isinstance(keep, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in keep
    ):
        raise ApiError(400, '"keepAttachmentIndices" must be a list of indexes')
    return Edit(
        message_id=uuid_field(body, "messageId"),
        text=string(body, "message"),
        model=model(body.get("model")),
        credential_id=credential(body),
        files=attachments.parse(body.get("newAttachments"), "newAttachments"),
        keep=sorted(set(keep)),
        time_zone=time_zone(body),
    )


def regenerate(body: dict[str, Any]) -> Regenerate:
    return Regenerate(model(body.get("model")), credential(body), time_zone(body))


def model(value: Any) -> ModelRef:
    """n8n's ChatHubConversationModel, discriminated by `provider`."""
    if not isinstance(value, dict) or value.get("provider") not in PROVIDERS:
        raise ApiError(400, f'"model.provider" must be one of {", ".join(PROVIDERS)}')
    ref = ModelRef.from_json(value)
    if ref.provider == "n8n" and not ID.match(ref.workflow_id or ""):
        raise ApiError(400, '"model.workflowId" must be a workflow id')
    needed = {"n8n": ref.workflow_id, "custom-agent": ref.agent_id}.get(ref.provider, ref.model)
    if ref.provider == MOCK_PROVIDER and not ref.model:
        return ModelRef(MOCK_PROVIDER, MOCK_PROVIDER)
    if not needed or len(needed) > 256:
        name = {"n8n": "workflowId", "custom-agent": "agentId"}.get(ref.provider, "model")
        raise ApiError(400, f'"model.{name}" must be a non-empty string')
    return ref


def credential(body: dict[str, Any]) -> str | None:
    """n8n's `credentials`: `{"openAiApi": {"id", "name"}}`, the credential the model uses."""
    given = body.get("credentials") or {}
    if not isinstance(given, dict):
        raise ApiError(400, '"credentials" must be an object of {id, name} by credential type')
    entry = given.get("openAiApi")
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise ApiError(400, '"credentials.openAiApi" must be {"id", "name"}')
    return entry["id"] or None


def conversation_update(body: dict[str, Any]) -> dict[str, Any]:
    """What a PATCH changes: `title`, `agent` {model, name}, `credentialId`, `toolIds`."""
    changes: dict[str, Any] = {}
    if "title" in body:
        title = string(body, "title").strip()
        if not title or len(title) > MAX_TITLE:
            raise ApiError(400, f'"title" must be 1 to {MAX_TITLE} characters')
        changes["title"] = title
    if "agent" in body:
        agent = body["agent"]
        if not isinstance(agent, dict) or not isinstance(agent.get("name"), str):
            raise ApiError(400, '"agent" must be {"model", "name"}')
        changes["agent"] = model(agent.get("model"))
    if "credentialId" in body:
        value = body["credentialId"]
        if value is not None and (not isinstance(value, str) or len(value) > 36):
            raise ApiError(400, '"credentialId" must be a string of at most 36 characters')
        changes["credentialId"] = value
    if "toolIds" in body:
        changes["toolIds"] = uuid_list(body, "toolIds")
    return changes


def agent_fields(body: dict[str, Any], creating: bool) -> dict[str, Any]:
    """A personal agent's fields (all required on create but description and prompts)."""
    fields: dict[str, Any] = {}
    checks = {
        "name": lambda: _bounded(body, "name", 1, 128),
        "description": lambda: _bounded(body, "description", 0, 512),
        "icon": lambda: _icon(body.get("icon")),
        "systemPrompt": lambda: string(body, "systemPrompt"),
        "suggestedPrompts": lambda: _prompts(body.get("suggestedPrompts")),
        "credentialId": lambda: body["credentialId"] if body["credentialId"] is None
        else _bounded(body, "credentialId", 1, 256),
        "provider": lambda: _provider(body.get("provider")),
        "model": lambda: _bounded(body, "model", 1, 64),
        "toolIds": lambda: uuid_list(body, "toolIds"),
    }  # fmt: skip
    required = ("name", "icon", "provider", "model") if creating else ()
    for name, check in checks.items():
        if name in body:
            fields[name] = check()
        elif name in required:
            raise ApiError(400, f'"{name}" is required')
    return fields


def uuid_field(body: dict[str, Any], name: str, nullable: bool = False) -> Any:
    value = body.get(name)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not _is_uuid(value):
        raise ApiError(400, f'"{name}" must be a UUID')
    return value.lower()


def uuid_list(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) and _is_uuid(v) for v in value):
        raise ApiError(400, f'"{name}" must be a list of UUIDs')
    return [v.lower() for v in value]


def string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise ApiError(400, f'"{name}" must be a string')
    return value


def time_zone(body: dict[str, Any]) -> str | None:
    value = body.get("timeZone")
    if value is None:
        return None
    if not isinstance(value, str) or not TIME_ZONE.match(value):
        raise ApiError(400, '"timeZone" must be an IANA time zone name')
    return value


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def _bounded(body: dict[str, Any], name: str, least: int, most: int) -> str:
    value = string(body, name)
    if not least <= len(value) <= most:
        raise ApiError(400, f'"{name}" must be {least} to {most} characters')
    return value


def _icon(value: Any) -> dict[str, Any]:
    icon = icon_of(value)
    if icon is None or len(icon["value"]) > 64:
        raise ApiError(400, '"icon" must be {"type": "icon"|"emoji", "value"}')
    return icon


def _prompts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_PROMPTS:
        raise ApiError(400, f'"suggestedPrompts" must be a list of at most {MAX_PROMPTS}')
    prompts = []
    for entry in value:
        text = entry.get("text") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not 1 <= len(text) <= 256:
            raise ApiError(400, "Each suggested prompt needs a text of 1 to 256 characters")
        icon = entry.get("icon")
        prompts.append({"text": text, **({"icon": _icon(icon)} if icon is not None else {})})
    return prompts


def _provider(value: Any) -> str:
    if value not in (OPENAI_PROVIDER, MOCK_PROVIDER):
        raise ApiError(400, f'"provider" must be {OPENAI_PROVIDER} or {MOCK_PROVIDER}')
    return str(value)
