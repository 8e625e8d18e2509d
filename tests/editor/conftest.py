"""Fixtures for the editor suite: a real deployment (gunicorn+gevent api with an api key, a
Celery worker) per module, and Debian's headless Chromium driven by Playwright."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.browser import person
from tests.e2e.deployment import Deployment

API_KEY = "editor+test/key=0123456789"  # "+" and "/" must survive the URL fragment


@pytest.fixture(scope="module")
def deployment(redis_url):
    # An open editor tab keeps an SSE stream; a short graceful timeout keeps teardown quick.
    with Deployment.running(
        redis_url, MINI_N8N_API_KEY=API_KEY, MINI_N8N_GRACEFUL_TIMEOUT="1"
    ) as deploy:
        yield deploy


@pytest.fixture(scope="module")
def editor_context(browser):
    """The editor tests' browser context: its tabs share storage, as one user's tabs do (a
    person's: an approval click from a headless browser is a bot's, ignored)."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, user_agent=person(browser)
    )
    try:
        yield context
    finally:
        context.close()


@dataclass
class Tab:
    """One editor tab and everything its console said that was an error."""

    page: object
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def new_tab(editor_context):
    """Opens editor tabs on a fresh page each; closes them after the test."""
    tabs: list[Tab] = []

    def open_tab() -> Tab:
        page = editor_context.new_page()
        tab = Tab(page)
        page.on("console", lambda m: m.type == "error" and tab.errors.append(m.text))
        page.on("pageerror", lambda err: tab.errors.append(f"uncaught: {err}"))
        tabs.append(tab)
        return tab

    yield open_tab
    for tab in tabs:
        tab.page.close()
