"""A workflow's own base URL (the OpenAI Chat Model's `options.baseURL`) takes the credential's
key only where the credential's Allowed HTTP Request Domains allow it, and what a server answers
there reaches the execution record, never the public chat: real servers on two loopback hosts,
a real deployment."""

from __future__ import annotations

import json

import httpx

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.fakes.openai_server import BAD_REQUEST
from tests.models.conftest import API_KEY, MODEL, SECRET, logs, openai_chat
from tests.workflows import node


def chat_through(deploy, elsewhere, credential: str, session: str):
    """One chat whose model's base URL is the other host's server, with `credential`; returns
    (the reply, the record as REST shows it to the editor)."""
    workflow = openai_chat(baseURL=elsewhere.base_url, timeout=1500, maxRetries=0)
    node(workflow, MODEL)["credentials"]["openAiApi"] = {"id": "not-ours", "name": credential}
    deploy.activate(workflow)
    reply = stream_chat(chat_url(deploy.base, workflow), "hello", session, timeout=30)
    assert reply.status == 200
    execution_id = reply.headers["x-execution-id"]
    rest = httpx.get(
        f"{deploy.base}/rest/executions/{execution_id}",
        headers={"X-N8N-API-KEY": API_KEY},
        timeout=10,
    )
    assert rest.status_code == 200
    return reply, rest.json()


def public_error(reply) -> str:
    errors = [c["content"] for c in reply.chunks if c["type"] == "error"]
    assert reply.types()[-1] == "error" and len(errors) == 1
    return errors[0]


def generic(reply) -> str:
    return f"The workflow could not answer (execution {reply.headers['x-execution-id']})."


def test_a_credential_without_allowed_domains_is_not_sent_to_another_host(deploy, fake, elsewhere):
    reply, record = chat_through(deploy, elsewhere, "OpenAi account", "domains-pinned")
    assert elsewhere.requests == [] and fake.requests == []
    assert public_error(reply) == generic(reply)
    own, other = fake.base_url.split("/")[2], elsewhere.base_url.split("/")[2]
    assert record["status"] == "error"
    assert record["error"] == (
        f'{MODEL}: Domain not allowed: credential "OpenAi account" belongs to {own} and is '
        f'not sent to {other}. To allow it, set its allowedHttpRequestDomains to "domains" '
        'with allowedDomains "127.0.0.2", or to "all".'
    )


def test_a_credential_restricted_to_its_own_url_is_not_sent_to_another_host(deploy, elsewhere):
    reply, record = chat_through(deploy, elsewhere, "OpenAi to its own URL", "domains-none")
    assert elsewhere.requests == []
    assert public_error(reply) == generic(reply)
    other = elsewhere.base_url.split("/")[2]
    assert record["error"] == (
        f"{MODEL}: Domain not allowed: This credential is restricted from accessing {other}."
    )


def test_a_credential_whose_domains_name_the_host_is_sent_there(deploy, elsewhere):
    reply, record = chat_through(deploy, elsewhere, "OpenAi to 127.0.0.2", "domains-listed")
    assert record["status"] == "success" and reply.text() == "You said: hello"
    assert [r["headers"]["authorization"] for r in elsewhere.requests] == [f"Bearer {SECRET}"]


def test_a_credential_allowed_everywhere_is_sent_to_another_host(deploy, elsewhere):
    reply, _ = chat_through(deploy, elsewhere, "OpenAi anywhere", "domains-all")
    assert reply.text() == "You said: hello"
    assert [r["headers"]["authorization"] for r in elsewhere.requests] == [f"Bearer {SECRET}"]


def test_what_a_server_answers_reaches_the_record_and_never_the_public_chat(deploy, elsewhere):
    elsewhere.fail = "400"
    reply, record = chat_through(deploy, elsewhere, "OpenAi to 127.0.0.2", "domains-400")
    assert len(elsewhere.requests) == 1
    assert public_error(reply) == generic(reply)
    assert "hunter2" not in json.dumps(reply.chunks)
    assert record["error"] == f"{MODEL}: request rejected (400): {BAD_REQUEST}"
    assert SECRET not in json.dumps(record) and SECRET not in logs(deploy)
