"""Warm start: a worker that reports ready already holds every module its first
execution needs, so that execution imports nothing: asked through a remote-control command
(worker/celery_app.py) right after the worker printed " ready.", and again after one chat."""

from __future__ import annotations

import json
import pkgutil

import engine.nodes
from core.settings import Settings
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url
from tests.models.conftest import credentials, openai_chat
from worker.celery_app import MODULES_COMMAND, create_celery

NODE_MODULES = {f"engine.nodes.{m.name}" for m in pkgutil.iter_modules(engine.nodes.__path__)}
# The model path's HTTP client and what the engine runs a chat with.
CLIENT_MODULES = {"models.openai_chat", "httpx", "httpcore", "h11", "memory.redis"}
OURS = (
    "engine",
    "memory",
    "core",
    "worker",
    "models",
    "runtime",
    "httpx",
    "httpcore",
    "h11",
    "openai",
    "anyio",
)


def loaded_modules(deploy: Deployment, pid: int) -> set[str]:
    app = create_celery(deploy_settings(deploy))
    try:
        replies = app.control.broadcast(MODULES_COMMAND, reply=True, timeout=10)
    finally:
        app.close()
    mine = [
        r for reply in replies for name, r in reply.items() if name.startswith(f"worker-{pid}@")
    ]
    assert len(mine) == 1, replies
    return set(mine[0])


def deploy_settings(deploy: Deployment) -> Settings:
    return Settings(redis_url=deploy.redis_url, broker_url=deploy.redis_url)


def test_a_ready_worker_has_imported_everything_its_first_execution_needs(
    redis_url, fake, closed_url, tmp_path
):
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps(credentials(fake.base_url, redis_url, closed_url)))
    deploy = Deployment(redis_url, MINI_N8N_CREDENTIALS_FILE=str(path))
    try:
        base = deploy.start_api()
        worker = deploy.start_worker()  # returns once the worker printed " ready."
        at_ready = loaded_modules(deploy, worker.pid)
        assert NODE_MODULES, "no node modules found"
        assert not NODE_MODULES - at_ready, sorted(NODE_MODULES - at_ready)
        assert not CLIENT_MODULES - at_ready, sorted(CLIENT_MODULES - at_ready)

        workflow = deploy.activate(openai_chat())
        reply = stream_chat(chat_url(base, workflow), "my name is Ada", "warm-1")
        assert reply.text() == "Nice to meet you, Ada!"

        imported = loaded_modules(deploy, worker.pid) - at_ready
        assert not [m for m in imported if m.split(".")[0] in OURS], sorted(imported)
    finally:
        deploy.stop()
