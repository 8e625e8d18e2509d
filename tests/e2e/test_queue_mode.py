"""Queue mode end to end: a gunicorn+gevent api, Celery worker processes, a real Redis."""

from __future__ import annotations

import concurrent.futures

import httpx

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids
from tests.workflows import GREETING, REDIS_CHAT, example, with_model_delay, with_response_mode

ANSWER_437 = "Based on the tools: Calculator returned 437."


def test_streams_the_agent_answer_as_ndjson_from_the_production_chat_url(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    reply = stream_chat(chat_url(deployment.base, workflow), "What is 19 * 23?", "s-437")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    assert reply.headers["cache-control"] == "no-cache"
    assert reply.headers["x-accel-buffering"] == "no"
    assert reply.headers["x-execution-id"]
    assert reply.types()[0] == "begin" and reply.types()[-1] == "end"
    assert len(reply.items()) > 1
    assert reply.text() == ANSWER_437
    record = deployment.execution(reply.headers["x-execution-id"])
    assert record["status"] == "success"
    assert record["worker"]["pid"] == deployment.worker.pid  # the one worker there is ran it


def test_answers_with_json_in_last_node_mode(deployment):
    workflow = deployment.activate(fresh_ids(with_response_mode(example(REDIS_CHAT), "lastNode")))
    response = httpx.post(
        chat_url(deployment.base, workflow),
        json={"sessionId": "s-last", "chatInput": "What is 19 * 23?"},
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"output": ANSWER_437}
    assert response.headers["x-execution-id"]


def test_plain_webhook_answers_with_the_last_nodes_json(deployment):
    workflow = deployment.activate(fresh_ids(example(GREETING)))
    path = workflow["nodes"][0]["parameters"]["path"]
    response = httpx.post(f"{deployment.base}/webhook/{path}", json={"name": "Ada"}, timeout=30)
    assert response.status_code == 200
    assert response.json() == {"greeting": "Hello, Ada!", "length": 3}


def test_on_received_answers_before_the_run_ends(deployment):
    slow = with_model_delay(example(REDIS_CHAT), 300)
    workflow = fresh_ids(slow)
    trigger = next(n for n in workflow["nodes"] if n["type"].endswith("chatTrigger"))
    trigger["type"] = "n8n-nodes-base.webhook"  # the Webhook trigger has onReceived
    trigger["parameters"] = {
        "httpMethod": "POST",
        "path": f"later-{workflow['id']}",
        "responseMode": "onReceived",
    }
    # The Agent reads chatInput from the body: a Set node is not needed, a define prompt is.
    agent = next(n for n in workflow["nodes"] if n["name"] == "AI Agent")
    agent["parameters"]["promptType"] = "define"
    agent["parameters"]["text"] = "={{ $json.body.chatInput }}"
    for node in workflow["nodes"]:
        if node["name"] == "Redis Chat Memory":
            node["parameters"]["sessionIdType"] = "customKey"
            node["parameters"]["sessionKey"] = "={{ $json.body.sessionId }}"
    conns = workflow["connections"]["Redis Chat Memory"]["ai_memory"][0]
    workflow["connections"]["Redis Chat Memory"]["ai_memory"][0] = [
        c for c in conns if c["node"] == "AI Agent"
    ]
    deployment.activate(workflow)
    response = httpx.post(
        f"{deployment.base}/webhook/later-{workflow['id']}",
        json={"sessionId": "s-later", "chatInput": "What is 19 * 23?"},
        timeout=30,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["message"] == "Workflow was started"
    record = deployment.execution(body["executionId"])
    # Answered before the run ended: 7 tokens 300 ms apart keep it running for 2 s at least.
    assert record["status"] in ("new", "running")


def test_tokens_arrive_incrementally_with_a_slow_model(deployment):
    workflow = deployment.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 100)))
    reply = stream_chat(chat_url(deployment.base, workflow), "What is 19 * 23?", "s-slow")
    assert reply.text() == ANSWER_437
    item_times = [
        t for c, t in zip(reply.chunks, reply.arrivals, strict=True) if c["type"] == "item"
    ]
    assert len(item_times) == 7
    # 7 tokens, 100 ms apart: the first arrives ~0.6 s before the last unless something buffers.
    assert item_times[-1] - item_times[0] > 0.45
    gaps = [b - a for a, b in zip(item_times, item_times[1:], strict=False)]
    assert sum(1 for g in gaps if g > 0.05) >= 5


