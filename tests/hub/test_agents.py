"""Personal agents and models chatted with directly: each runs as a workflow the hub builds
(Chat Trigger → AI Agent with the model, the hub's memory and the agent's tools) on a worker."""

from __future__ import annotations

import uuid

from tests.hub.client import MOCK, HubClient, agent_model, new_id, text_of
from tests.hub.conftest import CREDENTIAL, MODEL
from tests.hub.workflows import support_bot

CALCULATOR = "00000000-0000-4000-8000-00000000ca1c"
ANSWER_437 = "Based on the tools: Calculator returned 437."
PROMPT = "Answer like a pirate.\nAlways use the calculator for sums."


def _agent(client: HubClient, **fields) -> dict:
    body = {"name": "Pirate", "icon": {"type": "emoji", "value": "🏴"}, "systemPrompt": PROMPT,
            "provider": "mock", "model": "mock", "credentialId": None, "toolIds": [CALCULATOR],
            "suggestedPrompts": [{"text": "What is 19 * 23?"}], **fields}  # fmt: skip
    answer = client.post("/agents", body)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def _reply(client: HubClient, push, session: str, text: str, model: dict,
           credentials: dict | None = None) -> list[dict]:  # fmt: skip
    answer = client.post("/conversations/send", {
        "messageId": new_id(), "sessionId": session, "message": text, "model": model,
        "previousMessageId": None, "credentials": credentials or {}, "attachments": [],
    })  # fmt: skip
    assert answer.status_code == 200, answer.text
    push.end_of(session)
    return client.messages(session)


def test_a_personal_agent_answers_with_its_system_prompt_and_the_calculator(
    hub_deployment, fake_model
):
    server, _ = fake_model
    owner = HubClient(hub_deployment.base)
    mock_agent = _agent(owner)
    openai_agent = _agent(owner, name="Pirate GPT", provider="openai", model=MODEL,
                          credentialId=CREDENTIAL["id"])  # fmt: skip
    with owner.push() as push:
        session = str(uuid.uuid4())
        messages = _reply(owner, push, session, "What is 19 * 23?",
                          {"provider": "custom-agent", "agentId": mock_agent["id"]})  # fmt: skip
        assert text_of(messages[-1]) == ANSWER_437
        assert [m["type"] for m in messages] == ["human", "ai", "ai"]  # the tool step, the text
        before = len(server.requests)
        session = str(uuid.uuid4())
        messages = _reply(owner, push, session, "What is 19 * 23?",
                          {"provider": "custom-agent", "agentId": openai_agent["id"]})  # fmt: skip
    assert text_of(messages[-1]) == ANSWER_437
    first = server.requests[before]["body"]
    system = first["messages"][0]
    assert system["role"] == "system" and "> Answer like a pirate." in system["content"]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "Calculator"
    ]  # the node's name, as n8n
    listed = owner.conversation(session)["session"]
    assert listed["agentId"] == openai_agent["id"] and listed["agentName"] == "Pirate GPT"


def test_a_model_chatted_with_directly_answers_and_a_model_off_the_list_is_refused(
    hub_deployment,
):
    owner = HubClient(hub_deployment.base)
    with owner.push() as push:
        session = str(uuid.uuid4())
        messages = _reply(owner, push, session, "What is 19 * 23?", MOCK)
        assert text_of(messages[-1]) == "You said: What is 19 * 23?"  # no tools
        session = str(uuid.uuid4())
        messages = _reply(owner, push, session, "My name is Ada",
                          {"provider": "openai", "model": MODEL}, {"openAiApi": CREDENTIAL})  # fmt: skip
        assert text_of(messages[-1]) == "Nice to meet you, Ada!"
    refused = owner.post("/conversations/send", {
        "messageId": new_id(), "sessionId": str(uuid.uuid4()), "message": "hi",
        "model": {"provider": "openai", "model": "gpt-unlisted"}, "previousMessageId": None,
        "credentials": {"openAiApi": CREDENTIAL}, "attachments": [],
    })  # fmt: skip
    assert refused.status_code == 400
    assert refused.json() == {"code": 400, "message": "Model gpt-unlisted is not allowed"}


