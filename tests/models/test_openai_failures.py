"""Each way an OpenAI-compatible server can fail gives a failed execution with a message a user
can act on in its record (the editor's and REST's), an `error` line on the public stream that
says only which execution failed, and the API key nowhere: not in the NDJSON, not in the
execution record, not in the api's or the worker's output."""

from __future__ import annotations

import json
import time

import httpx

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.models.conftest import (
    API_KEY,
    DECOY_SECRET,
    MODEL,
    SECRET,
    URL_SECRET,
    logs,
    openai_chat,
)
from tests.workflows import node

FAST = {"timeout": 1500, "maxRetries": 1}  # n8n's options: ms and retries


def fail_once(deploy, workflow: dict, message: str, session: str, model_ran: bool = True):
    """Chat once; returns (reply, the record's error, the record as stored in Redis)."""
    deploy.activate(workflow)
    reply = stream_chat(chat_url(deploy.base, workflow), message, session, timeout=30)
    assert reply.status == 200
    assert reply.types()[-1] == "error"
    errors = [c for c in reply.chunks if c["type"] == "error"]
    assert len(errors) == 1
    execution_id = reply.headers["x-execution-id"]
    raw = deploy.redis.get(deploy.keys.execution(execution_id))
    record = json.loads(raw)
    assert record["status"] == "error"
    assert errors[0]["content"] == f"The workflow could not answer (execution {execution_id})."
    assert errors[0]["metadata"]["nodeName"] == "AI Agent"
    assert record["errorNode"] == "AI Agent"  # the node that failed; the model run shows why
    if model_ran:
        assert record["runData"]["OpenAI Chat Model"][-1]["executionStatus"] == "error"
    assert deploy.chat_list(session) == []  # a failed turn is not remembered
    rest = httpx.get(
        f"{deploy.base}/rest/executions/{execution_id}",
        headers={"X-N8N-API-KEY": API_KEY},
        timeout=10,
    )
    assert rest.status_code == 200 and rest.json()["error"] == record["error"]
    assert_no_secret(deploy, json.dumps(reply.chunks), raw, rest.text)
    return reply, record["error"], record


def assert_no_secret(deploy, *texts: str) -> None:
    for secret in (SECRET, DECOY_SECRET, URL_SECRET, "SECRET", "DECOY"):
        for text in (*texts, logs(deploy)):
            assert secret not in text


def test_an_unreachable_endpoint_is_retried_then_named(deploy, fake, closed_url):
    workflow = openai_chat(**FAST)
    node(workflow, MODEL)["credentials"]["openAiApi"] = {"id": "x", "name": "Some other account"}
    _, message, _ = fail_once(deploy, workflow, "hello", "fail-connect")
    assert message == f"OpenAI Chat Model: could not connect to {closed_url}"


def test_a_rejected_key_is_reported_without_the_key_the_server_echoed(deploy, fake):
    fake.fail = "401"  # the fake's body says "Incorrect API key provided: sk-test-SECRET-6789"
    _, message, _ = fail_once(deploy, openai_chat(**FAST), "hello", "fail-401")
    assert message == (
        "OpenAI Chat Model: authentication failed (401): check the API key of credential "
        '"OpenAi account"'
    )
    assert len(fake.requests) == 1  # never retried


def test_an_unknown_model_is_named(deploy, fake):
    fake.fail = "404"
    _, message, _ = fail_once(deploy, openai_chat(model="gpt-nope", **FAST), "hi", "fail-404")
    assert message == 'OpenAI Chat Model: model "gpt-nope" not found (404)'
    assert len(fake.requests) == 1


def test_a_rate_limit_waits_for_retry_after_once_then_fails_readably(deploy, fake):
    fake.fail, fake.fail_count, fake.retry_after = "429", 1, "1"
    workflow = deploy.activate(openai_chat(**FAST))
    started = time.monotonic()
    reply = stream_chat(chat_url(deploy.base, workflow), "my name is Ada", "rate-ok")
    assert reply.text() == "Nice to meet you, Ada!"  # the retry after 1 s succeeded
    assert time.monotonic() - started >= 1.0
    assert len(fake.requests) == 2

    fake.fail_count = None  # every request is limited: one retry, then the error
    _, message, _ = fail_once(deploy, openai_chat(**FAST), "hello", "fail-429")
    assert message == "OpenAI Chat Model: rate limited (429); retry after 1 s"
    assert len(fake.requests) == 4


def test_a_server_that_never_answers_times_out(deploy, fake):
    fake.fail = "hang"
    _, message, _ = fail_once(deploy, openai_chat(**FAST), "hello", "fail-timeout")
    assert message == f"OpenAI Chat Model: timed out after 1.5 s waiting for {fake.base_url}"
    assert len(fake.requests) == 1  # no retry: it could double a slow request's cost


def test_a_malformed_stream_fails_after_the_tokens_already_shown(deploy, fake):
    fake.fail = "malformed"  # garbage after two tokens
    reply, message, _ = fail_once(deploy, openai_chat(**FAST), "hello there friend", "fail-bad")
    assert message == f"OpenAI Chat Model: malformed response stream from {fake.base_url}"
    assert reply.types() == ["begin", "item", "item", "error"]
    assert reply.text() == "You said: "
    assert len(fake.requests) == 1  # tokens were out: a retry would repeat them


def test_a_workflow_whose_credential_is_not_configured_fails_at_run_time(deploy):
    workflow = openai_chat(**FAST)
    model = next(n for n in workflow["nodes"] if n["name"] == "OpenAI Chat Model")
    model["credentials"] = {"openAiApi": {"id": "nope", "name": "Not configured"}}
    _, message, _ = fail_once(deploy, workflow, "hello", "fail-cred", model_ran=False)
    assert message.startswith('OpenAI Chat Model: credential "Not configured" (id nope) of type')
    assert "6 credentials of that type" in message


def test_a_password_in_the_base_url_shows_nowhere(deploy, fake):
    fake.fail = "500"  # retried once, then reported with the URL stripped of its password
    workflow = openai_chat(**FAST)
    model = next(n for n in workflow["nodes"] if n["name"] == "OpenAI Chat Model")
    model["credentials"] = {"openAiApi": {"id": "from-elsewhere", "name": "OpenAi via proxy"}}
    _, message, _ = fail_once(deploy, workflow, "hello", "fail-proxy")
    assert message == f"OpenAI Chat Model: server error (500) from {fake.base_url}"
    assert len(fake.requests) == 2
