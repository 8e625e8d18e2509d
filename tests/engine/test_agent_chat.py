"""The calculator chat in-process: streaming through hooks, sub-node runs, memory."""

from __future__ import annotations

import pytest

from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.llm import tool_name
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example

ANSWER_437 = "Based on the tools: Calculator returned 437."


def chat(workflow, services, message, session="s1", streaming=True):
    chunks = []
    hooks = Hooks().add_handler("sendChunk", chunks.append)
    item = {"json": {"action": "sendMessage", "sessionId": session, "chatInput": message}}
    run = run_workflow(workflow, [item], hooks=hooks, services=services, streaming=streaming)
    return run, chunks


@pytest.fixture
def redis_services(fake_redis, keys):
    return Services(redis=fake_redis, keys=keys)


def test_streams_the_calculator_answer_as_begin_items_end(redis_services):
    run, chunks = chat(load_workflow(example(REDIS_CHAT)), redis_services, "What is 19 * 23?")
    assert run.status == "success", run.error
    types = [c["type"] for c in chunks]
    assert types[0] == "begin" and types[-1] == "end"
    items = [c for c in chunks if c["type"] == "item"]
    assert len(items) > 1
    assert "".join(c["content"] for c in items) == ANSWER_437
    meta = chunks[0]["metadata"]
    assert meta["nodeName"] == "AI Agent" and meta["itemIndex"] == 0 and meta["runIndex"] == 0
    assert isinstance(meta["timestamp"], int)
    assert run.first_json() == {"output": ANSWER_437}


def test_a_v3_agent_streams_each_model_call_after_a_tool_call_as_a_run_of_its_own(
    redis_services,
):
    raw = example(REDIS_CHAT)
    next(n for n in raw["nodes"] if n["name"] == "AI Agent")["typeVersion"] = 3.1
    run, chunks = chat(load_workflow(raw), redis_services, "What is 19 * 23?")
    assert run.status == "success", run.error
    runs = [(c["type"], c["metadata"]["runIndex"]) for c in chunks if c["type"] != "item"]
    assert runs == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1)]
    items = [c for c in chunks if c["type"] == "item"]
    assert {c["metadata"]["runIndex"] for c in items} == {1}
    assert "".join(c["content"] for c in items) == ANSWER_437


def test_a_v2_agent_streams_one_run_whatever_the_tools(redis_services):
    _, chunks = chat(load_workflow(example(REDIS_CHAT)), redis_services, "What is 19 * 23?")
    assert [c["type"] for c in chunks if c["type"] != "item"] == ["begin", "end"]
    assert {c["metadata"]["runIndex"] for c in chunks} == {0}


def test_model_runs_twice_and_calculator_gets_the_models_arguments(redis_services):
    run, _ = chat(load_workflow(example(REDIS_CHAT)), redis_services, "What is 19 * 23?")
    model_runs = run.run_data["Mock Chat Model"]
    assert len(model_runs) == 2
    first = model_runs[0]["data"]["ai_languageModel"][0][0]["json"]["response"]
    second = model_runs[1]["data"]["ai_languageModel"][0][0]["json"]["response"]
    assert first["tool_calls"][0]["args"] == {"input": "19 * 23"}
    assert second["content"] == ANSWER_437
    calculator = run.run_data["Calculator"]
    assert len(calculator) == 1
    assert calculator[0]["inputOverride"]["ai_tool"][0][0]["json"] == {"input": "19 * 23"}
    assert calculator[0]["data"]["ai_tool"][0][0]["json"] == {"response": "437"}


def test_without_a_chunk_listener_nothing_streams():
    workflow = load_workflow(example(SIMPLE_CHAT))
    services = Services(simple_memory=InProcessMemory())
    run = run_workflow(
        workflow,
        [{"json": {"sessionId": "x", "chatInput": "What is 2 + 3?"}}],
        services=services,
        streaming=True,
    )
    assert run.status == "success"
    assert run.streamed is False
    assert run.first_json() == {"output": "Based on the tools: Calculator returned 5."}


