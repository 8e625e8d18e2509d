"""The compose deployment, run for real (podman + docker-compose). The tests are marked
`compose`: `pytest tests/compose` runs only them, `pytest -m "not compose"` leaves them out."""

from __future__ import annotations

import os
import time

import pytest

from tests.compose.harness import Deployment, unavailable_reason


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "compose: runs the docker-compose deployment in real containers (podman)"
    )


@pytest.fixture(scope="session")
def compose_cli():
    reason = unavailable_reason(("docker-compose",))
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def deployment():
    """A private podman engine with the base images imported and the build context staged;
    nothing built yet. Torn down (containers, images, volumes, storage) at the end."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    Deployment.clean_stale_runs()
    d = Deployment()
    d.started = started
    try:
        d.start_engine()
        yield d
    finally:
        if os.environ.get("MINI_N8N_COMPOSE_KEEP"):  # debugging: leave it all running
            print(f"\nkept: DOCKER_HOST={d.env['DOCKER_HOST']} in {d.run_dir}")
        else:
            d.close()
