"""The compose deployment, run for real (podman + docker-compose). The tests are marked
`compose`: `pytest tests/compose` runs only them, `pytest -m "not compose"` leaves them out.

Building (with a cold cache debootstrap and wheel downloads, then always `docker-compose build`
from an empty image store) is a step of its own, not part of any test. pytest_runtest_protocol
below runs it right before the first test of each module that uses the `deployment` fixture
(each module gets a deployment of its own, torn down after it), with its own deadline
(harness.BUILD_SECONDS, 15 min; MINI_N8N_COMPOSE_BUILD_SECONDS changes it). It wraps
pytest-timeout's own hook from outside (tryfirst), so the per-test bound (pyproject: 120 s) is
not running yet and can neither count the build nor kill it midway. The tests then find the
deployment built, or skip with the reason it cannot be built here, or fail with the reason its
build failed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.compose.harness import BUILD_SECONDS, build_deployment, unavailable_reason

BUILD = pytest.StashKey[dict]()
HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "compose: runs the docker-compose deployment in real containers (podman)"
    )


@pytest.hookimpl(tryfirst=True, wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # pytest calls this hook of every conftest for every item, not only for the items of this
    # folder: other folders have fixtures named `deployment` too (tests/e2e, tests/editor), and
    # `pytest -m "not compose"` must not build the compose images for them.
    if (
        item.path.is_relative_to(HERE)
        and "deployment" in getattr(item, "fixturenames", ())
        and _needs_build(item.config.stash)
    ):
        item.config.stash[BUILD] = build_step(item.config)
    return (yield)


def _needs_build(stash) -> bool:
    """None built yet, or the one built was torn down after its module (a failed build or one
    that cannot run here is not tried again: the next module finds its reason)."""
    return BUILD not in stash or bool(stash[BUILD].get("closed"))


def build_step(config) -> dict:
    """{"deployment": built} or {"skip": why not here} or {"error": why the build failed}."""
    reason = unavailable_reason()
    if reason:
        return {"skip": reason}
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(f"compose build step: {line}")

    say(f"building the deployment (deadline {BUILD_SECONDS:.0f} s, outside the tests' timeouts)")
    started = time.monotonic()
    try:
        d = build_deployment(BUILD_SECONDS, say)
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
        say(f"failed after {time.monotonic() - started:.0f} s: {error.splitlines()[0]}")
        return {"error": error}
    say(f"done in {time.monotonic() - started:.1f} s")
    return {"deployment": d}


def pytest_sessionfinish(session):
    """In case the fixture never tore it down (interrupted between the build and the tests)."""
    close(session.config.stash.get(BUILD, {}))


def close(state: dict) -> None:
    d = state.pop("deployment", None)
    if d is None:
        return
    state["closed"] = True  # the next module's first test builds another
    if os.environ.get("MINI_N8N_COMPOSE_KEEP"):  # debugging: leave it all running
        print(f"\nkept: DOCKER_HOST={d.env['DOCKER_HOST']} in {d.run_dir}")
    else:
        d.close()


@pytest.fixture(scope="session")
def compose_cli():
    reason = unavailable_reason(("docker-compose",))
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def deployment(request):
    """The deployment the build step made: a private podman engine with the images built from
    an empty image store, nothing started yet. Torn down (containers, images, volumes, storage)
    after the module's tests, so it does not run on through the rest of the suite."""
    state = request.config.stash.get(BUILD, None)
    if state is None:
        pytest.fail("the compose build step did not run (pytest_runtest_protocol in conftest.py)")
    if state.get("closed"):
        pytest.fail("the deployment was torn down after the tests of another module")
    if "skip" in state:
        pytest.skip(state["skip"])
    if "error" in state:
        pytest.fail(f"the compose build step failed:\n{state['error']}", pytrace=False)
    yield state["deployment"]
    close(state)
