"""loadPreviousSession reads the memory an execution wrote: the same session key rule (per node
version), the same namespace (public, or the protected workflow's own) and the same prefix."""

from __future__ import annotations

import copy
import uuid

import pytest

from core.keys import Keys
from engine.errors import NodeExecutionError, SessionKeyRefused
from engine.executor import run_workflow
from engine.nodes.chat_trigger import memory_scope
from engine.previous_session import previous_session
from engine.services import Services
from engine.workflow import load_workflow
from memory.messages import ai, human
from memory.window import InProcessMemory
from tests.workflows import GREETING, REDIS_CHAT, SIMPLE_CHAT, example, node

TRIGGER, MEMORY = "When chat message received", "Redis Chat Memory"
USER = "u-7"
ACCESS = {
    "public": {"public": True, "authentication": "none"},
    "basicAuth": {"public": True, "authentication": "basicAuth"},
    "notPublic": {"public": False, "authentication": "none"},
}
# (memory typeVersion, memory parameters, the session key they give for a body with sessionId sid)
SESSION_RULES = {
    "v1.0 constant key": (1.0, {"sessionKey": "chat_history"}, lambda sid: "chat_history"),
    "v1.0 key expression": (1.0, {"sessionKey": "={{ $json.metadata.user }}"}, lambda sid: USER),
    "v1.1 key template": (1.1, {"sessionKey": "=room-{{ $json.sessionId }}"}, "room-{}".format),
    "v1.1 default key": (1.1, {}, str),
    "v1.2 fromInput": (1.2, {"sessionIdType": "fromInput"}, str),
    "v1.5 fromInput": (1.5, {"sessionIdType": "fromInput", "sessionTTL": 60}, str),
    "v1.5 customKey expression": (
        1.5,
        {"sessionIdType": "customKey", "sessionKey": "={{ $json.metadata.user }}"},
        lambda sid: USER,
    ),
    "v1.5 customKey constant": (
        1.5,
        {"sessionIdType": "customKey", "sessionKey": "team-room"},
        lambda sid: "team-room",
    ),
}


@pytest.fixture
def client(fake_redis):
    return fake_redis


def services_for(client, keys: Keys) -> Services:
    return Services(redis=client, keys=keys, simple_memory=InProcessMemory())


def redis_chat(version: float = 1.5, memory: dict | None = None, access="public") -> dict:
    workflow = copy.deepcopy(example(REDIS_CHAT))
    workflow["id"] = f"wf-{uuid.uuid4().hex[:8]}"
    node(workflow, TRIGGER)["parameters"].update(ACCESS[access])
    node(workflow, MEMORY).update(typeVersion=version, parameters=memory or {})
    return workflow


def message(sid: str, text: str) -> dict:
    return {
        "action": "sendMessage",
        "sessionId": sid,
        "chatInput": text,
        "metadata": {"user": USER},
    }


def load_body(sid: str) -> dict:
    return {"action": "loadPreviousSession", "sessionId": sid, "metadata": {"user": USER}}


def chat(workflow, services, body):
    return run_workflow(workflow, [{"json": body}], services=services, mode="webhook")


@pytest.mark.parametrize("access", ACCESS)
@pytest.mark.parametrize("rule", SESSION_RULES)
def test_previous_session_returns_what_the_memory_node_reads(rule, access, client, keys):
    version, params, session_of = SESSION_RULES[rule]
    workflow = load_workflow(redis_chat(version, params, access))
    services = services_for(client, keys)
    sid = f"s-{uuid.uuid4().hex[:6]}"

    first = chat(workflow, services, message(sid, "my name is Ada"))
    assert first.first_json() == {"output": "Nice to meet you, Ada!"}, first.error
    scope = None if access == "public" else workflow.id
    written = keys.chat(session_of(sid), scope)
    assert client.keys(f"{keys.prefix}*") == [written]  # one list, in the expected namespace

    loaded = previous_session(workflow, workflow.nodes[TRIGGER], load_body(sid), services)
    assert loaded == [
        human("my name is Ada").to_serialized(),
        ai("Nice to meet you, Ada!").to_serialized(),
    ]

    second = chat(workflow, services, message(sid, "What is my name?"))
    assert second.first_json() == {"output": "Your name is Ada."}
    read = second.run_data[MEMORY][0]["data"]["ai_memory"][0][0]["json"]["chatHistory"]
    assert [(m["type"], m["data"]) for m in read] == [
        ({"HumanMessage": "human", "AIMessage": "ai"}[m["id"][-1]], m["kwargs"]) for m in loaded
    ]


