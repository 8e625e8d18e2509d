"""The webhook endpoints in milliseconds: the Flask app through its test client against a real
valkey, executions run in the api process (regular mode), so each response mode's headers and
errors and the bad-input matrix are checked without starting gunicorn or Celery. The same
behaviour through real processes is in tests/e2e."""

from __future__ import annotations

import json
import uuid

import pytest
import redis
from werkzeug.test import EnvironBuilder

from api.app import create_app
from api.responses import RELEASE_ENVIRON
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.workflows import GREETING, REDIS_CHAT, example, node, with_response_mode

NDJSON = "application/x-ndjson; charset=utf-8"


def _respond_workflow() -> dict:
    return {
        "id": "respond",
        "name": "Respond",
        "nodes": [
            {"id": "w", "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
             "position": [0, 0],
             "parameters": {"httpMethod": "POST", "path": "respond", "responseMode": "responseNode"}},
            {"id": "r", "name": "Respond", "type": "n8n-nodes-base.respondToWebhook",
             "typeVersion": 1.1, "position": [200, 0],
             "parameters": {
                 "respondWith": "json", "responseBody": '={"n": {{ $json.body.n * 2 }}}',
                 "options": {"responseCode": 201,
                             "responseHeaders": {"entries": [{"name": "X-Greeting", "value": "hi"}]}}}},
        ],
        "connections": {"Webhook": {"main": [[{"node": "Respond", "type": "main", "index": 0}]]}},
    }  # fmt: skip


def _chat(mode: str, workflow_id: str) -> dict:
    workflow = with_response_mode(example(REDIS_CHAT), mode)
    workflow["id"] = workflow_id
    trigger = node(workflow, "When chat message received")
    trigger["parameters"]["path"] = workflow_id
    return workflow


@pytest.fixture(scope="module")
def api(redis_url):
    keys = Keys(prefix=f"wh{uuid.uuid4().hex[:8]}:")
    settings = Settings(
        redis_url=redis_url,
        key_prefix=keys.prefix,
        executions_mode="regular",
        max_body_bytes=64 * 1024,
    )
    app = create_app(settings=settings)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = WorkflowStore(client, keys, load_workflow)
    failing = example(GREETING)
    failing["id"], failing["name"] = "failing", "failing"
    node(failing, "Webhook")["parameters"]["path"] = "failing"
    node(failing, "Edit Fields")["parameters"]["assignments"]["assignments"][0]["value"] = (
        "={{ $json.body.nothing.deeper }}"
    )
    received = example(GREETING)
    received["id"] = "received"
    node(received, "Webhook")["parameters"].update(path="received", responseMode="onReceived")
    workflows = [
        example(GREETING),
        failing,
        received,
        _respond_workflow(),
        _chat("streaming", "chat-streaming"),
        _chat("lastNode", "chat-lastnode"),
    ]
    for workflow in workflows:
        store.save(workflow)
        store.activate(workflow["id"])
    yield app.test_client(), client, keys
    app.extensions["mini_n8n"].close()
    client.close()


def _executions(api, workflow_id: str) -> int:
    _, client, keys = api
    return client.zcard(keys.workflow_executions(workflow_id))


# -- response modes -------------------------------------------------------------------------------


