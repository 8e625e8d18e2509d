"""A workflow agent that asks (Chat nodes in responseNodes mode, n8n 2.41.1's export): its
question waits in the hub, the next message answers it, and an approval's button resumes it."""

from __future__ import annotations

import uuid

import httpx

from tests.hub.client import HubClient, agent_model, text_of
from tests.hub.workflows import asking_agent

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"


def _ends(push, session: str) -> list[dict]:
    return [e["data"]["status"] for e in push.of(session, "chatHubStreamEnd")]


def test_a_question_waits_the_next_message_answers_it_and_a_button_approves(hub_deployment):
    deploy = hub_deployment
    agent = deploy.activate(asking_agent())
    owner = HubClient(deploy.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "hi", agent_model(agent))
        push.end_of(session, 1)
        assert _ends(push, session) == ["success", "waiting"]
        welcome, question = owner.messages(session)[1:]
        assert text_of(welcome) == "Welcome! This one does not wait."
        assert text_of(question) == "What is your name?" and question["status"] == "waiting"
        assert question["previousMessageId"] == welcome["id"]
        answer = owner.send(session, "Ada", agent_model(agent), previous=question["id"])
        push.end_of(session, 2)
        approval = owner.messages(session)[-1]
        assert approval["previousMessageId"] == answer and approval["status"] == "waiting"
        assert approval["executionId"] == question["executionId"]  # the same execution goes on
        (buttons,) = approval["content"]
        assert buttons["type"] == "with-buttons" and buttons["content"] == "Shall I remember Ada?"
        assert [b["text"] for b in buttons["buttons"]] == ["Yes", "No"]
        # A browser's click (a bot's is ignored, as n8n ignores it: api/bots.py)
        clicked = httpx.get(
            deploy.base + buttons["buttons"][0]["link"], timeout=10, headers={"User-Agent": BROWSER}
        )
        assert clicked.status_code == 200
        push.end_of(session, 3)
    done = owner.messages(session)[-1]
    assert text_of(done) == "Remembered Ada." and done["status"] == "success"
    assert done["previousMessageId"] == approval["id"]
    states = {m["id"]: m["status"] for m in owner.messages(session)}
    assert states[question["id"]] == states[approval["id"]] == "success"  # answered
    assert deploy.execution(done["executionId"])["status"] == "success"


def test_a_question_left_on_another_branch_stops_its_execution(hub_deployment):
    deploy = hub_deployment
    agent = deploy.activate(asking_agent())
    owner = HubClient(deploy.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        first = owner.send(session, "hi", agent_model(agent))
        push.end_of(session, 1)
        question = owner.messages(session)[-1]
        owner.send(session, "never mind", agent_model(agent), previous=first)
        push.end_of(session, 2)
    left = {m["id"]: m for m in owner.messages(session)}[question["id"]]
    assert left["status"] == "cancelled"
    assert deploy.execution(question["executionId"])["status"] == "canceled"
    newest = owner.messages(session)[-1]
    assert newest["executionId"] != question["executionId"] and newest["status"] == "waiting"
