"""Edit and regenerate make branches of the message tree; what the model is given follows the
branch shown (a workflow agent's Redis memory included), and a failed answer never reaches it."""

from __future__ import annotations

import json
import uuid

from tests.hub.client import HubClient, agent_model, new_id, text_of
from tests.hub.conftest import CREDENTIAL, MODEL
from tests.hub.workflows import support_bot

OPENAI = {"provider": "openai", "model": MODEL}


def _edit(client: HubClient, session: str, message_id: str, text: str, model: dict) -> str:
    new = new_id()
    answer = client.post(f"/conversations/{session}/messages/{message_id}/edit", {
        "messageId": new, "message": text, "model": model, "credentials": {},
        "newAttachments": [], "keepAttachmentIndices": [],
    })  # fmt: skip
    assert answer.status_code == 200, answer.text
    return new


def _answer_to(client: HubClient, session: str, human: str) -> dict:
    """The last AI message that follows `human` (through a tool step, if any)."""
    messages = {m["id"]: m for m in client.messages(session)}
    children = [m for m in messages.values() if m["previousMessageId"] == human]
    while children and children[-1]["content"] == [] and children[-1]["type"] == "ai":
        children = [m for m in messages.values() if m["previousMessageId"] == children[-1]["id"]]
    return children[-1]


def test_an_edit_makes_a_new_branch_and_the_workflow_agents_memory_follows_it(hub_deployment):
    deploy = hub_deployment
    bot = deploy.activate(support_bot())
    owner = HubClient(deploy.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        ada = owner.send(session, "My name is Ada", agent_model(bot))
        push.end_of(session, 1)
        ask = owner.send(session, "What is my name?", agent_model(bot),
                         previous=_answer_to(owner, session, ada)["id"])  # fmt: skip
        push.end_of(session, 2)
        bob = _edit(owner, session, ada, "My name is Bob", agent_model(bot))
        push.end_of(session, 3)
        edited = push.of(session, "chatHubMessageEdited")[0]["data"]
        ask_again = owner.send(session, "What is my name?", agent_model(bot),
                               previous=_answer_to(owner, session, bob)["id"])  # fmt: skip
        push.end_of(session, 4)
    assert edited["revisionOfMessageId"] == ada and edited["messageId"] == bob
    assert text_of(_answer_to(owner, session, ask_again)) == "Your name is Bob."
    assert text_of(_answer_to(owner, session, ask)) == "Your name is Ada."  # the old branch
    tree = {m["id"]: m for m in owner.messages(session)}
    assert tree[bob]["previousMessageId"] is None and tree[bob]["revisionOfMessageId"] == ada
    memory = [json.loads(x) for x in deploy.redis.lrange(deploy.keys.chat(session, bot["id"]),
                                                          0, -1)][::-1]  # fmt: skip
    assert [(m["type"], m["data"]["content"]) for m in memory] == [
        ("human", "My name is Bob"), ("ai", "Nice to meet you, Bob!"),
        ("human", "What is my name?"), ("ai", "Your name is Bob."),
    ]  # fmt: skip


def test_regenerate_adds_an_answer_beside_the_old_one_retrying_the_first(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    body = {"model": agent_model(bot), "credentials": {}}
    with owner.push() as push:
        human = owner.send(session, "hello there", agent_model(bot))
        push.end_of(session, 1)
        first = _answer_to(owner, session, human)
        path = f"/conversations/{session}/messages/{first['id']}/regenerate"
        assert owner.post(path, body).status_code == 200
        push.end_of(session, 2)
        second = [m for m in owner.messages(session) if m["retryOfMessageId"] == first["id"]]
        path = f"/conversations/{session}/messages/{second[0]['id']}/regenerate"
        assert owner.post(path, body).status_code == 200
        events = push.end_of(session, 3)
    retries = [m for m in owner.messages(session) if m["retryOfMessageId"] == first["id"]]
    assert len(retries) == 2  # the second retry names the first answer too (the root)
    assert all(m["previousMessageId"] == human for m in retries)
    assert all(text_of(m) == "You said: hello there" for m in retries)
    assert [e["type"] for e in events].count("chatHubHumanMessageCreated") == 1
    begins = [e["data"] for e in events if e["type"] == "chatHubStreamBegin"]
    assert [b["retryOfMessageId"] for b in begins] == [None, first["id"], first["id"]]
    refused = owner.post(f"/conversations/{session}/messages/{human}/regenerate", body)
    assert refused.status_code == 400


def test_error_texts_of_failed_replies_are_not_fed_back_to_the_model(hub_deployment, fake_model):
    server, _ = fake_model
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    credentials = {"openAiApi": CREDENTIAL}
    with owner.push() as push:
        first = _send(owner, session, "My name is Ada", None, credentials)
        push.end_of(session, 1)
        push.wait_for(lambda e: e["type"] == "chatHubTitleUpdated", "the title (asked of it)")
        server.fail, server.fail_count = "400", len(server.requests) + 1
        try:
            failed = _send(owner, session, "second question",
                           _answer_to(owner, session, first)["id"], credentials)  # fmt: skip
            push.end_of(session, 2)
        finally:
            server.fail = server.fail_count = None
        error = _answer_to(owner, session, failed)
        assert error["status"] == "error" and text_of(error)
        _send(owner, session, "What is my name?", error["id"], credentials)
        push.end_of(session, 3)
    sent = server.requests[-1]["body"]["messages"]
    contents = [str(m.get("content")) for m in sent]
    assert "My name is Ada" in contents and "Nice to meet you, Ada!" in contents
    assert not any("second question" in c or text_of(error) in c for c in contents)
    assert not any("hunter2" in c for c in contents)


def _send(client: HubClient, session: str, text: str, previous: str | None,
          credentials: dict) -> str:  # fmt: skip
    message_id = new_id()
    answer = client.post("/conversations/send", {
        "messageId": message_id, "sessionId": session, "message": text, "model": OPENAI,
        "previousMessageId": previous, "credentials": credentials, "attachments": [],
    })  # fmt: skip
    assert answer.status_code == 200, answer.text
    return message_id
