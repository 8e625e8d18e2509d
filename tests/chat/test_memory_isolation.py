"""Chat memory over real api and worker processes: a protected chat's memory is its own, and
with MINI_N8N_MEMORY_KEY_PREFIX="" a conversation is n8n's list at the bare session id."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from core.keys import Keys
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.chat.support import (
    BASIC_CREDENTIAL,
    BASIC_PASSWORD,
    BASIC_USER,
    TRIGGER,
    chat_workflow,
)
from tests.e2e.deployment import Deployment, chat_url
from tests.workflows import node

AUTH = (BASIC_USER, BASIC_PASSWORD)
MEMORY = "Redis Chat Memory"
REFUSED = (
    'The session key "webhooks" cannot be used: its memory key "webhooks" would be one of '
    "mini-n8n's own keys (an empty MINI_N8N_MEMORY_KEY_PREFIX makes session keys Redis key names)"
)
# What n8n's Redis Chat Memory (LangChain's toDict, JSON.stringify) stores for a turn, in the
# field order n8n 2.41.1 wrote (redis-cli LRANGE on its memory).
N8N_HUMAN = json.dumps(
    {
        "type": "human",
        "data": {"content": "my name is Ada", "additional_kwargs": {}, "response_metadata": {}},
    },
    separators=(",", ":"),
)
N8N_AI = json.dumps(
    {
        "type": "ai",
        "data": {
            "content": "Nice to meet you, Ada!",
            "tool_calls": [],
            "invalid_tool_calls": [],
            "additional_kwargs": {},
            "response_metadata": {},
        },
    },
    separators=(",", ":"),
)


def send(url: str, session: str, text: str, **kwargs) -> httpx.Response:
    body = {"action": "sendMessage", "sessionId": session, "chatInput": text}
    return httpx.post(url, json=body, timeout=30, **kwargs)


def load(url: str, session: str, **kwargs) -> httpx.Response:
    body = {"action": "loadPreviousSession", "sessionId": session}
    return httpx.post(url, json=body, timeout=30, **kwargs)


def contents(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.text
    return [(m["id"][-1], m["kwargs"]["content"]) for m in response.json()["data"]]


def stored(redis_client, key: str) -> list[str]:
    return [json.loads(element)["data"]["content"] for element in redis_client.lrange(key, 0, -1)]


# --- a protected chat and a public chat with one session id -------------------------------
def test_a_basic_auth_chat_and_a_public_chat_with_one_session_id_never_share_memory(
    chat_deployment,
):
    guarded = chat_workflow({"responseMode": "lastNode"}, authentication="basicAuth")
    node(guarded, TRIGGER)["credentials"] = {"httpBasicAuth": BASIC_CREDENTIAL}
    public = chat_workflow({"responseMode": "lastNode"})
    guarded_url = chat_url(chat_deployment.base, chat_deployment.activate(guarded))
    public_url = chat_url(chat_deployment.base, chat_deployment.activate(public))
    session = f"shared-{uuid.uuid4().hex[:6]}"

    answer = send(guarded_url, session, "my name is Ada", auth=AUTH)
    assert answer.json() == {"output": "Nice to meet you, Ada!"}
    # Knowing the session id gets nothing out of the public chat...
    assert contents(load(public_url, session)) == []
    assert send(public_url, session, "What is my name?").json() == {
        "output": "I don't know your name yet."
    }
    # ...and puts nothing into the protected conversation.
    assert contents(load(guarded_url, session, auth=AUTH)) == [
        ("HumanMessage", "my name is Ada"),
        ("AIMessage", "Nice to meet you, Ada!"),
    ]
    assert send(guarded_url, session, "What is my name?", auth=AUTH).json() == {
        "output": "Your name is Ada."
    }
    keys, redis_client = chat_deployment.keys, chat_deployment.redis
    assert stored(redis_client, keys.chat(session, guarded["id"])) == [
        "Your name is Ada.",
        "What is my name?",
        "Nice to meet you, Ada!",
        "my name is Ada",
    ]
    assert stored(redis_client, keys.chat(session)) == [
        "I don't know your name yet.",
        "What is my name?",
    ]


# --- n8n's bare session keys ----------------------------------------------------------------
@pytest.fixture(scope="module")
def beside_n8n(redis_url):
    """A deployment with no global key prefix and n8n's bare memory keys, as run beside n8n."""
    with Deployment.running(
        redis_url, MINI_N8N_KEY_PREFIX="", MINI_N8N_MEMORY_KEY_PREFIX=""
    ) as deploy:
        # The test reads and writes with the keys the processes use, not a test prefix.
        deploy.keys = Keys("", memory_prefix="")
        deploy.workflows = WorkflowStore(deploy.redis, deploy.keys, load_workflow)
        yield deploy


def test_with_an_empty_memory_key_prefix_a_turn_is_n8ns_list_at_the_bare_session_id(beside_n8n):
    workflow = beside_n8n.activate(chat_workflow({"responseMode": "lastNode"}))
    url = chat_url(beside_n8n.base, workflow)
    session = f"a-{uuid.uuid4().hex[:6]}"
    assert send(url, session, "my name is Ada").json() == {"output": "Nice to meet you, Ada!"}
    assert beside_n8n.redis.lrange(session, 0, -1) == [N8N_AI, N8N_HUMAN]
    assert contents(load(url, session)) == [
        ("HumanMessage", "my name is Ada"),
        ("AIMessage", "Nice to meet you, Ada!"),
    ]


def test_with_an_empty_memory_key_prefix_a_session_n8n_wrote_carries_on(beside_n8n):
    workflow = beside_n8n.activate(chat_workflow({"responseMode": "lastNode"}))
    session = f"a-{uuid.uuid4().hex[:6]}"
    beside_n8n.redis.lpush(session, N8N_HUMAN, N8N_AI)  # a turn as n8n writes it
    answer = send(chat_url(beside_n8n.base, workflow), session, "What is my name?")
    assert answer.json() == {"output": "Your name is Ada."}


def test_with_an_empty_memory_key_prefix_a_session_id_naming_our_keys_is_refused(beside_n8n):
    workflow = beside_n8n.activate(chat_workflow({"responseMode": "lastNode"}))
    url = chat_url(beside_n8n.base, workflow)
    webhooks = beside_n8n.redis.hgetall("webhooks")
    assert webhooks  # the deployment's own hash, under the bare name "webhooks"

    refused = load(url, "webhooks")
    assert (refused.status_code, refused.json()) == (
        400,
        {"message": f'Node "{MEMORY}": {REFUSED}'},
    )
    failed = send(url, "webhooks", "my name is Ada")
    execution_id = failed.headers["x-execution-id"]
    assert (failed.status_code, failed.json()) == (
        500,
        {
            "message": "Error in workflow",
            "error": f"The workflow could not answer (execution {execution_id}).",
        },
    )
    record = beside_n8n.execution(execution_id)
    assert record["errorNode"] == MEMORY and record["error"].endswith(REFUSED)
    assert beside_n8n.redis.hgetall("webhooks") == webhooks
    assert beside_n8n.redis.type("webhooks") == "hash"
