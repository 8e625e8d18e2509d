"""HTTP Request in chats, on a real deployment (gunicorn + gevent api, Celery gevent worker,
Redis) allowed to reach 127.0.0.1 only (MINI_N8N_HTTP_ALLOWED_IP_RANGES), with a fixed-answer
server there (tests/fakes/http_answers.py):

- an Agent calls an HTTP Request Tool whose URL the model fills (`$fromAI`), and streams the
  answer it built from the tool's items;
- Chat Trigger -> HTTP Request -> Chat node: the server's answer reaches the chat user through
  n8n's chat WebSocket;
- a request that fails tells a public chat the generic error only, the record keeps n8n's words,
  and the credential it carried is nowhere: not in the answer, the record or the logs.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.chat.conversation import CONTINUE, next_frame, open_chat, start
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids

SECRET = "e2e-HTTP-SECRET-3141"
CREDENTIAL = {"id": "e2e-header", "name": "Weather key", "type": "httpHeaderAuth",
              "data": {"name": "X-Api-Key", "value": SECRET}}  # fmt: skip


@pytest.fixture(scope="module")
def answers():
    from tests.fakes.http_answers import start_http_answers

    server = start_http_answers("127.0.0.1")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployment(redis_url, tmp_path_factory):
    path = tmp_path_factory.mktemp("http") / "credentials.json"
    path.write_text(json.dumps([CREDENTIAL]))
    with Deployment.running(
        redis_url,
        MINI_N8N_KEEPALIVE_SECONDS="1",
        MINI_N8N_CREDENTIALS_FILE=str(path),
        MINI_N8N_HTTP_ALLOWED_IP_RANGES="127.0.0.1/32",
    ) as deploy:
        yield deploy


def trigger(mode: str) -> dict:
    kind = "hostedChat" if mode == "responseNodes" else "webhook"  # what a Chat node needs
    return {"id": "t", "name": "When chat message received", "webhookId": str(uuid.uuid4()),
            "type": "@n8n/n8n-nodes-langchain.chatTrigger", "typeVersion": 1.3,
            "position": [0, 0], "parameters": {"public": True, "mode": kind,
                                                "options": {"responseMode": mode}}}  # fmt: skip


def agent_with_http_tool(url: str) -> dict:
    nodes = [
        trigger("streaming"),
        {"id": "a", "name": "AI Agent", "type": "@n8n/n8n-nodes-langchain.agent",
         "typeVersion": 2.2, "position": [220, 0], "parameters": {"options": {}}},
        {"id": "m", "name": "Mock Chat Model", "type": "mini-n8n.lmChatMock", "typeVersion": 1,
         "position": [100, 200], "parameters": {}},
        {"id": "w", "name": "Weather", "type": "n8n-nodes-base.httpRequestTool",
         "typeVersion": 4.2, "position": [300, 200],
         "parameters": {"toolDescription": "The weather of a city",
                        "url": f"={url}/json?city={{{{ $fromAI('city', 'The city', 'string') }}}}",
                        "authentication": "genericCredentialType",
                        "genericAuthType": "httpHeaderAuth", "options": {}},
         "credentials": {"httpHeaderAuth": {"id": "e2e-header", "name": "Weather key"}}},
    ]  # fmt: skip
    connections = {
        "When chat message received": {"main": [[{"node": "AI Agent", "type": "main", "index": 0}]]},
        "Mock Chat Model": {"ai_languageModel": [[{"node": "AI Agent", "type": "ai_languageModel", "index": 0}]]},
        "Weather": {"ai_tool": [[{"node": "AI Agent", "type": "ai_tool", "index": 0}]]},
    }  # fmt: skip
    return fresh_ids(
        {"name": "agent with an HTTP tool", "nodes": nodes, "connections": connections}
    )


def http_between_trigger_and_chat(
    url: str, mode: str = "responseNodes", auth: bool = False
) -> dict:
    params: dict = {"url": url, "sendQuery": True, "options": {},
                    "queryParameters": {"parameters": [{"name": "q", "value": "={{ $json.chatInput }}"}]}}  # fmt: skip
    http = {"id": "h", "name": "HTTP Request", "type": "n8n-nodes-base.httpRequest",
            "typeVersion": 4.2, "position": [220, 0], "parameters": params}  # fmt: skip
    if auth:
        params.update(authentication="genericCredentialType", genericAuthType="httpHeaderAuth")
        http["credentials"] = {"httpHeaderAuth": {"id": "e2e-header", "name": "Weather key"}}
    say = {"id": "c", "name": "Say", "type": "@n8n/n8n-nodes-langchain.chat", "typeVersion": 1,
           "position": [440, 0], "parameters": {
               "message": "={{ 'The server says ' + $json.name + ' for ' + $('When chat message received').item.json.chatInput }}",
               "options": {"waitUserReply": False}}}  # fmt: skip
    connections = {
        "When chat message received": {"main": [[{"node": "HTTP Request", "type": "main", "index": 0}]]},
        "HTTP Request": {"main": [[{"node": "Say", "type": "main", "index": 0}]]},
    }  # fmt: skip
    nodes = [trigger(mode), http, say] if mode == "responseNodes" else [trigger(mode), http]
    if mode != "responseNodes":
        del connections["HTTP Request"]
    return fresh_ids(
        {"name": "http between trigger and chat", "nodes": nodes, "connections": connections}
    )


def test_an_agent_calls_the_http_request_tool_and_streams_what_it_read(deployment, answers):
    workflow = deployment.activate(agent_with_http_tool(answers.url))
    reply = stream_chat(chat_url(deployment.base, workflow), "ask Weather city=Paris", "s-tool")
    assert reply.status == 200
    text = "".join(c.get("content", "") for c in reply.chunks if c["type"] == "item")
    read = '[{"id":1,"name":"Ada","tags":["a","b"],"nested":{"ok":true}}]'
    assert text == f"Based on the tools: Weather returned {read}."
    line, headers, _ = next(r for r in answers.requests if "city=Paris" in r[0])
    assert line.startswith("GET /json?city=Paris ") and headers["x-api-key"] == SECRET
    record = deployment.execution(reply.headers["x-execution-id"])
    assert record["status"] == "success"
    tool = record["runData"]["Weather"][0]
    assert tool["inputOverride"]["ai_tool"][0][0]["json"] == {"city": "Paris"}


def test_http_request_between_a_chat_trigger_and_a_chat_node(deployment, answers):
    workflow = deployment.activate(http_between_trigger_and_chat(f"{answers.url}/json"))
    session = f"s-{uuid.uuid4().hex[:8]}"
    execution_id = start(deployment.base, workflow, session, "Lyon")
    with open_chat(deployment.base, session, execution_id) as ws:
        assert next_frame(ws) == "The server says Ada for Lyon"
        assert next_frame(ws) == CONTINUE
    assert any(r[0].startswith("GET /json?q=Lyon ") for r in answers.requests)
    assert deployment.execution(execution_id)["status"] == "success"


def test_a_failed_request_tells_a_public_chat_little_and_leaks_no_credential(deployment, answers):
    workflow = deployment.activate(
        http_between_trigger_and_chat(f"{answers.url}/status/401", "streaming", auth=True)
    )
    url = chat_url(deployment.base, workflow)
    reply = stream_chat(url, "Paris", "s-fail")
    execution_id = reply.headers["x-execution-id"]
    body = json.dumps(reply.chunks)
    assert "Authorization failed" not in body and f"execution {execution_id}" in body
    record = deployment.execution(execution_id)
    assert record["status"] == "error"
    error = record["runData"]["HTTP Request"][0]["error"]
    assert (error["message"], error["httpCode"]) == (
        "Authorization failed - please check your credentials",
        "401",
    )
    logs = deployment.worker.output() + "".join(p.output() for p, _ in deployment.apis)
    assert SECRET not in body + json.dumps(record) + logs