def test_two_hundred_concurrent_streams_lose_and_duplicate_nothing(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(deployment.base, workflow)

    def one(i: int):
        return stream_chat(url, f"What is {i} * 3?", f"many-{i}", timeout=120)

    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        replies = list(pool.map(one, range(200)))
    for i, reply in enumerate(replies):
        assert reply.status == 200
        assert reply.types()[0] == "begin" and reply.types()[-1] == "end", reply.chunks[-1]
        assert reply.types().count("begin") == 1 and reply.types().count("end") == 1
        assert reply.text() == f"Based on the tools: Calculator returned {i * 3}."
        words = [c["content"] for c in reply.items()]
        assert words == [
            "Based ",
            "on ",
            "the ",
            "tools: ",
            "Calculator ",
            "returned ",
            f"{i * 3}.",
        ]


def test_a_quiet_stream_gets_keepalive_lines_and_completes(deployment):
    # 6 s between tokens: longer than any client or connection read timeout on the way.
    workflow = deployment.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 6000)))
    reply = stream_chat(chat_url(deployment.base, workflow), "hello", "s-quiet", timeout=60)
    assert reply.text() == "You said: hello"
    assert reply.types()[-1] == "end"
    keepalives = [c for c in reply.chunks if c["type"] == "keepalive"]
    assert len(keepalives) >= 8  # two quiet gaps of 6 s, a keepalive line each second


def test_respond_to_webhook_sets_status_headers_and_body(deployment):
    path = f"respond-{fresh_ids(example(GREETING))['id']}"
    workflow = fresh_ids(
        {
            "name": "Respond",
            "nodes": [
                {"id": "w", "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
                 "position": [0, 0], "webhookId": "x",
                 "parameters": {"httpMethod": "POST", "path": path, "responseMode": "responseNode"}},
                {"id": "r", "name": "Respond to Webhook", "type": "n8n-nodes-base.respondToWebhook",
                 "typeVersion": 1.1, "position": [200, 0],
                 "parameters": {
                     "respondWith": "json",
                     "responseBody": '={"hello": "{{ $json.body.name }}", "n": {{ $json.body.n * 2 }}}',
                     "options": {"responseCode": 201,
                                 "responseHeaders": {"entries": [{"name": "X-Greeting", "value": "hi"}]}}}},
            ],
            "connections": {"Webhook": {"main": [[{"node": "Respond to Webhook", "type": "main", "index": 0}]]}},
        }
    )  # fmt: skip
    workflow["nodes"][0]["parameters"]["path"] = path
    deployment.activate(workflow)
    response = httpx.post(
        f"{deployment.base}/webhook/{path}", json={"name": "Ada", "n": 21}, timeout=30
    )
    assert response.status_code == 201
    assert response.headers["x-greeting"] == "hi"
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"hello": "Ada", "n": 42}
    assert response.headers["x-execution-id"]


def test_a_failed_run_in_last_node_mode_is_a_500_whose_error_stays_in_the_record(deployment):
    workflow = fresh_ids(example(GREETING))
    assignments = workflow["nodes"][1]["parameters"]["assignments"]["assignments"]
    assignments[0]["value"] = "={{ $json.body.nothing.deeper }}"
    deployment.activate(workflow)
    path = workflow["nodes"][0]["parameters"]["path"]
    response = httpx.post(f"{deployment.base}/webhook/{path}", json={}, timeout=30)
    assert response.status_code == 500
    execution_id = response.headers["x-execution-id"]
    assert response.json() == {
        "message": "Error in workflow",
        "error": f"The workflow could not answer (execution {execution_id}).",
    }
    record = deployment.execution(execution_id)
    assert record["status"] == "error"
    assert "Cannot read properties of undefined" in record["error"]


def test_a_large_body_goes_to_its_worker_beside_the_record_not_in_the_tasks_message(deployment):
    """Past 64 KiB the items are stored once beside the record, for the worker to read, and
    dropped with the execution's end (tests/api/test_launcher.py: what the task carries)."""
    workflow = deployment.activate(fresh_ids(example(GREETING)))
    path = workflow["nodes"][0]["parameters"]["path"]
    name = "Ada" + "a" * 200_000
    response = httpx.post(f"{deployment.base}/webhook/{path}", json={"name": name}, timeout=30)
    assert response.status_code == 200
    assert response.json() == {"greeting": f"Hello, {name}!", "length": len(name)}
    execution_id = response.headers["x-execution-id"]
    assert not deployment.redis.exists(deployment.keys.execution_items(execution_id))  # its end