@pytest.mark.parametrize("backend", ["redis", "simple"])
def test_three_turns_remember_the_name(backend, redis_services):
    if backend == "redis":
        workflow, services = load_workflow(example(REDIS_CHAT)), redis_services
    else:
        workflow = load_workflow(example(SIMPLE_CHAT))
        services = Services(simple_memory=InProcessMemory())
    chat(workflow, services, "What is 6 * 7?", session="ada")
    run2, _ = chat(workflow, services, "my name is Ada", session="ada")
    assert run2.first_json() == {"output": "Nice to meet you, Ada!"}
    run3, chunks = chat(workflow, services, "What is my name?", session="ada")
    assert (
        "".join(c.get("content", "") for c in chunks if c["type"] == "item") == "Your name is Ada."
    )
    assert run3.first_json() == {"output": "Your name is Ada."}
    assert "Calculator" not in run3.run_data  # the third turn ran no tool


def test_sessions_do_not_share_memory(redis_services):
    workflow = load_workflow(example(REDIS_CHAT))
    chat(workflow, redis_services, "my name is Ada", session="one")
    run, _ = chat(workflow, redis_services, "What is my name?", session="two")
    assert run.first_json() == {"output": "I don't know your name yet."}


def test_memory_runs_are_recorded_with_history(redis_services):
    workflow = load_workflow(example(REDIS_CHAT))
    chat(workflow, redis_services, "my name is Ada", session="m")
    run, _ = chat(workflow, redis_services, "What is my name?", session="m")
    memory_runs = run.run_data["Redis Chat Memory"]
    assert [r["inputOverride"]["ai_memory"][0][0]["json"]["action"] for r in memory_runs] == [
        "loadMemoryVariables",
        "saveContext",
    ]
    history = memory_runs[0]["data"]["ai_memory"][0][0]["json"]["chatHistory"]
    assert [m["data"]["content"] for m in history] == ["my name is Ada", "Nice to meet you, Ada!"]


def test_history_sits_between_system_message_and_this_turn(redis_services):
    workflow = load_workflow(example(REDIS_CHAT))
    chat(workflow, redis_services, "my name is Ada", session="order")
    run, _ = chat(workflow, redis_services, "hello there", session="order")
    sent = run.run_data["Mock Chat Model"][0]["inputOverride"]["ai_languageModel"][0][0]["json"]
    assert [(m["type"], m["data"]["content"]) for m in sent["messages"]] == [
        ("system", "You are a helpful assistant. Use the calculator for arithmetic."),
        ("human", "my name is Ada"),
        ("ai", "Nice to meet you, Ada!"),
        ("human", "hello there"),
    ]


@pytest.mark.parametrize(
    ("version", "options", "sent"),
    [
        (2.2, {}, None),  # n8n: `options.systemMessage ?? typeVersion < 1.9`
        (3.1, {}, None),
        (1.8, {}, "You are a helpful assistant"),  # n8n's default, sent unasked before 1.9
        (1.8, {"systemMessage": ""}, None),  # an empty one sends none, in any version
        (3.1, {"systemMessage": "={{ 'Be ' + 'brief.' }}"}, "Be brief."),
    ],
)
def test_a_system_message_is_sent_only_when_the_workflow_sets_one(
    redis_services, version, options, sent
):
    data = example(REDIS_CHAT)
    agent = next(n for n in data["nodes"] if n["name"] == "AI Agent")
    agent["typeVersion"], agent["parameters"]["options"] = version, options
    run, _ = chat(load_workflow(data), redis_services, "hello", session=f"system-{version}")
    request = run.run_data["Mock Chat Model"][0]["inputOverride"]["ai_languageModel"][0][0]
    messages = [(m["type"], m["data"]["content"]) for m in request["json"]["messages"]]
    assert messages == [*([("system", sent)] if sent else []), ("human", "hello")]


@pytest.mark.parametrize(
    ("node_name", "name"),
    [
        ("Calculator", "Calculator"),
        ("My calc (v2)!", "My_calc_v2_"),  # n8n's nodeNameToToolName: runs become one `_`
        ("Ünïcode 🧮 tool", "_n_code_tool"),
        ("a" * 63 + " b", "a" * 63),  # cut at 64, no `_` left at the end
    ],
)
def test_a_tool_is_named_after_its_node_as_n8n_names_it(node_name, name):
    assert tool_name(node_name) == name
