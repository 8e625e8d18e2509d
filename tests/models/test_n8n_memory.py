"""An Agent's tool turn side by side with n8n 2.41.1 (tests/fixtures/n8n_memory/, recorded on
it): through the real api and worker, each recorded export runs here unchanged but for its
credentials (mapped to this deployment's, as an import maps them), with the fake OpenAI server
in the place of the one beside n8n. Memory holds the same JSON as n8n's and the model gets the
same requests, but for the model's generated call ids; a conversation n8n started goes on here
as it went on in n8n. (n8n going on with ours is the same: it reads the same JSON.)"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url, fresh_ids
from tests.n8n_memory import (
    ANSWER_437,
    VARIANTS,
    fixture,
    ids_named,
    memory_after,
    requests_of,
    turns,
)

CREDENTIALS = {  # the recording's credentials -> this deployment's (tests/models/conftest.py)
    "openAiApi": {"id": "deploy-openai-1", "name": "OpenAi account"},
    "redis": {"id": "deploy-redis-1", "name": "Redis account"},
}


def imported(variant: str) -> dict:
    workflow = fresh_ids(fixture(variant)["workflow"])
    for node in workflow["nodes"]:
        for kind in node.get("credentials", {}):
            node["credentials"][kind] = CREDENTIALS[kind]
    return workflow


def say(deploy, workflow: dict, message: str, session: str) -> str:
    url = chat_url(deploy.base, workflow)
    if "streaming" in workflow["name"]:
        return stream_chat(url, message, session).text()
    body = {"action": "sendMessage", "sessionId": session, "chatInput": message}
    response = httpx.post(url, json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["output"]


def stored(deploy, session: str) -> list[str]:
    """The session's Redis list, oldest first, each element as written."""
    return list(reversed(deploy.redis.lrange(deploy.keys.chat(session), 0, -1)))


def requests_since(fake, start: int) -> list[dict]:
    """What the model was asked, as n8n's recording keeps it: the messages and the tool names
    (the transport's own fields, such as stream_options, aside)."""
    return [
        {
            "messages": r["body"]["messages"],
            "tools": [t["function"]["name"] for t in r["body"].get("tools", [])],
        }
        for r in fake.requests[start:]
    ]


def n8n_requests(variant: str, turn: int) -> list[dict]:
    return [
        {"messages": r["messages"], "tools": [t["function"]["name"] for t in r["tools"]]}
        for r in requests_of(variant, turn)
    ]


def but_ids(requests: list[dict]) -> list[str]:
    """Requests as JSON text, the generated call ids named in order of appearance."""
    return ids_named([json.dumps(r, sort_keys=True) for r in requests])


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_conversation_here_stores_and_asks_what_n8n_stored_and_asked(deploy, fake, variant):
    workflow = deploy.activate(imported(variant))
    session = f"n8n-like-{uuid.uuid4().hex[:8]}"
    for turn, message in enumerate(turns(variant)):
        asked = len(fake.requests)
        answer = say(deploy, workflow, message, session)
        assert answer == (ANSWER_437 if turn == 0 else f"You said: {message}")
        assert ids_named(stored(deploy, session)) == ids_named(memory_after(variant, turn))
        assert but_ids(requests_since(fake, asked)) == but_ids(n8n_requests(variant, turn))


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_conversation_n8n_started_goes_on_here_as_it_went_on_in_n8n(deploy, fake, variant):
    workflow = deploy.activate(imported(variant))
    session = f"from-n8n-{uuid.uuid4().hex[:8]}"
    # n8n's list after its first turn, element for element (LRANGE order: newest first).
    deploy.redis.rpush(deploy.keys.chat(session), *fixture(variant)["turns"][0]["memory"])
    asked = len(fake.requests)
    say(deploy, workflow, turns(variant)[1], session)
    # The ids are n8n's own now: everything is equal as it is.
    assert stored(deploy, session) == memory_after(variant, 1)
    assert requests_since(fake, asked) == n8n_requests(variant, 1)
