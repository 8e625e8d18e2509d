"""Redis goes away under a running deployment: requests get 503 with Retry-After (not a 500 and
a traceback), a stream in flight ends with an error that names Redis once the outage outlasts
MINI_N8N_REDIS_OUTAGE, and once Redis is back the deployment serves again."""

from __future__ import annotations

import threading

import httpx
import pytest

from mini_n8n.redis_server import EmbeddedRedis
from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids, on_its_own_redis
from tests.workflows import REDIS_CHAT, example, with_model_delay


@pytest.fixture
def outage():
    """A deployment on a Redis of its own, which the test may stop and start again."""
    # A stream waits out a Redis outage (its connection is made again) for MINI_N8N_REDIS_OUTAGE,
    # then says so: short here.
    with on_its_own_redis(
        MINI_N8N_KEEPALIVE_SECONDS="1", MINI_N8N_LEASE_SECONDS="2", MINI_N8N_REDIS_OUTAGE="5"
    ) as deploy:
        yield deploy


def test_requests_while_redis_is_down_get_503_json_with_retry_after(outage):
    workflow = outage.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(outage.base, workflow)
    port = outage.server.port
    outage.server.stop()
    for method, target, kwargs in (
        ("POST", url, {"json": {"sessionId": "s", "chatInput": "hi"}}),
        ("GET", f"{outage.base}/rest/workflows", {}),
        ("POST", f"{outage.base}/webhook/unknown", {"json": {}}),
    ):
        response = httpx.request(method, target, timeout=30, **kwargs)
        assert response.status_code == 503, (target, response.text)
        assert response.json()["message"] == "Redis is unreachable; try again shortly"
        assert response.headers["retry-after"] == "5"
    log = "".join(outage.apis[0][0].lines)
    assert "Traceback" not in log
    outage.server = EmbeddedRedis(port=port).start()  # empty: the workflow is gone with it
    assert httpx.post(url, json={"sessionId": "s", "chatInput": "hi"}).status_code == 404
    assert httpx.get(f"{outage.base}/readyz").status_code == 200


def test_a_stream_in_flight_when_redis_goes_away_ends_with_an_error_naming_redis(outage):
    workflow = outage.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 400)))
    first_item = threading.Event()
    result = {}

    def chat():
        result["reply"] = stream_chat(
            chat_url(outage.base, workflow),
            "my name is Ada",
            "gone",
            timeout=60,
            on_chunk=lambda c: c["type"] == "item" and first_item.set(),
        )

    thread = threading.Thread(target=chat)
    thread.start()
    assert first_item.wait(30)
    outage.server.stop()
    thread.join(60)
    reply = result["reply"]
    assert reply.status == 200
    assert reply.types()[-1] == "error"
    assert "Redis was unreachable" in reply.chunks[-1]["content"]
