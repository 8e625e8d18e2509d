"""One deployment for the hub's tests: two api processes (a reconnect lands on the other) and a
worker, the test users of tests/hub/identity_app.py, and the fake OpenAI server behind a
credential whose models the admin lists."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import start_fake_openai
from tests.hub.deployment import HubDeployment

CREDENTIAL = {"id": "cred-openai", "name": "Fake OpenAI"}
MODEL = "gpt-test"


@pytest.fixture(scope="session")
def fake_model():
    server, base_url = start_fake_openai()
    yield server, base_url
    server.stop()


@pytest.fixture(scope="session")
def hub_credentials(tmp_path_factory, fake_model):
    _, base_url = fake_model
    path = tmp_path_factory.mktemp("hub-credentials") / "credentials.json"
    entry = {**CREDENTIAL, "type": "openAiApi", "data": {"apiKey": "sk-test", "url": base_url}}
    path.write_text(json.dumps([entry]))
    return str(path)


@pytest.fixture(scope="module")
def hub_deployment(redis_url, hub_credentials):
    deploy = HubDeployment(
        redis_url,
        MINI_N8N_KEEPALIVE_SECONDS="1",
        MINI_N8N_CREDENTIALS_FILE=hub_credentials,
        MINI_N8N_CHAT_HUB_MODELS=json.dumps({CREDENTIAL["id"]: [MODEL]}),
        MINI_N8N_MAX_BODY_BYTES=str(2 * 1024 * 1024),
        MINI_N8N_CHAT_FILE_MAX_BYTES=str(64 * 1024),
        MINI_N8N_CHAT_FILES_MAX_BYTES=str(100 * 1024),
        OPENAI_API_KEY="",
    )
    try:
        deploy.base = deploy.start_api()
        deploy.other = deploy.start_api()
        deploy.worker = deploy.start_worker()
        yield deploy
    finally:
        deploy.stop()
