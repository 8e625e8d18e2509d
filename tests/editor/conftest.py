"""Fixtures for the editor suite: a real deployment (gunicorn+gevent api with an api key, a
Celery worker) per module, and Debian's headless Chromium driven by Playwright."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_path
from tests.e2e.deployment import Deployment

API_KEY = "editor+test/key=0123456789"  # "+" and "/" must survive the URL fragment


@pytest.fixture(scope="module")
def deployment(redis_url):
    # An open editor tab keeps an SSE stream; a short graceful timeout keeps teardown quick.
    deploy = Deployment(
        redis_url,
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_GRACEFUL_TIMEOUT="1",
    )
    try:
        deploy.base = deploy.start_api()
        deploy.worker = deploy.start_worker()
        yield deploy
    finally:
        deploy.stop()


@pytest.fixture(scope="module")
def browser(playwright_driver, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    context = playwright_driver.chromium.launch_persistent_context(
        str(profile),
        executable_path=chromium_path(),
        args=CHROMIUM_ARGS,
        headless=True,
        viewport={"width": 1400, "height": 900},
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
def new_tab(browser):
    """Opens editor tabs on a fresh page each; closes them after the test."""
    tabs: list[Tab] = []

    def open_tab() -> Tab:
        page = browser.new_page()
        tab = Tab(page)
        page.on("console", lambda m: m.type == "error" and tab.errors.append(m.text))
        page.on("pageerror", lambda err: tab.errors.append(f"uncaught: {err}"))
        tabs.append(tab)
        return tab

    yield open_tab
    for tab in tabs:
        tab.page.close()
