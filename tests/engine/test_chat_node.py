"""The Chat node in the engine alone: it sends its message through the sendMessage hook, pauses
the run (status "waiting", plain-JSON state) and continues from that state with the reply."""

from __future__ import annotations

import copy
import json

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.nodes.memory_buffer_window import buffer_key
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.workflows import example, node

ASK_NAME = "chat-ask-name-response-nodes.json"
TRIGGER = "When chat message received"
START = [{"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "hello"}}]


def _run(workflow, messages, **kw):
    hooks = Hooks().add_handler("sendMessage", messages.append)
    return run_workflow(load_workflow(workflow), START, hooks=hooks, **kw)


def test_a_waiting_chat_node_pauses_and_the_reply_resumes_it_from_plain_json_state():
    messages: list[dict] = []
    first = _run(example(ASK_NAME), messages)
    assert first.status == "waiting"
    assert [m["text"] for m in messages] == ["Hi! What is your name?"]
    assert messages[0]["wait"] is True
    assert first.run_data["Ask name"][0]["executionStatus"] == "waiting"
    state = json.loads(json.dumps(first.waiting))  # what Redis keeps

    reply = {"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "Ada", "files": []}}
    second = _run(example(ASK_NAME), messages, resume={"state": state, "reply": reply})
    assert second.status == "success"
    assert [m["text"] for m in messages] == ["Hi! What is your name?", "Nice to meet you, Ada!"]
    assert messages[1]["wait"] is False
    assert second.run_data["Ask name"][0]["executionStatus"] == "success"
    assert second.run_data["Ask name"][0]["data"]["main"] == [[reply]]
    assert second.first_json() == reply["json"]  # Greet passes its input on: the reply
    assert list(second.run_data) == [TRIGGER, "Ask name", "Greet"]


def test_a_chat_node_without_a_chat_trigger_in_response_nodes_mode_is_refused():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, TRIGGER)["parameters"]["options"]["responseMode"] = "lastNode"
    with pytest.raises(WorkflowValidationError, match="Using Response Nodes") as err:
        load_workflow(workflow)
    assert err.value.node == "Ask name"


def test_a_public_chat_in_embedded_mode_cannot_use_chat_nodes():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, TRIGGER)["parameters"]["mode"] = "webhook"
    with pytest.raises(WorkflowValidationError, match="Hosted Chat"):
        load_workflow(workflow)


def test_a_chat_node_with_a_memory_connection_appends_its_message_and_the_reply_in_order():
    workflow = copy.deepcopy(example(ASK_NAME))
    workflow["nodes"].append(
        {
            "parameters": {"sessionIdType": "customKey", "sessionKey": "={{ 'mem-' + 's1' }}"},
            "id": "m1",
            "name": "Memory",
            "type": "@n8n/n8n-nodes-langchain.memoryBufferWindow",
            "typeVersion": 1.3,
            "position": [0, 200],
        }
    )
    for name in ("Ask name", "Greet"):
        node(workflow, name)["parameters"]["options"]["memoryConnection"] = True
    workflow["connections"]["Memory"] = {
        "ai_memory": [
            [
                {"node": "Ask name", "type": "ai_memory", "index": 0},
                {"node": "Greet", "type": "ai_memory", "index": 0},
            ]
        ]
    }
    memory = InProcessMemory()
    services = Services(simple_memory=memory)
    messages: list[dict] = []
    first = _run(workflow, messages, services=services)
    reply = {"json": {"action": "sendMessage", "sessionId": "s1", "chatInput": "Ada"}}
    state = json.loads(json.dumps(first.waiting))
    second = _run(workflow, messages, services=services, resume={"state": state, "reply": reply})
    assert second.status == "success"
    key = buffer_key(workflow["id"], "mem-s1")  # Simple Memory keys by workflow and session
    stored = [(m.role, m.content) for m in memory.messages(key)]
    assert stored == [
        ("ai", "Hi! What is your name?"),
        ("human", "Ada"),
        ("ai", "Nice to meet you, Ada!"),
    ]


def test_limit_wait_time_sets_the_deadline_of_the_wait():
    workflow = copy.deepcopy(example(ASK_NAME))
    node(workflow, "Ask name")["parameters"]["options"]["limitWaitTime"] = {
        "values": {"limitType": "afterTimeInterval", "resumeAmount": 2, "resumeUnit": "minutes"}
    }
    services = Services(clock=lambda: 1000.0)
    run = _run(workflow, [], services=services)
    assert run.waiting is not None
    assert run.waiting["waitTill"] == (1000 + 120) * 1000
