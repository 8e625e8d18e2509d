"""The Chat Hub's answers in n8n's shapes (@n8n/api-types chat-hub.d.ts): ChatHubSessionDto,
ChatHubMessageDto, ChatHubAgentDto. Times are ISO 8601 with milliseconds, as n8n sends them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.chat_node_message import Approval
from core.hub_records import HubAgent, HubMessage, HubSession


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_dto(session: HubSession) -> dict[str, Any]:
    return {
        "id": session.id,
        "title": session.title,
        "ownerId": session.owner_id,
        "lastMessageAt": iso(session.last_message_at),
        "credentialId": session.credential_id,
        "provider": session.provider,
        "model": session.model,
        "workflowId": session.workflow_id,
        "agentId": session.agent_id,
        "agentName": session.agent_name or session.model or "",
        "agentIcon": session.agent_icon,
        "type": session.type,
        "createdAt": iso(session.created_at),
        "updatedAt": iso(session.updated_at),
        "toolIds": list(session.tool_ids),
    }


def message_dto(message: HubMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "sessionId": message.session_id,
        "type": message.type,
        "name": message.name,
        "content": content_chunks(message.content),
        "provider": message.provider,
        "model": message.model,
        "workflowId": message.workflow_id,
        "agentId": message.agent_id,
        "executionId": message.execution_id,
        "status": message.status,
        "createdAt": iso(message.created_at),
        "updatedAt": iso(message.updated_at),
        "previousMessageId": message.previous_message_id,
        "retryOfMessageId": message.retry_of_message_id,
        "revisionOfMessageId": message.revision_of_message_id,
        "attachments": [
            {"fileName": a.file_name, "mimeType": a.mime_type} for a in message.attachments
        ],
    }


def content_chunks(text: str) -> list[dict[str, Any]]:
    """n8n's ChatMessageContentChunk list: a Chat node's approval as `with-buttons`, other text
    as one `text` chunk, nothing for an empty message (a tool-call step)."""
    if not text:
        return []
    approval = Approval.from_frame(text)
    if approval is not None:
        return [
            {
                "type": "with-buttons",
                "content": approval.text,
                "buttons": [b.to_json() for b in approval.buttons],
                "blockUserInput": approval.block_user_input,
            }
        ]
    return [{"type": "text", "content": text}]


def agent_dto(agent: HubAgent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "name": agent.name,
        "description": agent.description,
        "icon": agent.icon,
        "suggestedPrompts": list(agent.suggested_prompts),
        "systemPrompt": agent.system_prompt,
        "ownerId": agent.owner_id,
        "credentialId": agent.credential_id,
        "provider": agent.provider,
        "model": agent.model,
        "files": [],
        "toolIds": list(agent.tool_ids),
        "createdAt": iso(agent.created_at),
        "updatedAt": iso(agent.updated_at),
    }
