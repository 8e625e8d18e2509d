"""The Chat Hub's records in Redis: a conversation (`HubSession`), one message of its tree
(`HubMessage`), a personal agent (`HubAgent`) and the reply an execution is producing
(`HubRun`). One type, one encoder (`to_json`), one decoder (`from_json`) each.

Field names are n8n's (its ChatHubSessionDto, ChatHubMessageDto, ChatHubAgentDto), so what
`redis-cli` shows reads like what the REST api answers; times are stored as milliseconds since
the epoch and answered as ISO 8601 (api/hub/dto.py).

The tree: every message names its parent (`previousMessageId`, None for the first). An edit is a
new human message beside the one it revises (same parent, `revisionOfMessageId` = the first of
the revisions); a regenerated answer is a new AI message beside the one it retries (same parent,
`retryOfMessageId` = the first of the retries). The branch shown is a walk from a message up to
the root (`branch`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from core.jsontext import dumps

HUMAN, AI = "human", "ai"


class MessageStatus(StrEnum):
    """n8n's ChatHubMessageStatus (British "cancelled", as n8n spells it)."""

    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"
    WAITING = "waiting"


DONE = frozenset({MessageStatus.SUCCESS, MessageStatus.ERROR, MessageStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class ModelRef:
    """What answers a conversation (n8n's ChatHubConversationModel): a model of a provider
    (`openai` with a credential, or our `mock`), a workflow agent (`n8n`, `workflowId`) or a
    personal agent (`custom-agent`, `agentId`)."""

    provider: str
    model: str | None = None
    workflow_id: str | None = None
    agent_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.provider == "n8n":
            return {"provider": "n8n", "workflowId": self.workflow_id}
        if self.provider == "custom-agent":
            return {"provider": "custom-agent", "agentId": self.agent_id}
        return {"provider": self.provider, "model": self.model}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ModelRef:
        return cls(
            provider=str(body.get("provider") or ""),
            model=_opt_str(body.get("model")),
            workflow_id=_opt_str(body.get("workflowId")),
            agent_id=_opt_str(body.get("agentId")),
        )


@dataclass(frozen=True, slots=True)
class Attachment:
    file_name: str
    mime_type: str
    size: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"fileName": self.file_name, "mimeType": self.mime_type, "size": self.size}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Attachment:
        return cls(str(body.get("fileName") or ""), str(body.get("mimeType") or ""),
                   _int(body.get("size")))  # fmt: skip


@dataclass(slots=True)
class HubSession:
    id: str
    owner_id: str
    title: str
    created_at: int
    updated_at: int
    last_message_at: int
    provider: str | None = None
    model: str | None = None
    credential_id: str | None = None
    workflow_id: str | None = None
    agent_id: str | None = None
    agent_name: str = ""
    agent_icon: dict[str, Any] | None = None
    type: str = "production"
    tool_ids: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return dumps(_camel(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> HubSession:
        return _decode(cls, raw)

    @property
    def model_ref(self) -> ModelRef | None:
        if not self.provider:
            return None
        return ModelRef(self.provider, self.model, self.workflow_id, self.agent_id)


@dataclass(slots=True)
class HubMessage:
    id: str
    session_id: str
    type: str  # human | ai
    name: str
    content: str
    status: str
    created_at: int
    updated_at: int
    previous_message_id: str | None = None
    retry_of_message_id: str | None = None
    revision_of_message_id: str | None = None
    execution_id: str | None = None
    provider: str | None = None
    model: str | None = None
    workflow_id: str | None = None
    agent_id: str | None = None
    attachments: list[Attachment] = field(default_factory=list)

    def to_json(self) -> str:
        body = _camel(self)
        body["attachments"] = [a.to_json() for a in self.attachments]
        return dumps(body)

    @classmethod
    def from_json(cls, raw: str | bytes) -> HubMessage:
        message = _decode(cls, raw)
        message.attachments = [
            Attachment.from_json(a) for a in message.attachments if isinstance(a, dict)
        ]
        return message


@dataclass(slots=True)
class HubAgent:
    id: str
    owner_id: str
    name: str
    provider: str  # openai | mock
    model: str
    created_at: int
    updated_at: int
    description: str | None = None
    icon: dict[str, Any] | None = None
    system_prompt: str = ""
    suggested_prompts: list[dict[str, Any]] = field(default_factory=list)
    credential_id: str | None = None
    tool_ids: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return dumps(_camel(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> HubAgent:
        return _decode(cls, raw)


@dataclass(slots=True)
class HubRun:
    """The reply one execution produces in a conversation: where its AI messages go, and how
    far its relay has read (so another api process can take over the relaying).

    `response_mode`: streaming (a message per Agent run, from the chunks), lastNode (one message,
    the output) or responseNodes (a message per Chat node message)."""

    execution_id: str
    user_id: str
    session_id: str
    response_mode: str
    reply_to: str  # the human message answered
    model: dict[str, Any] = field(default_factory=dict)  # ModelRef.to_json(), copied onto replies
    retry_of: str | None = None  # the first AI message of the retries, on a regenerate
    messages: list[str] = field(default_factory=list)  # its AI messages, in order
    open: dict[str, str] = field(default_factory=dict)  # "<nodeId>|<run>|<item>" -> message id
    chat_messages: int = 0  # Chat-node messages relayed (responseNodes)
    title_after: bool = False  # the conversation's first reply: a title follows it
    # How that title is asked for: {"provider": "mock"} or {"provider": "openai", "model",
    # "credential": {"id", "name"}} (api/hub/titles.py).
    title_with: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return dumps(_camel(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> HubRun:
        return _decode(cls, raw)

    @property
    def last_message(self) -> str:
        """The message the next AI message follows: the last AI message, else the human one."""
        return self.messages[-1] if self.messages else self.reply_to


def branch(messages: dict[str, HubMessage], leaf: str | None) -> list[HubMessage]:
    """The messages from the root down to `leaf`, following `previousMessageId` (a cycle, which
    no request can make, ends the walk rather than looping)."""
    chain: list[HubMessage] = []
    seen: set[str] = set()
    current = leaf
    while current is not None and current in messages and current not in seen:
        seen.add(current)
        chain.append(messages[current])
        current = messages[current].previous_message_id
    chain.reverse()
    return chain


def _camel(record: Any) -> dict[str, Any]:
    """The record's fields by their camelCase names (a shallow copy: dumps reads the rest)."""
    names = _NAMES.get(type(record))
    if names is None:
        names = _NAMES[type(record)] = [(f.name, _to_camel(f.name)) for f in fields(record)]
    return {camel: getattr(record, name) for name, camel in names}


def _to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_NAMES: dict[type, list[tuple[str, str]]] = {}


def _decode(cls: Any, raw: str | bytes) -> Any:
    """A record from its JSON; fields it lacks take their defaults, fields it does not know
    are left out (a record written by a newer version)."""
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError(f"a {cls.__name__} is a JSON object")
    values = {}
    for spec in fields(cls):
        camel = _to_camel(spec.name)
        if camel in body:
            values[spec.name] = body[camel]
    return cls(**values)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
