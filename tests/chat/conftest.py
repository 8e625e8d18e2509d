"""Fixtures for the chat surface: one deployment (api + worker, a credentials file with a basic-auth
login) shared by the chat tests, and a real headless Chromium (Debian's, never a downloaded one)
with a fresh context per test that fails the test on any console error."""

from __future__ import annotations

import json

import pytest

from tests.browser import person
from tests.chat.support import BASIC_CREDENTIAL, BASIC_PASSWORD, BASIC_USER
from tests.e2e.deployment import Deployment


@pytest.fixture(scope="session")
def credentials_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("credentials") / "credentials.json"
    entry = {
        **BASIC_CREDENTIAL,
        "type": "httpBasicAuth",
        "data": {"user": BASIC_USER, "password": BASIC_PASSWORD},
    }
    path.write_text(json.dumps([entry]))
    return str(path)


@pytest.fixture(scope="session")
def chat_deployment(redis_url, credentials_file):
    with Deployment.running(
        redis_url,
        MINI_N8N_KEEPALIVE_SECONDS="1",
        MINI_N8N_CHAT_HEARTBEAT_TIMEOUT="5",  # n8n's 60 s, shortened for the silent-client test
        MINI_N8N_CREDENTIALS_FILE=credentials_file,
        MINI_N8N_MAX_BODY_BYTES=str(2 * 1024 * 1024),
        MINI_N8N_CHAT_FILE_MAX_BYTES=str(64 * 1024),
        MINI_N8N_CHAT_FILES_MAX_BYTES=str(100 * 1024),
        OPENAI_API_KEY="",  # a model without a credential must fail, whatever the shell has
    ) as deploy:
        yield deploy


class ConsoleErrors(list):
    def watch(self, page) -> None:
        page.on("console", lambda m: m.type == "error" and self.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.append(f"pageerror: {e}"))


@pytest.fixture
def console_errors():
    return ConsoleErrors()


@pytest.fixture
def page(browser, console_errors):
    """A fresh browser context (its own storage) and page, a person's; no console error may
    happen on it."""
    context = browser.new_context(user_agent=person(browser))
    page = context.new_page()
    page.set_default_timeout(20_000)
    console_errors.watch(page)
    yield page
    context.close()
    assert console_errors == [], console_errors
