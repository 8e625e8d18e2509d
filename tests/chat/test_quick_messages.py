"""Messages that come quicker than a conversation (responseNodes): a message for a session whose
execution is not finished is that execution's next reply, in order, delivered when a Chat node
waits; only a message that finds none unfinished starts a new execution. Real deployment."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import (
    CONTINUE,
    FIRST,
    TOKENS,
    ask_name_workflow,
    next_frame,
    open_chat,
)
from tests.e2e.deployment import chat_url
from tests.waiting import wait_until
from tests.workflows import node


def post(url: str, session: str, text: str) -> str:
    answer = httpx.post(
        url, json={"action": "sendMessage", "sessionId": session, "chatInput": text}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["executionStarted"] is True
    TOKENS[body["executionId"]] = body["resumeToken"]  # for open_chat
    return body["executionId"]


def frames_until_closed(base: str, session: str, execution_id: str) -> list[str]:
    frames = []
    with open_chat(base, session, execution_id) as ws, pytest.raises(ConnectionClosed):
        while True:
            frames.append(next_frame(ws))
    return frames


def test_two_quick_messages_are_one_conversation(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    url, session = chat_url(deploy.base, workflow), f"s-{uuid.uuid4().hex[:12]}"
    first = post(url, session, "hello")
    second = post(url, session, "Ada")  # before the Chat node waits: its reply, not a new run
    assert second == first
    assert frames_until_closed(deploy.base, session, first) == [
        FIRST,
        CONTINUE,  # its wait ended with a reply that did not come over this socket (n8n's rule)
        "Nice to meet you, Ada!",
        CONTINUE,
    ]
    assert deploy.execution(first)["status"] == "success"
    # The conversation is over: the next message starts a new one.
    third = post(url, session, "hello again")
    assert third != first
    wait_until(lambda: deploy.execution(third)["status"] == "waiting", 15, "the new conversation")


def test_two_clients_posting_at_once_make_one_conversation(chat_deployment):
    deploy = chat_deployment
    workflow = deploy.activate(ask_name_workflow())
    url, session = chat_url(deploy.base, workflow), f"s-{uuid.uuid4().hex[:12]}"
    texts = ["Grace", "Ada"]
    ids: dict[str, str] = {}
    ready = threading.Barrier(2)

    def send(text: str) -> None:
        ready.wait(10)
        ids[text] = post(url, session, text)

    threads = [threading.Thread(target=send, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert ids["Grace"] == ids["Ada"]  # one execution took both
    execution_id = ids["Ada"]
    frames = frames_until_closed(deploy.base, session, execution_id)
    record = deploy.execution(execution_id)
    # Whichever came first started it; the other is the reply its Chat node waited for.
    started_by = record["runData"]["When chat message received"][0]["data"]["main"][0][0]
    other = next(t for t in texts if t != started_by["json"]["chatInput"])
    assert frames == [FIRST, CONTINUE, f"Nice to meet you, {other}!", CONTINUE]
    assert record["status"] == "success"


def slow_after_the_reply() -> dict:
    """Ask my name, then an Agent that takes a while over the answer before a Chat node says
    what it said: a window in which the conversation runs and waits for nothing."""
    workflow = ask_name_workflow()
    greet = node(workflow, "Greet")
    greet["parameters"]["message"] = "={{ $json.output }}"
    workflow["nodes"] += [
        {"parameters": {"promptType": "define", "text": "={{ $json.chatInput }}", "options": {}},
         "id": "a1", "name": "AI Agent", "type": "@n8n/n8n-nodes-langchain.agent",
         "typeVersion": 2.2, "position": [400, 0]},
        {"parameters": {"delayPerTokenMs": 400}, "id": "a2", "name": "Mock Chat Model",
         "type": "mini-n8n.lmChatMock", "typeVersion": 1, "position": [400, 200]},
    ]  # fmt: skip
    workflow["connections"]["Ask name"] = {
        "main": [[{"node": "AI Agent", "type": "main", "index": 0}]]
    }
    workflow["connections"]["AI Agent"] = {
        "main": [[{"node": "Greet", "type": "main", "index": 0}]]
    }
    workflow["connections"]["Mock Chat Model"] = {
        "ai_languageModel": [[{"node": "AI Agent", "type": "ai_languageModel", "index": 0}]]
    }
    return workflow


def test_a_message_no_chat_node_waited_for_starts_the_next_conversation_on_the_same_socket(
    chat_deployment,
):
    deploy = chat_deployment
    workflow = deploy.activate(slow_after_the_reply())
    url, session = chat_url(deploy.base, workflow), f"s-{uuid.uuid4().hex[:12]}"
    first = post(url, session, "hello")
    with open_chat(deploy.base, session, first) as ws:
        assert next_frame(ws) == FIRST
        ws.send(f'{{"sessionId":"{session}","action":"sendMessage","chatInput":"Ada","files":[]}}')
        wait_until(lambda: deploy.execution(first)["status"] == "running", 10, "the Agent to run")
        # The widget POSTs what is typed while its socket does not wait for input.
        assert post(url, session, "and you?") == first  # the conversation's, not a new one
        assert next_frame(ws) == "You said: Ada"
        assert next_frame(ws) == CONTINUE
        # The conversation ended with a message it never waited for: the next one starts with
        # it, and this socket follows it there.
        assert next_frame(ws) == FIRST
    line = deploy.redis.lrange(deploy.keys.session_queue(workflow["id"], session), 0, -1)
    (second,) = line
    assert second != first and deploy.execution(first)["status"] == "success"
    record = wait_until(lambda: (r := deploy.execution(second))["status"] == "waiting" and r, 10,
                        "the next conversation to wait")  # fmt: skip
    started_by = record["runData"]["When chat message received"][0]["data"]["main"][0][0]
    assert started_by["json"]["chatInput"] == "and you?"
