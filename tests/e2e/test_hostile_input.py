"""Hostile input against a real api and worker: text UTF-8 cannot carry, bodies nested too deep,
values that make NaN, host names a browser was tricked into using. Each case once broke a
worker or answered 500; here each gets a clear answer and the deployment keeps serving."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, with_model_delay

DEEP = 1000  # far past the 64 levels a request may nest


def _strict_json(text: str):
    """JSON as a strict parser reads it: NaN and Infinity are not JSON."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _double_workflow() -> dict:
    """Webhook (lastNode) -> Set `out = qty * 2`: arithmetic on a request's value."""
    return fresh_ids(
        {
            "name": "double",
            "id": "x",
            "nodes": [
                {
                    "id": "1",
                    "name": "Webhook",
                    "type": "n8n-nodes-base.webhook",
                    "typeVersion": 2,
                    "position": [0, 0],
                    "parameters": {"httpMethod": "POST", "path": "x", "responseMode": "lastNode"},
                },
                {
                    "id": "2",
                    "name": "Set",
                    "type": "n8n-nodes-base.set",
                    "typeVersion": 3.4,
                    "position": [200, 0],
                    "parameters": {
                        "assignments": {
                            "assignments": [
                                {
                                    "id": "a",
                                    "name": "out",
                                    "value": "={{ $json.body.qty * 2 }}",
                                    "type": "number",
                                }
                            ]
                        }
                    },
                },
            ],
            "connections": {"Webhook": {"main": [[{"node": "Set", "type": "main", "index": 0}]]}},
        }
    )


def _post_raw(url: str, raw: bytes) -> httpx.Response:
    """POST JSON text as it is (escapes and all), not re-encoded by the client."""
    return httpx.post(url, content=raw, headers={"content-type": "application/json"}, timeout=30)


def _hook_url(base: str, workflow: dict) -> str:
    return f"{base}/webhook/{workflow['nodes'][0]['parameters']['path']}"


def _executions(deployment, workflow) -> int:
    return deployment.redis.zcard(deployment.keys.workflow_executions(workflow["id"]))


def test_a_lone_surrogate_gets_400_and_the_same_worker_streams_the_next_chat_token_by_token(
    deployment,
):
    workflow = deployment.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 60)))
    url = chat_url(deployment.base, workflow)
    raw = b'{"sessionId":"sur","chatInput":"a\\ud800b"}'  # a lone surrogate, as JSON escapes it
    response = _post_raw(url, raw)
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["message"]
    assert _executions(deployment, workflow) == 0
    assert deployment.redis.llen(deployment.keys.chat("sur")) == 0

    reply = stream_chat(url, "my name is Ada", "sur-next")
    assert reply.types()[-1] == "end"
    assert reply.text() == "Nice to meet you, Ada!"
    items = reply.items()
    assert len(items) == 5  # one line per token ("Nice ", "to ", …), each flushed as produced
    gaps = [b - a for a, b in zip(reply.arrivals, reply.arrivals[1:], strict=False)]
    assert max(gaps) >= 0.04  # tokens arrived apart, not all at the end in one line
    log = deployment.worker.output()
    assert "Traceback" not in log and "Exception in thread" not in log


