from __future__ import annotations

import pytest

from tests.e2e.deployment import Deployment


@pytest.fixture(scope="module")
def deployment(redis_url):
    """One api and one worker, shared by the tests of a module."""
    # Keepalive lines every second; the default lease (5 s), so a loaded machine does not make
    # a busy worker look lost.
    with Deployment.running(redis_url, MINI_N8N_KEEPALIVE_SECONDS="1") as deploy:
        yield deploy
