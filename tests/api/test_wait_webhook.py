"""A Wait node's resume URL through the Flask test client, executions run in the api process
(regular mode): the answers n8n 2.41.1 gives (tried on it), the node's suffix, method and
response modes. The same through real processes and a one-slot worker: tests/e2e."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest
import redis

from api.app import create_app
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.sub_workflows import node, set_node, wait_for_call
from tests.waiting import wait_until


def _webhook(path: str) -> dict:
    return node("Webhook", "n8n-nodes-base.webhook", 2,
                {"httpMethod": "POST", "path": path, "responseMode": "lastNode"})  # fmt: skip


def _flow(path: str, wait: dict, *after: dict) -> dict:
    nodes = [
        _webhook(path),
        set_node("Link", resumeUrl="={{ $execution.resumeUrl }}"),
        wait,
        *after,
    ]
    names = [n["name"] for n in nodes]
    connections = {
        a: {"main": [[{"node": b, "type": "main", "index": 0}]]}
        for a, b in zip(names, names[1:], strict=False)
    }
    return {"id": path, "name": path, "nodes": nodes, "connections": connections}


RESPOND = node("Respond", "n8n-nodes-base.respondToWebhook", 1.1, {
    "respondWith": "json", "responseBody": '={"answer": "{{ $json.body.answer }}"}',
    "options": {"responseCode": 201}})  # fmt: skip
FLOWS = [
    _flow("respond", wait_for_call("Wait", responseMode="responseNode",
                                   options={"webhookSuffix": "done"}), RESPOND),
    _flow("quiet", wait_for_call("Wait", responseCode=202, options={"noResponseBody": True})),
    _flow("fails", wait_for_call("Wait", method="PUT"),
          set_node("Boom", x="={{ $json.body.nothing.deeper }}")),
]  # fmt: skip


@pytest.fixture(scope="module")
def api(redis_url):
    keys = Keys(prefix=f"ww{uuid.uuid4().hex[:8]}:")
    settings = Settings(redis_url=redis_url, key_prefix=keys.prefix, executions_mode="regular",
                        webhook_url="https://chat.example.com/", keepalive_seconds=0.5)  # fmt: skip
    app = create_app(settings=settings)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = WorkflowStore(client, keys, load_workflow)
    for flow in FLOWS:
        store.save(flow)
        store.activate(flow["id"])
    yield app.test_client(), client, keys
    app.extensions["mini_n8n"].close()
    client.close()


def _waiting(api, path: str) -> tuple[str, str]:
    """Start the workflow at `path`; the id of its waiting execution and its resume URL's path
    and query (the test client's)."""
    test_client, _, _ = api
    started = test_client.post(f"/webhook/{path}", json={"answer": "no"})
    assert started.status_code == 200, started.get_data(as_text=True)
    url = urlsplit(started.get_json()["resumeUrl"])
    assert url.netloc == "chat.example.com"  # WEBHOOK_URL
    return started.headers["X-Execution-Id"], f"{url.path}?{url.query}"


def _status(api, execution_id: str) -> str:
    _, client, keys = api
    raw = client.get(keys.execution(execution_id))
    return __import__("json").loads(raw)["status"]


def test_the_call_with_the_nodes_suffix_is_answered_by_the_respond_to_webhook_after_it(api):
    test_client, _, _ = api
    execution_id, resume = _waiting(api, "respond")
    path, query = resume.split("?")
    preflight = test_client.options(resume)
    assert (preflight.status_code, preflight.headers["Access-Control-Allow-Origin"]) == (204, "*")
    missing = test_client.post(resume, json={"answer": "yes"})
    assert missing.status_code == 404
    assert (
        "does not contain a waiting webhook with a matching path/method"
        in missing.get_json()["message"]
    )
    answered = test_client.post(f"{path}/done?{query}", json={"answer": "yes"})
    assert (answered.status_code, answered.get_json()) == (201, {"answer": "yes"})
    wait_until(lambda: _status(api, execution_id) == "success", 10, "the execution to end")
    again = test_client.post(f"{path}/done?{query}", json={"answer": "yes"})
    assert again.status_code == 409
    assert again.get_json()["message"] == f'The execution "{execution_id}" has finished already.'


def test_on_received_answers_with_the_nodes_code_and_no_body_when_asked(api):
    test_client, _, _ = api
    execution_id, resume = _waiting(api, "quiet")
    answered = test_client.post(resume, json={})
    assert (answered.status_code, answered.get_data()) == (202, b"")
    wait_until(lambda: _status(api, execution_id) == "success", 10, "the execution to end")


def test_a_call_to_an_execution_that_failed_or_does_not_exist_is_refused_as_n8n_refuses_it(api):
    test_client, _, _ = api
    execution_id, resume = _waiting(api, "fails")
    assert test_client.put(resume, json={}).get_json() == {"message": "Workflow was started"}
    wait_until(lambda: _status(api, execution_id) == "error", 10, "the execution to fail")
    failed = test_client.put(resume, json={})
    assert failed.status_code == 409
    assert (
        failed.get_json()["message"] == f'The execution "{execution_id}" has finished with error.'
    )
    unknown = test_client.post("/webhook-waiting/0123456789abcdef?signature=x", json={})
    assert unknown.status_code == 404
    assert unknown.get_json()["message"] == 'The execution "0123456789abcdef" does not exist.'
