"""Chatting in the hub against real api and worker processes: a workflow agent's reply streams
as n8n's push events, lands in the message tree, and is what Redis holds as it streams."""

from __future__ import annotations

import uuid

from tests.hub.client import HubClient, agent_model, file, new_id, text_of
from tests.hub.workflows import support_bot

ANSWER_437 = "Based on the tools: Calculator returned 437."


def test_a_workflow_agents_reply_streams_as_push_events_and_lands_in_the_tree(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        human = owner.send(session, "What is 19 * 23?", agent_model(bot))
        events = push.end_of(session)
    types = [e["type"] for e in events]
    assert types[:2] == ["chatHubHumanMessageCreated", "chatHubExecutionBegin"]
    assert types[-1] == "chatHubExecutionEnd" and events[-1]["data"]["status"] == "success"
    numbers = [e["data"]["sequenceNumber"] for e in events]
    assert numbers == list(range(1, len(events) + 1))
    chunks = "".join(e["data"]["content"] for e in events if e["type"] == "chatHubStreamChunk")
    assert chunks == ANSWER_437
    messages = owner.messages(session)
    assert [m["type"] for m in messages] == ["human", "ai", "ai"]  # the tool step, the text
    tool_step, answer = messages[1], messages[2]
    assert messages[0]["id"] == human and tool_step["previousMessageId"] == human
    assert tool_step["content"] == [] and answer["previousMessageId"] == tool_step["id"]
    assert text_of(answer) == ANSWER_437 and answer["status"] == "success"
    assert answer["executionId"] and answer["workflowId"] == bot["id"]


def test_the_title_arrives_as_a_push_event_after_the_first_reply(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "my name is Ada and I like tea", agent_model(bot))
        end = push.wait_for(lambda e: e["type"] == "chatHubExecutionEnd", "the reply's end")
        titled = push.wait_for(lambda e: e["type"] == "chatHubTitleUpdated", "the title")
    assert titled["data"]["sessionId"] == session
    assert titled["data"]["title"] == "My name is Ada"  # the mock's rule: the first words
    assert titled["data"]["sequenceNumber"] > end["data"]["sequenceNumber"]
    assert owner.conversation(session)["session"]["title"] == "My name is Ada"


def test_the_list_pages_by_cursor_newest_message_first_and_needs_a_limit(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    user = HubClient(hub_deployment.base, "bob@example.com")
    sessions = [str(uuid.uuid4()) for _ in range(3)]
    with user.push() as push:
        for session in sessions:
            user.send(session, "hello", agent_model(bot))
            push.end_of(session)
    assert user.http.get("/conversations").status_code == 400
    first = user.http.get("/conversations", params={"limit": 2}).json()["data"]
    assert [c["id"] for c in first["data"]] == sessions[::-1][:2]
    assert first["hasMore"] is True and first["nextCursor"] == sessions[1]
    rest = user.http.get("/conversations", params={"limit": 2, "cursor": first["nextCursor"]})
    assert [c["id"] for c in rest.json()["data"]["data"]] == [sessions[0]]
    assert rest.json()["data"]["hasMore"] is False
    assert first["data"][0]["agentName"] == "Support bot" and first["data"][0]["ownerId"]


def test_delete_removes_the_conversation_its_messages_files_and_memory(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "my name is Ada", agent_model(bot),
                   files=[file("note.txt", "text/plain", b"hello")])  # fmt: skip
        push.end_of(session)
    deploy = hub_deployment
    memory = deploy.keys.chat(session, bot["id"])
    assert deploy.redis.exists(deploy.keys.hub_files(session), memory) == 2
    assert owner.http.delete(f"/conversations/{session}").status_code == 204
    assert owner.http.get(f"/conversations/{session}").status_code == 404
    left = [k for k in deploy.redis.scan_iter(f"{deploy.keys.prefix}hub:conversation:{session}*")]
    assert left == [] and not deploy.redis.exists(memory)
    ids = deploy.redis.zrange(deploy.keys.hub_conversations("owner"), 0, -1)
    assert session not in ids


def test_a_rename_is_kept_and_answered_with_the_conversation(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "hello", agent_model(bot))
        push.end_of(session)
    answer = owner.http.patch(f"/conversations/{session}", json={"title": "Greetings"})
    assert answer.status_code == 200
    assert answer.json()["data"]["session"]["title"] == "Greetings"
    assert owner.conversation(session)["session"]["title"] == "Greetings"
    too_long = owner.http.patch(f"/conversations/{session}", json={"title": "x" * 257})
    assert too_long.status_code == 400 and too_long.json()["code"] == 400


def test_a_second_send_while_a_reply_runs_is_409(hub_deployment):
    slow = hub_deployment.activate(support_bot(delay_ms=200))
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        first = owner.send(session, "tell me a long story please", agent_model(slow))
        push.wait_for(lambda e: e["type"] == "chatHubStreamChunk", "the first chunk")
        second = owner.post("/conversations/send", {
            "messageId": new_id(), "sessionId": session, "message": "and another",
            "model": agent_model(slow), "previousMessageId": first, "credentials": {},
            "attachments": [],
        })  # fmt: skip
        assert second.status_code == 409 and second.json()["code"] == 409
        push.end_of(session)
    assert len(owner.messages(session)) == 2  # the refused message wrote nothing


def test_another_users_conversation_is_404_to_read_change_delete_stop_and_send(hub_deployment):
    bot = hub_deployment.activate(support_bot())
    ada, bob = (HubClient(hub_deployment.base, u) for u in ("ada@example.com", "bob@example.com"))
    session = str(uuid.uuid4())
    with ada.push() as push:
        human = ada.send(session, "my name is Ada", agent_model(bot))
        push.end_of(session)
    answer = ada.messages(session)[-1]["id"]
    paths = [
        ("GET", f"/conversations/{session}", None),
        ("PATCH", f"/conversations/{session}", {"title": "mine"}),
        ("DELETE", f"/conversations/{session}", None),
        ("POST", f"/conversations/{session}/messages/{answer}/stop", None),
        ("POST", f"/conversations/{session}/messages/{answer}/regenerate",
         {"model": agent_model(bot), "credentials": {}}),
        ("POST", f"/conversations/{session}/messages/{human}/edit",
         {"messageId": new_id(), "message": "x", "model": agent_model(bot), "credentials": {},
          "newAttachments": [], "keepAttachmentIndices": []}),
        ("POST", f"/conversations/{session}/reconnect", None),
        ("GET", f"/conversations/{session}/messages/{human}/attachments/0", None),
        ("POST", "/conversations/send",
         {"messageId": new_id(), "sessionId": session, "message": "x", "model": agent_model(bot),
          "previousMessageId": None, "credentials": {}, "attachments": []}),
    ]  # fmt: skip
    for method, path, body in paths:
        found = bob.http.request(method, path, json=body)
        assert found.status_code == 404, (method, path, found.text)
        assert found.json() == {"code": 404, "message": "Chat session not found"}
    assert len(ada.messages(session)) == 2
    listed = bob.http.get("/conversations", params={"limit": 100}).json()["data"]["data"]
    assert session not in [c["id"] for c in listed]


def test_a_replys_text_is_in_redis_as_it_streams(hub_deployment):
    slow = hub_deployment.activate(support_bot(delay_ms=150))
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    deploy = hub_deployment
    with owner.push() as push:
        owner.send(session, "one two three four five six", agent_model(slow))
        third = push.wait_for(
            lambda e: len(push.of(session, "chatHubStreamChunk")) >= 3, "three chunks"
        )
        assert third  # three chunks were shown: Redis holds at least those, before the end
        shown = push.of(session, "chatHubStreamChunk")
        message_id = shown[0]["data"]["messageId"]
        stored = deploy.redis.get(deploy.keys.hub_text(session, message_id)) or ""
        so_far = "".join(e["data"]["content"] for e in shown)
        assert stored.startswith(so_far) and push.of(session, "chatHubExecutionEnd") == []
        running = owner.conversation(session)["conversation"]["messages"][message_id]
        assert running["status"] == "running" and text_of(running).startswith(so_far)
        push.end_of(session)
    done = owner.conversation(session)["conversation"]["messages"][message_id]
    assert text_of(done) == "You said: one two three four five six"
    assert not deploy.redis.exists(deploy.keys.hub_text(session, message_id))


def test_stop_cancels_a_running_reply(hub_deployment):
    slow = hub_deployment.activate(support_bot(delay_ms=300))
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "a b c d e f g h i j k l", agent_model(slow))
        chunk = push.wait_for(lambda e: e["type"] == "chatHubStreamChunk", "a chunk")
        message_id = chunk["data"]["messageId"]
        stop = owner.post(f"/conversations/{session}/messages/{message_id}/stop")
        assert stop.status_code == 204
        events = push.end_of(session)
    ends = [e for e in events if e["type"] == "chatHubStreamEnd"]
    assert ends[-1]["data"] == {**ends[-1]["data"], "messageId": message_id, "status": "cancelled"}
    assert events[-1]["data"]["status"] == "cancelled"
    stopped = owner.conversation(session)["conversation"]["messages"][message_id]
    assert stopped["status"] == "cancelled"
    assert text_of(stopped) != "You said: a b c d e f g h i j k l"
    again = owner.post(f"/conversations/{session}/messages/{message_id}/stop")
    assert again.status_code == 400


def test_a_last_node_agent_answers_with_one_message_holding_its_output(hub_deployment):
    bot = hub_deployment.activate(support_bot(mode="lastNode"))
    owner = HubClient(hub_deployment.base)
    session = str(uuid.uuid4())
    with owner.push() as push:
        owner.send(session, "What is 19 * 23?", agent_model(bot))
        events = push.end_of(session)
    types = [e["type"] for e in events]
    assert types == [
        "chatHubHumanMessageCreated", "chatHubExecutionBegin", "chatHubStreamBegin",
        "chatHubStreamChunk", "chatHubStreamEnd", "chatHubExecutionEnd",
    ]  # fmt: skip
    assert events[3]["data"]["content"] == ANSWER_437
    answer = owner.messages(session)[-1]
    assert text_of(answer) == ANSWER_437 and answer["status"] == "success"
