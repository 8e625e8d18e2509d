"""OpenAI Chat Model (`@n8n/n8n-nodes-langchain.lmChatOpenAi`): any OpenAI-compatible endpoint
(OpenAI, Ollama, vLLM...) as the Agent's model, with n8n's parameters and `openAiApi` credential.

This file reads and checks the node's parameters and credential into OpenAiSettings
(engine/model_settings.py); the streaming client, its error messages and retries live in
models/openai_chat.py, built by the factory the runner lends (Services.chat_models).

`options.baseURL` sends the request, and so the credential's key, elsewhere than the credential's
own URL: it is allowed only where the credential's "Allowed HTTP Request Domains" allow it, as
n8n's version 1 of this node checks it (core/credentials.py `check_url`). n8n hides the option
from version 1.1 on and drops it from what the node reads; here it is read in every version,
under the same check.
"""

from __future__ import annotations

from typing import Any

from core.credentials import CredentialError, ResolvedCredential, check_url
from engine.description import CredentialSlot, NodeDescription, Property
from engine.errors import NodeExecutionError, WorkflowValidationError
from engine.llm import ChatModel
from engine.model_settings import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL,
    DEFAULT_TIMEOUT_MS,
    LABEL,
    OpenAiSettings,
)
from engine.node import NodeType, SupplyDataFunctions
from engine.registry import register
from engine.workflow import Node

# Options n8n stores as numbers: name -> (type, smallest allowed value)
NUMERIC_OPTIONS = {
    "temperature": (float, 0.0),
    "topP": (float, 0.0),
    "maxTokens": (int, -1),  # -1 is n8n's "no limit"
    "timeout": (float, 1.0),  # ms
    "maxRetries": (int, 0),
}
OPTION_NAMES = (*NUMERIC_OPTIONS, "baseURL")


@register
class LmChatOpenAi(NodeType):
    type = "@n8n/n8n-nodes-langchain.lmChatOpenAi"
    description = NodeDescription(
        display_name="OpenAI Chat Model",
        group="model",
        description="Any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM) as the Agent's model.",
        version=1.2,
        subtitle="model llm openai ollama vllm",
        inputs=(),
        outputs=("ai_languageModel",),
        credentials=(CredentialSlot("openAiApi", required=True),),
        properties=(
            Property(
                "model",
                "Model",
                "resourceLocator",
                {"__rl": True, "mode": "list", "value": DEFAULT_MODEL},
                required=True,
            ),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add Option",
                children=(
                    Property("baseURL", "Base URL", "string", ""),
                    Property("temperature", "Sampling Temperature", "number", None),
                    Property("topP", "Top P", "number", None),
                    Property("maxTokens", "Maximum Number of Tokens", "number", None),
                    Property("timeout", "Timeout (ms)", "number", None),
                    Property("maxRetries", "Max Retries", "number", None),
                ),
            ),
        ),
    )

    def validate(self, node: Node) -> None:
        params = node.parameters or {}
        model = params.get("model", DEFAULT_MODEL)
        if not _is_expression(model) and not model_name(model):
            raise WorkflowValidationError("no model selected (parameter model)", node=node.name)
        options = params.get("options") or {}
        if not isinstance(options, dict):
            raise WorkflowValidationError("parameter options must be an object", node=node.name)
        for name, value in options.items():
            if _is_expression(value):
                continue
            try:
                _option(name, value)
            except ValueError as err:
                raise WorkflowValidationError(str(err), node=node.name) from None

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> ChatModel:
        label = ctx.node.name or LABEL
        models = ctx.services.chat_models
        if models is None:
            raise NodeExecutionError(f"{label}: this runner lends no model clients")
        try:
            options = {k: _option(k, ctx.get_parameter(f"options.{k}")) for k in OPTION_NAMES}
        except ValueError as err:
            raise NodeExecutionError(f"{label}: {err}") from None
        credential = _credential(ctx, label)
        base_url = _base_url(credential, options["baseURL"], label)
        settings = OpenAiSettings(
            model=model_name(ctx.get_parameter("model", DEFAULT_MODEL)) or DEFAULT_MODEL,
            base_url=base_url.rstrip("/"),
            timeout=(options["timeout"] or DEFAULT_TIMEOUT_MS) / 1000,
            max_retries=DEFAULT_MAX_RETRIES
            if options["maxRetries"] is None
            else options["maxRetries"],
            temperature=options["temperature"],
            max_tokens=options["maxTokens"] if (options["maxTokens"] or 0) > 0 else None,
            top_p=options["topP"],
            credential_name=credential.name,
            label=label,
            organization=credential.get("organizationId") or None,
        )
        return models.openai(settings, str(credential.get("apiKey") or ""), ctx.cancel)


def _base_url(credential: ResolvedCredential, option: str | None, label: str) -> str:
    """The node's base URL if the credential may go there, else the credential's own."""
    own_url = str(credential.get("url") or DEFAULT_BASE_URL)
    if option:
        try:
            check_url(credential, option, own_url)
        except CredentialError as err:
            raise NodeExecutionError(f"{label}: {err}") from None
        return option
    if not own_url.startswith(("http://", "https://")):
        raise NodeExecutionError(
            f'{label}: the URL of credential "{credential.name}" must start with http:// or https://'
        )
    return own_url


def model_name(value: Any) -> str:
    """The model id, from a plain string or n8n's resource locator {"__rl": true, "value": ...}."""
    if isinstance(value, dict):
        value = value.get("value")
    return str(value or "").strip()


def _is_expression(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.get("value")
    return isinstance(value, str) and value.startswith("=")


def _option(name: str, value: Any) -> Any:
    """A validated option value (None when unset); ValueError with a readable message if bad."""
    if value is None or value == "":
        return None
    if name == "baseURL":
        if not isinstance(value, str) or not value.startswith(("http://", "https://")):
            raise ValueError("option baseURL must be an http(s) URL")
        return value
    if name not in NUMERIC_OPTIONS:
        return value  # n8n options we do not use (responseFormat, ...) are accepted and ignored
    kind, lowest = NUMERIC_OPTIONS[name]
    try:
        if isinstance(value, bool):
            raise TypeError
        number = kind(float(value))
    except (TypeError, ValueError):
        raise ValueError(f"option {name} must be a number") from None
    if number < lowest:
        raise ValueError(f"option {name} must be at least {lowest:g}")
    return number


def _credential(ctx: SupplyDataFunctions, label: str) -> ResolvedCredential:
    store = ctx.services.credentials
    if store is None:
        raise NodeExecutionError(f"{label}: no credentials are configured for this deployment")
    ref = (ctx.node.credentials or {}).get("openAiApi")
    try:
        return store.resolve("openAiApi", ref)
    except CredentialError as err:
        raise NodeExecutionError(f"{label}: {err}") from None
