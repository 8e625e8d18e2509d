"""REST chat sessions: public ones by session id, protected ones (a workflow's own namespace) with
?workflowId=, and, with an empty memory key prefix, never one of our own keys."""

from __future__ import annotations

import pytest

from api.app import create_app
from core.keys import Keys
from core.settings import Settings
from memory.messages import ai, human
from memory.redis import RedisMemory

API_KEY = "sessions-test-key"


def rest_client(redis_url: str, keys: Keys):
    settings = Settings(
        redis_url=redis_url,
        api_key=API_KEY,
        key_prefix=keys.prefix,
        memory_key_prefix=keys.memory_prefix,
    )
    client = create_app(settings=settings).test_client()
    client.environ_base["HTTP_X_N8N_API_KEY"] = API_KEY
    return client


@pytest.fixture
def public_and_protected(redis_client, keys):
    RedisMemory(redis_client, keys).add_turn("a-1", [human("hi"), ai("hello")])
    protected = RedisMemory(redis_client, keys, workflow_id="wf1")
    protected.add_turn("a-1", [human("secret"), ai("kept")])
    return keys


def test_the_list_gives_public_sessions_and_protected_ones_with_their_workflow(
    redis_url, public_and_protected
):
    client = rest_client(redis_url, public_and_protected)
    assert client.get("/rest/sessions").json == {
        "data": ["a-1"],
        "protected": [{"workflowId": "wf1", "id": "a-1"}],
    }


def test_a_protected_session_is_shown_and_cleared_with_its_workflow_id(
    redis_url, redis_client, public_and_protected
):
    keys = public_and_protected
    client = rest_client(redis_url, keys)
    assert client.get("/rest/sessions/a-1?workflowId=wf1").json == {
        "workflowId": "wf1",
        "id": "a-1",
        "messages": [{"role": "human", "content": "secret"}, {"role": "ai", "content": "kept"}],
    }
    assert client.get("/rest/sessions/a-1").json["messages"][0] == {
        "role": "human",
        "content": "hi",
    }
    cleared = client.delete("/rest/sessions/a-1?workflowId=wf1")
    assert cleared.json == {"workflowId": "wf1", "id": "a-1", "cleared": True}
    assert client.get("/rest/sessions/a-1?workflowId=wf1").status_code == 404
    assert redis_client.llen(keys.chat("a-1")) == 2  # the public one is untouched


def test_with_an_empty_memory_prefix_our_own_keys_are_refused_with_400(
    redis_url, redis_client, keys
):
    bare = Keys(keys.prefix, memory_prefix="")
    redis_client.hset(bare.webhooks(), "POST x/chat", "wf1")
    RedisMemory(redis_client, bare).add_turn("a-14062", [human("hi"), ai("hello")])
    client = rest_client(redis_url, bare)
    assert client.get("/rest/sessions").json == {"data": ["a-14062"], "protected": []}
    for response in (
        client.get("/rest/sessions/webhooks"),
        client.delete("/rest/sessions/webhooks"),
    ):
        assert response.status_code == 400
        assert response.json["message"].startswith('The session key "webhooks" cannot be used')
    assert redis_client.hgetall(bare.webhooks()) == {"POST x/chat": "wf1"}
