"""What a chat model client is built from: the model node's settings, plain data.

The OpenAI Chat Model node (engine/nodes/lm_chat_openai.py) reads them from its parameters and
credential; the client that talks to the server (models/) is built from them by the factory its
runner lends (Services.chat_models)."""

from __future__ import annotations

from dataclasses import dataclass, field

LABEL = "OpenAI Chat Model"  # n8n's display name; messages start with the node's own name
DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_MS = 60000  # n8n's default
DEFAULT_MAX_RETRIES = 2  # n8n's default


@dataclass(frozen=True)
class OpenAiSettings:
    """Everything but the key: safe to print."""

    model: str = DEFAULT_MODEL
    base_url: str = field(default=DEFAULT_BASE_URL, repr=False)  # may hold user:password@
    timeout: float = DEFAULT_TIMEOUT_MS / 1000  # seconds, per connect/read
    max_retries: int = DEFAULT_MAX_RETRIES
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    credential_name: str = "openAiApi"
    label: str = LABEL
    organization: str | None = None
