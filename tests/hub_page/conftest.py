"""Fixtures for the Chat Hub page's tests: a real deployment (a gunicorn+gevent api with an api
key and the hub's list of models, a Celery worker), people in its Redis, the fake OpenAI server
behind a credential, and Debian's headless Chromium driven by Playwright, a browser context (its
own cookies) per test."""

from __future__ import annotations

import json

import pytest

from core.users import UserStore
from tests.e2e.deployment import Deployment
from tests.editor.test_signin import Browsing
from tests.hub.conftest import CREDENTIAL, MODEL, fake_model, hub_credentials  # noqa: F401

API_KEY = "hub+page/key=0123456789"
PASSWORD = "Sunny-Day-42"
CHAT_USER = "ada@example.com"
OWNER = "olga@example.com"


@pytest.fixture(scope="module")
def site(redis_url, hub_credentials):  # noqa: F811 (the fixture imported above)
    with Deployment.running(
        redis_url,
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_GRACEFUL_TIMEOUT="1",  # an open tab keeps its push stream: a quick teardown
        MINI_N8N_CREDENTIALS_FILE=hub_credentials,
        MINI_N8N_CHAT_HUB_MODELS=json.dumps({CREDENTIAL["id"]: [MODEL]}),
        OPENAI_API_KEY="",
    ) as deploy:
        people = UserStore(deploy.redis, deploy.keys)
        people.add(CHAT_USER, PASSWORD, "chat", "Ada")
        people.add(OWNER, PASSWORD, "owner", "Olga")
        yield deploy


@pytest.fixture
def browsing(browser):
    browsing = Browsing(browser)
    yield browsing
    browsing.context.close()