def test_personal_agents_are_their_owners_only_and_checked_as_n8n_checks_them(hub_deployment):
    ada, bob = (HubClient(hub_deployment.base, u) for u in ("ada@example.com", "bob@example.com"))
    agent = _agent(ada)
    assert agent["suggestedPrompts"] == [{"text": "What is 19 * 23?"}]
    assert ada.http.get("/agents").json()["data"][0]["id"] == agent["id"]
    for method in ("GET", "PATCH", "DELETE"):
        found = bob.http.request(method, f"/agents/{agent['id']}", json={"name": "mine"})
        assert found.status_code == 404 and found.json()["message"] == "Agent not found"
    assert bob.http.get("/agents").json()["data"] == []
    changed = ada.http.patch(f"/agents/{agent['id']}", json={"name": "Captain"})
    assert changed.json()["data"]["name"] == "Captain"
    prompts = [{"text": f"p{i}"} for i in range(7)]
    for body in ({"suggestedPrompts": prompts}, {"toolIds": [str(uuid.uuid4())]},
                 {"name": ""}, {"provider": "openai", "model": "gpt-unlisted",
                                "credentialId": CREDENTIAL["id"]}):  # fmt: skip
        assert ada.http.patch(f"/agents/{agent['id']}", json=body).status_code == 400, body
    assert ada.http.delete(f"/agents/{agent['id']}").status_code == 204
    assert ada.http.get(f"/agents/{agent['id']}").status_code == 404


def test_models_lists_agents_a_user_may_use_and_the_listed_models(hub_deployment):
    deploy = hub_deployment
    shared = deploy.activate(support_bot(name="Shared bot"))
    private = deploy.activate(support_bot(name="Private bot", share=None))
    ada, bob = (HubClient(deploy.base, u) for u in ("ada@example.com", "bob@example.com"))
    mine = _agent(ada)
    for_ada = ada.post("/models", {"credentials": {}}).json()["data"]
    names = {m["name"] for m in for_ada["n8n"]["models"]}
    assert "Shared bot" in names and "Private bot" not in names  # a chat user: shared only
    entry = next(m for m in for_ada["n8n"]["models"] if m["name"] == "Shared bot")
    assert entry["model"] == agent_model(shared) and entry["icon"]["value"] == "🤖"
    assert entry["suggestedPrompts"] == [{"text": "What is 19 * 23?"}]
    assert entry["metadata"]["allowFileUploads"] is True
    assert entry["metadata"]["allowedFilesMimeTypes"] == "text/plain"
    assert [m["model"]["agentId"] for m in for_ada["custom-agent"]["models"]] == [mine["id"]]
    assert [(m["model"], m["credentialId"]) for m in for_ada["openai"]["models"]] == [
        ({"provider": "openai", "model": MODEL}, CREDENTIAL["id"])
    ]
    assert for_ada["mock"]["models"][0]["model"] == MOCK
    assert for_ada["anthropic"] == {"models": []}
    for_bob = bob.post("/models", {"credentials": {}}).json()["data"]
    assert {"Shared bot", "Private bot"} <= {m["name"] for m in for_bob["n8n"]["models"]}
    assert for_bob["custom-agent"]["models"] == []
    refused = ada.post("/conversations/send", {
        "messageId": new_id(), "sessionId": str(uuid.uuid4()), "message": "hi",
        "model": agent_model(private), "previousMessageId": None, "credentials": {},
        "attachments": [],
    })  # fmt: skip
    assert refused.status_code == 404


def test_a_personal_agents_workflow_is_one_version_whatever_the_messages(hub_deployment):
    deploy = hub_deployment
    owner = HubClient(deploy.base)
    agent = _agent(owner)
    model = {"provider": "custom-agent", "agentId": agent["id"]}
    with owner.push() as push:
        for text in ("My name is Ada", "What is 6 * 7?"):
            _reply(owner, push, str(uuid.uuid4()), text, model)
    pattern = deploy.keys.workflow_snapshot(f"hub-agent-{agent['id']}", "*")
    assert len(list(deploy.redis.scan_iter(pattern))) == 1  # the date travels in the item
