"""The OpenAI Chat Model through the real queue: gunicorn+gevent api, Celery worker, Redis, and
a fake OpenAI-compatible server that streams token by token."""

from __future__ import annotations

import json

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.models.conftest import SECRET, export, openai_chat

TOKEN_DELAY = 0.05  # seconds between the fake's streamed pieces


def test_calculator_conversation_streams_token_by_token_through_the_queue(deploy, fake):
    fake.delay_per_token = TOKEN_DELAY
    workflow = deploy.activate(openai_chat())
    reply = stream_chat(chat_url(deploy.base, workflow), "What is 6 * 7?", "calc-1")

    assert reply.status == 200
    assert reply.types()[0] == "begin" and reply.types()[-1] == "end"
    assert reply.text() == "Based on the tools: Calculator returned 42."
    items = [t for c, t in zip(reply.chunks, reply.arrivals, strict=True) if c["type"] == "item"]
    assert len(items) == 7  # one chunk per streamed word
    assert items[-1] - items[0] >= 6 * TOKEN_DELAY * 0.6  # they arrived spread out, not at once
    # The tool call came in pieces (a head, then 4-character argument pieces) and was reassembled.
    assert sum(kind == "tool_call" for _, kind, _ in fake.sent) >= 3
    record = deploy.execution(reply.headers["x-execution-id"])
    assert record["status"] == "success"
    calculator = record["runData"]["Calculator"][0]
    assert calculator["inputOverride"]["ai_tool"][0][0]["json"] == {"input": "6 * 7"}
    assert len(record["runData"]["OpenAI Chat Model"]) == 2  # asked, then answered from the tool
    first = fake.requests[0]
    assert first["headers"]["authorization"] == f"Bearer {SECRET}"  # the credential's key is used
    assert first["body"]["model"] == "gpt-4.1-mini" and first["body"]["stream"] is True
    assert first["body"]["tools"][0]["function"]["name"] == "Calculator"  # its node's name


def test_three_turn_conversation_is_remembered_in_redis(deploy, fake):
    fake.delay_per_token = 0.01
    workflow = deploy.activate(openai_chat())
    url = chat_url(deploy.base, workflow)
    answers = [
        stream_chat(url, message, "ada-1").text()
        for message in ("What is 6 * 7?", "my name is Ada", "What is my name?")
    ]
    assert answers == [
        "Based on the tools: Calculator returned 42.",
        "Nice to meet you, Ada!",
        "Your name is Ada.",
    ]
    stored = deploy.chat_list("ada-1")  # newest first, LangChain's format
    assert [(m["type"], m["data"]["content"]) for m in reversed(stored)] == [
        ("human", "What is 6 * 7?"),
        ("ai", "Based on the tools: Calculator returned 42."),
        ("human", "my name is Ada"),
        ("ai", "Nice to meet you, Ada!"),
        ("human", "What is my name?"),
        ("ai", "Your name is Ada."),
    ]
    # The last request carried the history from memory: that is how the model knew the name.
    sent = [(m["role"], m["content"]) for m in fake.requests[-1]["body"]["messages"]]
    assert ("user", "my name is Ada") in sent and sent[-1] == ("user", "What is my name?")


def test_the_n8n_export_imports_and_runs_unchanged(deploy, fake):
    workflow = export()
    deploy.activate(json.loads(json.dumps(workflow)))  # exactly the file's JSON
    assert deploy.workflows.get_json(workflow["id"])["nodes"][2]["credentials"] == {
        "openAiApi": {"id": "Qm7xR2vK9pLw4TzN", "name": "OpenAi account"}
    }
    url = chat_url(deploy.base, workflow)
    assert url.endswith(f"/webhook/{workflow['nodes'][0]['webhookId']}/chat")  # n8n's own URL
    reply = stream_chat(url, "What is 19 * 23?", "export-1")
    assert reply.types()[0] == "begin" and reply.types()[-1] == "end"
    assert reply.text() == "Based on the tools: Calculator returned 437."
    assert deploy.execution(reply.headers["x-execution-id"])["status"] == "success"
    # Its credential was found by name ("OpenAi account"), not the other openAiApi one.
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert len(deploy.chat_list("export-1")) == 2  # the Redis memory's own credential worked
