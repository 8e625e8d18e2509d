"""The OpenAI Chat Model node: what it reads from its parameters and credential, and that the
model it hands the Agent is built by the runner's ChatModels (Services.chat_models), never by the
engine. The client that talks to the server is tested in tests/models."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from core.credentials import CredentialStore
from engine.errors import NodeExecutionError, WorkflowValidationError
from engine.model_settings import OpenAiSettings
from engine.nodes.lm_chat_openai import LmChatOpenAi
from tests.engine.stand_in import StandInContext

KEY = "sk-test-SECRET-123"
REFS = {"openAiApi": {"id": "cred1", "name": "OpenAi account"}}


class RecordingModels:
    """A ChatModels that records what it was asked to build and builds a stand-in."""

    def __init__(self) -> None:
        self.built: list[tuple[OpenAiSettings, str, object]] = []

    def openai(self, settings, api_key, cancel=None):
        self.built.append((settings, api_key, cancel))
        return SimpleNamespace(model_name=settings.model)


def store_for(url: str, **data) -> CredentialStore:
    credential = {"apiKey": KEY, "url": url, **data}
    return CredentialStore(
        [{"id": "cred1", "name": "OpenAi account", "type": "openAiApi", "data": credential}]
    )


def supply(url: str, models=None, model="gpt-4.1-mini", data=None, **options):
    params = {"model": {"__rl": True, "mode": "list", "value": model}, "options": options}
    ctx = StandInContext(params, REFS, store_for(url, **(data or {})), models or RecordingModels())
    return LmChatOpenAi().supply_data(ctx, 0), ctx


def test_the_model_is_built_by_the_runners_chat_models_from_the_nodes_settings():
    models = RecordingModels()
    model, ctx = supply(
        "http://models.test/v1/",
        models,
        model="gpt-4o-mini",
        data={"organizationId": "org-1"},
        temperature=0.2,
        maxTokens=50,
        topP=0.9,
        timeout=1500,
        maxRetries=0,
    )
    assert model.model_name == "gpt-4o-mini"
    assert models.built == [
        (
            OpenAiSettings(
                model="gpt-4o-mini",
                base_url="http://models.test/v1",
                timeout=1.5,
                max_retries=0,
                temperature=0.2,
                max_tokens=50,
                top_p=0.9,
                credential_name="OpenAi account",
                label="OpenAI Chat Model",
                organization="org-1",
            ),
            KEY,
            ctx.cancel,
        )
    ]


def test_no_limit_max_tokens_and_unset_options_are_left_to_the_server():
    models = RecordingModels()
    supply("http://models.test/v1", models, maxTokens=-1)
    settings = models.built[0][0]
    assert (settings.max_tokens, settings.temperature, settings.top_p) == (None, None, None)
    assert (settings.timeout, settings.max_retries) == (60.0, 2)  # n8n's defaults


def test_a_runner_that_lends_no_chat_models_gets_a_readable_error_naming_the_node():
    params = {"model": "gpt-4.1-mini"}
    ctx = StandInContext(params, REFS, store_for("http://models.test/v1"), models=None)
    with pytest.raises(NodeExecutionError) as info:
        LmChatOpenAi().supply_data(ctx, 0)
    assert str(info.value) == "OpenAI Chat Model: this runner lends no model clients"


def test_option_base_url_elsewhere_than_the_credential_url_is_refused_naming_the_node():
    models = RecordingModels()
    with pytest.raises(NodeExecutionError) as info:
        supply("http://localhost:1/v1", models, baseURL="http://127.0.0.1:9/v1")
    assert str(info.value).startswith(
        'OpenAI Chat Model: Domain not allowed: credential "OpenAi account" belongs to '
        "localhost:1 and is not sent to 127.0.0.1:9."
    )
    assert models.built == []


def test_a_credential_url_without_scheme_is_a_readable_error():
    with pytest.raises(NodeExecutionError) as info:
        supply("localhost:11434/v1")
    assert str(info.value) == (
        'OpenAI Chat Model: the URL of credential "OpenAi account" must start with http:// or https://'
    )


def test_missing_credential_is_a_readable_error():
    ctx = StandInContext(
        {}, {"openAiApi": {"id": "x", "name": "Other"}}, CredentialStore([]), RecordingModels()
    )
    with pytest.raises(NodeExecutionError) as info:
        LmChatOpenAi().supply_data(ctx, 0)
    assert str(info.value) == (
        'OpenAI Chat Model: credential "Other" (id x) of type openAiApi not found: '
        "add it to MINI_N8N_CREDENTIALS_FILE or set OPENAI_API_KEY"
    )


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"model": ""}, "no model selected (parameter model)"),
        (
            {"model": {"__rl": True, "mode": "list", "value": ""}},
            "no model selected (parameter model)",
        ),
        ({"options": {"temperature": "hot"}}, "option temperature must be a number"),
        ({"options": {"maxRetries": -1}}, "option maxRetries must be at least 0"),
        ({"options": {"baseURL": "ftp://x"}}, "option baseURL must be an http(s) URL"),
    ],
)
def test_validation_rejects_parameters_that_can_never_work(parameters, message):
    node = SimpleNamespace(name="Model", parameters=parameters)
    with pytest.raises(WorkflowValidationError) as info:
        LmChatOpenAi().validate(node)
    assert info.value.message == message and info.value.node == "Model"


def test_validation_leaves_expressions_to_run_time():
    params = {"model": "={{ $json.model }}", "options": {"temperature": "={{ 0.5 }}"}}
    LmChatOpenAi().validate(SimpleNamespace(name="Model", parameters=params))
