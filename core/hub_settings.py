"""The Chat Hub's settings: which models an admin offers, and the bounds of what one user may
keep. Defaults, then the environment (as core/settings.py), each default with its reason."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

MOCK_PROVIDER = "mock"
MOCK_MODEL = "mock"
OPENAI_PROVIDER = "openai"
# The allow-list's name for the credential the environment gives (OPENAI_API_KEY), which has no
# id of its own in the credentials file.
ENV_CREDENTIAL = "OPENAI_API_KEY"


@dataclass(frozen=True)
class HubSettings:
    # Credential id -> the models of that OpenAI-compatible credential the hub offers (n8n's
    # allowedModels per provider). A credential not named here offers none: nothing reaches a
    # paid model unless an admin listed it.
    models: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The deterministic mock model: a demo and test model that costs nothing.
    mock_model: bool = True
    # Per user: conversations and personal agents. n8n has no bound; a Redis has one.
    max_conversations: int = 1000
    max_agents: int = 100
    # Per conversation: messages (each edit and regenerate adds some) and an AI reply's text.
    max_messages: int = 2000
    max_reply_bytes: int = 1024 * 1024
    # A conversation's recent push events, kept for a reconnect (n8n keeps chunks only, 300 s).
    events_kept: int = 2000
    events_ttl_seconds: int = 3600
    # n8n's DEFAULT_CONTEXT_WINDOW_LENGTH for the hub's own agents: turns of history they see.
    context_window: int = 20

    @classmethod
    def from_env(cls) -> HubSettings:
        return cls(
            models=parse_models(os.environ.get("MINI_N8N_CHAT_HUB_MODELS", "")),
            mock_model=_bool("MINI_N8N_CHAT_HUB_MOCK_MODEL", cls.mock_model),
            max_conversations=_int("MINI_N8N_CHAT_HUB_MAX_CONVERSATIONS", cls.max_conversations),
            max_agents=_int("MINI_N8N_CHAT_HUB_MAX_AGENTS", cls.max_agents),
            max_messages=_int("MINI_N8N_CHAT_HUB_MAX_MESSAGES", cls.max_messages),
            max_reply_bytes=_int("MINI_N8N_CHAT_HUB_MAX_REPLY_BYTES", cls.max_reply_bytes),
            events_ttl_seconds=_int("MINI_N8N_CHAT_HUB_EVENTS_TTL", cls.events_ttl_seconds),
        )

    def allowed(self, credential_id: str, model: str) -> bool:
        return model in self.models.get(credential_id, ())


def parse_models(text: str) -> dict[str, tuple[str, ...]]:
    """`{"<credential id>": ["model", ...], ...}`; empty text: none."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ValueError(f"MINI_N8N_CHAT_HUB_MODELS is not JSON: {err}") from None
    if not isinstance(value, dict) or not all(
        isinstance(models, list) and all(isinstance(m, str) and m for m in models)
        for models in value.values()
    ):
        raise ValueError(
            'MINI_N8N_CHAT_HUB_MODELS must be {"<credential id>": ["<model>", ...], ...}'
        )
    return {str(k): tuple(v) for k, v in value.items()}


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _bool(name: str, default: bool) -> bool:
    value = (os.environ.get(name) or "").strip().lower()
    if not value:
        return default
    if value not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return value in ("1", "true", "yes", "on")