def test_a_surrogate_pair_is_kept_in_redis_memory_as_the_one_character_it_is(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    session = f"sur-{uuid.uuid4().hex[:6]}"
    raw = b'{"sessionId":"' + session.encode() + b'","chatInput":"x\\ud83d\\ude00"}'
    response = _post_raw(chat_url(deployment.base, workflow), raw)
    assert response.status_code == 200
    stored = deployment.redis.lrange(deployment.keys.chat(session), 0, -1)
    assert json.loads(stored[1])["data"]["content"] == "x\U0001f600"


@pytest.mark.parametrize("where", ["webhook", "chat"])
def test_a_body_nested_1000_deep_gets_400_and_starts_nothing(deployment, where):
    deep = "[" * DEEP + "]" * DEEP
    if where == "webhook":
        workflow = deployment.activate(_double_workflow())
        url = _hook_url(deployment.base, workflow)
        kwargs = dict(content=f'{{"name":{deep}}}', headers={"content-type": "application/json"})
    else:
        workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
        url = chat_url(deployment.base, workflow)
        body = f'{{"sessionId":"d","chatInput":"hi","metadata":{{"x":{deep}}}}}'
        kwargs = dict(content=body, headers={"content-type": "application/json"})
    response = httpx.post(url, timeout=10, **kwargs)
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["message"]
    assert _executions(deployment, workflow) == 0
    assert "RecursionError" not in "".join(deployment.apis[0][0].lines)


def test_nan_from_arithmetic_is_answered_as_null_in_valid_json(deployment):
    workflow = deployment.activate(_double_workflow())
    response = httpx.post(_hook_url(deployment.base, workflow), json={"qty": "abc"}, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert _strict_json(response.text) == {"out": None}
    record = deployment.execution(response.headers["x-execution-id"])
    assert record["status"] == "success"


def test_a_megabyte_numeric_looking_value_is_converted_and_answered(deployment):
    workflow = deployment.activate(_double_workflow())
    url = _hook_url(deployment.base, workflow)
    response = httpx.post(url, json={"qty": "1" * 1_000_000 + "x"}, timeout=30)
    assert response.status_code == 200
    assert _strict_json(response.text) == {"out": None}  # Number("111…1x") is NaN
    response = httpx.post(url, json={"qty": " 21 "}, timeout=10)
    assert response.json() == {"out": 42}


def test_the_editor_page_forbids_framing_inline_code_and_sniffing(deployment):
    response = httpx.get(f"{deployment.base}/")
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{deployment.base}/healthz").headers["x-content-type-options"] == "nosniff"


def test_the_chat_page_may_be_framed_where_its_allowed_origins_say(deployment):
    workflow = fresh_ids(example(REDIS_CHAT))
    trigger = next(n for n in workflow["nodes"] if n["type"].endswith("chatTrigger"))
    trigger["parameters"]["options"]["allowedOrigins"] = "https://shop.example, https://b.example"
    deployment.activate(workflow)
    response = httpx.get(chat_url(deployment.base, workflow))
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'self' https://shop.example https://b.example" in csp
    assert response.headers["x-content-type-options"] == "nosniff"


def test_rest_without_a_key_answers_only_loopback_host_names(deployment):
    base = deployment.base  # bound to 127.0.0.1, no MINI_N8N_API_KEY
    rebound = {"host": f"rebind.attacker.example:{base.rsplit(':', 1)[1]}"}
    response = httpx.get(f"{base}/rest/workflows", headers=rebound)
    assert response.status_code == 403
    assert "loopback" in response.json()["message"]
    session = f"keep-{uuid.uuid4().hex[:6]}"
    deployment.redis.lpush(deployment.keys.chat(session), '{"type":"human","data":{}}')
    response = httpx.delete(f"{base}/rest/sessions/{session}", headers=rebound)
    assert response.status_code == 403
    assert deployment.redis.exists(deployment.keys.chat(session))  # nothing was cleared
    for host in ("localhost", "127.0.0.1", "[::1]"):
        port = base.rsplit(":", 1)[1]
        response = httpx.get(f"{base}/rest/workflows", headers={"host": f"{host}:{port}"})
        assert response.status_code == 200, host


def test_a_sum_of_499_terms_is_calculated_instead_of_losing_the_turn(deployment):
    workflow = deployment.activate(fresh_ids(example(REDIS_CHAT)))
    question = "What is " + "+".join(["1"] * 499) + "?"
    reply = stream_chat(chat_url(deployment.base, workflow), question, "long-sum")
    assert reply.types()[-1] == "end"
    assert reply.text() == "Based on the tools: Calculator returned 499."
