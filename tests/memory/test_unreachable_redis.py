"""Redis Chat Memory on a real client whose server does not answer: the run fails naming Redis,
never its address (the engine's own tests lend fakeredis and open no connection)."""

from __future__ import annotations

import json

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import load_workflow
from mini_n8n.redis_server import free_port
from tests.workflows import REDIS_CHAT, example


def test_an_unreachable_redis_memory_fails_the_run_naming_redis_but_not_its_address(keys):
    port = free_port()
    client = redis.Redis(port=port, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
    item = {"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "hi"}}
    services = Services(redis=client, keys=keys)
    run = run_workflow(load_workflow(example(REDIS_CHAT)), [item], hooks=Hooks(), services=services)
    assert run.status == "error"
    assert "Redis is unreachable" in run.error
    assert f":{port}" not in run.error and "localhost" not in run.error
    memory_runs = json.dumps(run.run_data)
    assert "Redis is unreachable" in memory_runs and f":{port}" not in memory_runs