def test_streaming_answers_ndjson_with_anti_buffering_headers_and_the_execution_id(api):
    test_client, _, _ = api
    response = test_client.post(
        "/webhook/chat-streaming", json={"sessionId": "s1", "chatInput": "What is 19 * 23?"}
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == NDJSON
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    assert response.headers["X-Execution-Id"]
    chunks = [json.loads(line) for line in response.data.decode().splitlines()]
    chunks = [c for c in chunks if c["type"] != "keepalive"]
    assert chunks[0]["type"] == "begin" and chunks[-1]["type"] == "end"
    text = "".join(c["content"] for c in chunks if c["type"] == "item")
    assert text == "Based on the tools: Calculator returned 437."


@pytest.mark.parametrize("release", [False, True])
def test_an_open_stream_empties_its_environ_only_where_the_server_allows(api, release):
    """api/gunicorn_conf.py sets the flag: that server reads no environ once the app returned,
    and an open stream would keep it for its whole length."""
    test_client, _, _ = api
    app = test_client.application
    environ = EnvironBuilder(
        path="/webhook/chat-streaming",
        method="POST",
        json={"sessionId": f"env-{release}", "chatInput": "What is 19 * 23?"},
    ).get_environ()
    app.config[RELEASE_ENVIRON] = release
    try:
        body = app(environ, lambda status, headers, exc_info=None: None)
        lines = iter(body)
        first = next(lines)
        assert (environ == {}) is release
        data = first + b"".join(lines)
        body.close()
    finally:
        app.config.pop(RELEASE_ENVIRON)
    chunks = [json.loads(line) for line in data.decode().splitlines()]
    text = "".join(c["content"] for c in chunks if c["type"] == "item")
    assert text == "Based on the tools: Calculator returned 437."


def _recorded_error(api, execution_id: str) -> str:
    _, client, keys = api
    return json.loads(client.get(keys.execution(execution_id)))["error"]


def test_streaming_a_failed_run_tells_the_public_only_its_execution_id(api):
    test_client, _, _ = api
    response = test_client.post(
        "/webhook/chat-streaming", json={"sessionId": "s2", "chatInput": ""}
    )
    assert response.status_code == 200
    execution_id = response.headers["X-Execution-Id"]
    last = json.loads(response.data.decode().splitlines()[-1])
    assert last["type"] == "error"
    assert last["content"] == f"The workflow could not answer (execution {execution_id})."
    assert "No prompt specified" in _recorded_error(api, execution_id)  # for the editor


def test_last_node_answers_the_first_items_json(api):
    test_client, _, _ = api
    response = test_client.post("/webhook/greet", json={"name": "Ada"})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.get_json() == {"greeting": "Hello, Ada!", "length": 3}
    assert response.headers["X-Execution-Id"]


def test_last_node_of_a_chat_answers_the_agents_output(api):
    test_client, _, _ = api
    body = {"sessionId": "s3", "chatInput": "my name is Ada"}
    response = test_client.post("/webhook/chat-lastnode", json=body)
    assert response.get_json() == {"output": "Nice to meet you, Ada!"}


def test_a_failed_last_node_run_is_a_500_that_keeps_the_error_in_the_record(api):
    test_client, _, _ = api
    response = test_client.post("/webhook/failing", json={})
    assert response.status_code == 500
    execution_id = response.headers["X-Execution-Id"]
    assert response.get_json() == {
        "message": "Error in workflow",
        "error": f"The workflow could not answer (execution {execution_id}).",
    }
    assert "Cannot read properties of undefined" in _recorded_error(api, execution_id)


def test_on_received_answers_that_the_workflow_was_started(api):
    test_client, _, _ = api
    response = test_client.post("/webhook/received", json={"name": "Ada"})
    assert response.status_code == 200
    execution_id = response.headers["X-Execution-Id"]
    assert response.get_json() == {"message": "Workflow was started", "executionId": execution_id}


def test_response_node_sets_status_headers_and_body(api):
    test_client, _, _ = api
    response = test_client.post("/webhook/respond", json={"n": 21})
    assert response.status_code == 201
    assert response.headers["X-Greeting"] == "hi"
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.get_json() == {"n": 42}
    assert response.headers["X-Execution-Id"]


# -- what is refused, and changes nothing ---------------------------------------------------------


def test_an_unknown_path_is_a_404_json(api):
    test_client, _, _ = api
    response = test_client.post("/webhook/nothing-here", json={})
    assert response.status_code == 404
    assert response.get_json() == {
        "message": 'The requested webhook "POST nothing-here" is not registered.'
    }


def test_a_known_path_with_another_method_is_a_405_with_allow(api):
    test_client, _, _ = api
    response = test_client.put("/webhook/greet", json={})
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.get_json()["message"] == "This webhook is not registered for PUT"


BAD_CHAT_BODIES = [
    (dict(data=b"{not json", content_type="application/json"), "not valid JSON"),
    (dict(data=b"", content_type="application/json"), "must be a JSON object"),
    (dict(json=["a", "list"]), "must be a JSON object"),
    (dict(json={"sessionId": "s", "chatInput": 42}), '"chatInput" must be a string'),
    (dict(json={"sessionId": 7, "chatInput": "hi"}), '"sessionId" must be a non-empty string'),
    (dict(json={"sessionId": "", "chatInput": "hi"}), '"sessionId" must be a non-empty string'),
    (dict(json={"sessionId": "a\nb", "chatInput": "hi"}), "control characters"),
    (dict(data=b'{"sessionId":"\\ud800","chatInput":"hi"}', content_type="application/json"),
     "lone surrogate"),
    (dict(json={"sessionId": "x" * 257, "chatInput": "hi"}), "at most 256 characters"),
    (dict(json={"action": "rm -rf", "sessionId": "s", "chatInput": "hi"}), '"action" must be'),
    (dict(json={"sessionId": "s", "chatInput": "hi", "metadata": [1]}), '"metadata" must be'),
    (dict(data=b'{"sessionId":"s","chatInput":NaN}', content_type="application/json"),
     "not valid JSON"),
    (dict(data=b'{"a":' + b"[" * 100 + b"]" * 100 + b"}", content_type="application/json"),
     "nested too deeply"),
    (dict(data=b'{"sessionId":"s","chatInput":"' + b"x" * 70_000 + b'"}',
          content_type="application/json"), "larger than 65,536 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "message"), BAD_CHAT_BODIES)
def test_a_bad_chat_body_gets_a_4xx_json_error_and_starts_nothing(api, kwargs, message):
    test_client, client, keys = api
    # No key is added; one may go meanwhile: an earlier test's worker drops its execution's
    # lease just after that stream's last event.
    keys_before = set(client.scan_iter())
    before = _executions(api, "chat-streaming")
    response = test_client.post("/webhook/chat-streaming", **kwargs)
    assert response.status_code in (400, 413)
    assert message in response.get_json()["message"]
    assert _executions(api, "chat-streaming") == before
    assert set(client.scan_iter()) <= keys_before