def test_with_an_empty_memory_prefix_previous_session_reads_the_bare_key(client, keys):
    bare = Keys(keys.prefix, memory_prefix="")
    workflow = load_workflow(redis_chat())
    services = services_for(client, bare)
    chat(workflow, services, message("a-14062", "my name is Ada"))
    assert client.llen(f"{keys.prefix}a-14062") == 2
    loaded = previous_session(workflow, workflow.nodes[TRIGGER], load_body("a-14062"), services)
    assert [m["kwargs"]["content"] for m in loaded] == ["my name is Ada", "Nice to meet you, Ada!"]


def test_a_session_key_naming_our_keys_is_refused_by_the_node_and_by_previous_session(client, keys):
    bare = Keys(keys.prefix, memory_prefix="")
    client.hset(bare.webhooks(), "POST x/chat", "wf1")
    workflow = load_workflow(redis_chat())
    services = services_for(client, bare)

    run = chat(workflow, services, message("webhooks", "my name is Ada"))
    assert (run.status, run.error_node) == ("error", MEMORY)
    assert run.error.startswith('The session key "webhooks" cannot be used')
    with pytest.raises(SessionKeyRefused) as refused:
        previous_session(workflow, workflow.nodes[TRIGGER], load_body("webhooks"), services)
    assert str(refused.value) == f'Node "{MEMORY}": {run.error}'
    assert client.hgetall(bare.webhooks()) == {"POST x/chat": "wf1"}
    assert client.type(bare.webhooks()) == "hash"


def test_an_empty_custom_key_fails_alike_in_a_run_and_in_previous_session(client, keys):
    workflow = load_workflow(redis_chat(1.5, {"sessionIdType": "customKey", "sessionKey": ""}))
    services = services_for(client, keys)
    run = chat(workflow, services, message("s1", "hi"))
    assert (run.status, run.error_node, run.error) == ("error", MEMORY, "Key parameter is empty")
    with pytest.raises(NodeExecutionError) as failed:
        previous_session(workflow, workflow.nodes[TRIGGER], load_body("s1"), services)
    assert str(failed.value) == f'Node "{MEMORY}": Key parameter is empty'


def test_previous_session_needs_a_memory_on_the_trigger(client, keys):
    data = redis_chat()
    data["connections"][MEMORY]["ai_memory"][0].pop()  # only the Agent keeps it
    workflow = load_workflow(data)
    with pytest.raises(NodeExecutionError) as failed:
        previous_session(workflow, workflow.nodes[TRIGGER], load_body("s1"), Services(keys=keys))
    assert str(failed.value) == (
        f'Node "{TRIGGER}": loadPreviousSession is set to memory but no memory is connected'
    )


def test_simple_memory_answers_from_the_in_process_memory_it_is_lent():
    workflow = load_workflow(example(SIMPLE_CHAT))
    trigger = workflow.nodes[TRIGGER]
    shared = Services(simple_memory=InProcessMemory())
    chat(workflow, shared, message("s1", "my name is Ada"))
    loaded = previous_session(workflow, trigger, load_body("s1"), shared)
    assert [m["kwargs"]["content"] for m in loaded] == ["my name is Ada", "Nice to meet you, Ada!"]
    # The api in queue mode lends an empty one: Simple Memory lives in the workers.
    empty = Services(simple_memory=InProcessMemory())
    assert previous_session(workflow, trigger, load_body("s1"), empty) == []


# --- whose memory is private -------------------------------------------------------------
@pytest.mark.parametrize(
    ("trigger_params", "scoped"),
    [
        ({"public": True}, False),
        ({"public": True, "authentication": "none"}, False),
        ({"public": True, "authentication": "basicAuth"}, True),
        ({"public": True, "authentication": "n8nUserAuth"}, True),
        ({"public": False}, True),
        ({}, True),  # `public` defaults to false, as the api reads it
    ],
)
def test_a_chat_that_is_not_public_or_asks_for_a_login_has_private_memory(trigger_params, scoped):
    data = redis_chat()
    node(data, TRIGGER)["parameters"] = {"options": {}, **trigger_params}
    workflow = load_workflow(data)
    assert memory_scope(workflow) == (workflow.id if scoped else None)


def test_webhook_workflows_share_the_public_namespace():
    assert memory_scope(load_workflow(example(GREETING))) is None


def test_a_protected_workflow_without_an_id_is_scoped_under_the_empty_id(client, keys):
    data = redis_chat(access="basicAuth")
    del data["id"]
    workflow = load_workflow(data)
    assert memory_scope(workflow) == ""
    chat(workflow, services_for(client, keys), message("s1", "hi"))
    assert client.keys(f"{keys.prefix}*") == [f"{keys.prefix}memory::s1"]
