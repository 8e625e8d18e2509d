"""/readyz says when a process cannot do its job, and says it again once it can: an api whose
relay cannot open its subscriber connection, a worker whose consumer lost the broker. Real
processes on a Redis of the module's own, which the tests restrict and restart."""

from __future__ import annotations

import httpx
import pytest
import redis

from mini_n8n.redis_server import EmbeddedRedis, free_port
from tests.e2e.deployment import Deployment
from tests.waiting import wait_until

TIMEOUT = 30.0


@pytest.fixture
def server():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


def readyz(base: str) -> tuple[int, dict]:
    try:
        answer = httpx.get(f"{base}/readyz", timeout=5)
    except httpx.HTTPError:
        return 0, {}
    return answer.status_code, answer.json()


def test_an_api_whose_relay_cannot_subscribe_is_not_ready_until_it_can(server):
    deploy = Deployment(server.url)
    try:
        base = deploy.start_api()
        assert readyz(base) == (200, {"status": "ok"})
        admin = redis.Redis.from_url(server.url)
        # Redis refuses new connections; the api's pooled ones still answer its PING.
        admin.config_set("maxclients", 1)
        (relay,) = [c["id"] for c in admin.client_list() if c["name"] == "mini-n8n-relay"]
        admin.execute_command("CLIENT", "KILL", "ID", relay)
        unavailable = (503, {"status": "unavailable", "error": "the api cannot subscribe to Redis"})
        wait_until(lambda: readyz(base) == unavailable, TIMEOUT, "/readyz to say so")
        admin.config_set("maxclients", 10000)
        wait_until(lambda: readyz(base) == (200, {"status": "ok"}), TIMEOUT, "/readyz ok again")
        admin.close()
    finally:
        deploy.stop()


def test_a_worker_that_lost_the_broker_is_not_ready_until_it_is_back(server):
    port = free_port()
    deploy = Deployment(server.url, MINI_N8N_WORKER_METRICS_PORT=str(port))
    try:
        deploy.start_worker()
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: readyz(base) == (200, {"status": "ok"}), TIMEOUT, "the worker ready")
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        redis_port = server.port
        server.stop()
        lost = (503, {"status": "unavailable", "error": "not connected to the broker"})
        wait_until(lambda: readyz(base) == lost, TIMEOUT, "/readyz to say the broker is lost")
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}  # alive all along
        server.port = redis_port
        server.start()
        wait_until(lambda: readyz(base) == (200, {"status": "ok"}), TIMEOUT, "ready again")
    finally:
        deploy.stop()
