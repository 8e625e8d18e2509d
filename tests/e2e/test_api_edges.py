"""The api's edges: unknown paths and methods, bad bodies, and a constant Redis connection
count however many requests it serves."""

from __future__ import annotations

import concurrent.futures
import json
from urllib.parse import urlparse

import httpx

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids
from tests.e2e.sockets import connections_to_port
from tests.workflows import REDIS_CHAT, example


def test_unknown_webhook_path_is_a_404_json(deployment):
    response = httpx.post(f"{deployment.base}/webhook/nothing-here", json={})
    assert response.status_code == 404
    assert "not registered" in response.json()["message"]


def test_known_path_with_another_method_is_a_405(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    response = httpx.put(chat_url(deployment.base, workflow), json={})
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "POST"}


def test_a_deactivated_workflow_no_longer_answers(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    deployment.workflows.deactivate(workflow["id"])
    response = httpx.post(chat_url(deployment.base, workflow), json={"chatInput": "hi"})
    assert response.status_code == 404


def served(url: str) -> None:
    """One message answered: the api now remembers the webhook's route."""
    response = httpx.post(url, json={"chatInput": "What is 2 + 2?"}, timeout=30)
    assert response.status_code == 200 and '"type":"end"' in response.text.replace(" ", "")


def test_a_workflow_deactivated_after_the_api_served_it_no_longer_answers(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)
    served(url)
    before = deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"]))
    deployment.workflows.deactivate(workflow["id"])  # by another process than the api
    assert httpx.post(url, json={"chatInput": "hi"}).status_code == 404
    previous = {"action": "loadPreviousSession", "sessionId": "s"}
    assert httpx.post(url, json=previous).status_code == 404
    after = deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"]))
    assert after == before


def test_a_workflow_saved_after_the_api_served_it_answers_as_saved(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)
    served(url)
    saved = deployment.workflows.get_json(workflow["id"])
    trigger = next(n for n in saved["nodes"] if n["type"].endswith(".chatTrigger"))
    trigger["parameters"]["options"]["responseMode"] = "lastNode"
    deployment.workflows.save(saved)  # by another process than the api
    response = httpx.post(url, json={"chatInput": "What is 2 + 2?"}, timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "4" in response.json()["output"]
    trigger["parameters"]["public"] = False
    deployment.workflows.save(saved)
    assert httpx.post(url, json={"chatInput": "hi"}).status_code == 404


def test_bad_bodies_get_400_and_start_nothing(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)
    before = deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"]))
    bad = [
        dict(content=b"{not json", headers={"content-type": "application/json"}),
        dict(json=["a", "list"]),
        dict(json={"sessionId": "s", "chatInput": 42}),
        dict(json={"sessionId": 7, "chatInput": "hi"}),
        dict(json={"sessionId": "a\nb", "chatInput": "hi"}),
        dict(json={"sessionId": "x" * 257, "chatInput": "hi"}),
        dict(json={"action": "rm -rf", "sessionId": "s", "chatInput": "hi"}),
    ]
    for kwargs in bad:
        response = httpx.post(url, **kwargs)
        assert response.status_code == 400, (kwargs, response.text)
        assert response.json()["message"]
    after = deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"]))
    assert after == before


def test_a_missing_session_id_gets_a_fresh_one(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)
    first = httpx.post(url, json={"chatInput": "my name is Ada"}, timeout=30)
    second = httpx.post(url, json={"chatInput": "What is my name?"}, timeout=30)
    assert first.headers["x-session-id"] != second.headers["x-session-id"]
    items = [json.loads(line) for line in second.text.splitlines()]
    text = "".join(c.get("content", "") for c in items if c["type"] == "item")
    assert text == "I don't know your name yet."  # the two messages did not share a session


def test_redis_connections_stay_constant_across_requests(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)
    api_process = deployment.apis[0][0]
    redis_port = urlparse(deployment.redis_url).port

    def burst(n: int):
        with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
            replies = list(
                pool.map(lambda i: stream_chat(url, "What is 2 + 2?", f"c{i}"), range(n))
            )
        assert all(r.types()[-1] == "end" for r in replies)

    burst(5)
    after_5 = connections_to_port(api_process.pid, redis_port)
    burst(500)
    after_500 = connections_to_port(api_process.pid, redis_port)
    assert after_5 > 0
    assert after_500 == after_5


def test_an_unreachable_broker_gives_503_and_leaves_the_session_free(deployment):
    from tests.e2e.deployment import free_port

    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"
    broken_api = deployment.start_api(CELERY_BROKER_URL=dead_broker)
    response = httpx.post(
        chat_url(broken_api, workflow), json={"sessionId": "s-503", "chatInput": "hi"}, timeout=60
    )
    assert response.status_code == 503
    assert "could not be started" in response.json()["message"]
    ids = deployment.redis.zrange(deployment.keys.workflow_executions(workflow["id"]), 0, -1)
    assert [deployment.execution(i)["status"] for i in ids] == ["error"]
    # The failed message does not hold the session's line: the next one runs at once.
    reply = stream_chat(chat_url(deployment.base, workflow), "hi again", "s-503", timeout=10)
    assert reply.text() == "You said: hi again"
