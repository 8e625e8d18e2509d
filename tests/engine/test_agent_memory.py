"""What the AI Agent keeps in memory and sends its model, as n8n 2.41.1 does per typeVersion
(tests/fixtures/n8n_memory/, recorded on it): from 3 the tool turn in n8n's form, before 3 its
text only, `keepToolCallsInMemory` switching either way; read back by the next turn with n8n's
window and orphan rules, in Simple Memory and Redis Chat Memory alike; and the tool-step chunks
of `streamToolCalls`."""

from __future__ import annotations

import json
import uuid

import fakeredis
import pytest

from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.nodes.memory_buffer_window import buffer_key
from engine.previous_session import previous_session
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from tests.n8n_memory import (
    ANSWER_437,
    VARIANTS,
    fixture,
    ids_named,
    memory_after,
    requests_of,
    turns,
)
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example, node


class Chat:
    """One workflow, one session, on Simple Memory or Redis Chat Memory."""

    def __init__(self, backend: str, keys, version: float = 3.1, **agent_options):
        example_name = REDIS_CHAT if backend == "redis" else SIMPLE_CHAT
        self.raw = example(example_name)
        node(self.raw, "AI Agent")["typeVersion"] = version
        node(self.raw, "AI Agent")["parameters"]["options"].update(agent_options)
        self.workflow = load_workflow(self.raw)
        self.memory_node = "Redis Chat Memory" if backend == "redis" else "Simple Memory"
        self.client = fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        self.simple = InProcessMemory()
        self.services = Services(redis=self.client, keys=keys, simple_memory=self.simple)
        self.session = f"s-{uuid.uuid4().hex[:8]}"
        self.backend = backend
        self.chunks: list[dict] = []

    def say(self, text: str):
        hooks = Hooks().add_handler("sendChunk", self.chunks.append)
        item = {"json": {"action": "sendMessage", "sessionId": self.session, "chatInput": text}}
        run = run_workflow(
            self.workflow, [item], hooks=hooks, services=self.services, streaming=True
        )
        assert run.status == "success", run.error
        return run

    def stored(self) -> list[str]:
        """The memory's elements as JSON text, oldest first (Redis: the raw list elements)."""
        if self.backend == "redis":
            key = self.services.keys.chat(self.session)
            return list(reversed(self.client.lrange(key, 0, -1)))
        key = buffer_key(self.workflow.id, self.session)  # Simple Memory's key
        return [json.dumps(m.to_stored(), separators=(",", ":"), ensure_ascii=False)
                for m in self.simple.messages(key)]  # fmt: skip

    def sent(self, run, call: int = 0) -> list[tuple[str, str]]:
        """(type, content) of the messages of one model request of `run`."""
        return [(m["type"], m["data"]["content"]) for m in self.request(run, call)]

    def request(self, run, call: int = 0) -> list[dict]:
        task = run.run_data["Mock Chat Model"][call]
        return task["inputOverride"]["ai_languageModel"][0][0]["json"]["messages"]


@pytest.fixture(params=["simple", "redis"])
def backend(request):
    return request.param


@pytest.mark.parametrize("version", [2.2, 3.1])
def test_memory_holds_what_n8n_stores_for_a_tool_turn(backend, keys, version):
    """The same text as n8n's, element for element, but for the model's generated call ids."""
    chat = Chat(backend, keys, version)
    variant = f"agent-{version:g}-lastNode"
    for turn, message in enumerate(turns(variant)):
        chat.say(message)
        assert ids_named(chat.stored()) == ids_named(memory_after(variant, turn))


@pytest.mark.parametrize("variant", VARIANTS)
def test_n8n_went_on_with_a_conversation_this_engine_started(keys, variant):
    """The recording let this engine answer a first turn into n8n's Redis and n8n the second:
    what it was given is what we write today, it kept that as it was, and it asked its model
    what it asks in a conversation of its own."""
    cross = fixture(variant)["ours_then_n8n"]
    chat = Chat("redis", keys, 2.2 if "2.2" in variant else 3.1)
    chat.say(turns(variant)[0])
    assert chat.stored() == list(reversed(cross["ours"]))
    assert cross["memory"][2:] == cross["ours"]
    theirs = [json.dumps(r["messages"]) for r in requests_of(variant, 1)]
    assert ids_named([json.dumps(r["messages"]) for r in cross["requests"]]) == ids_named(theirs)


def test_agent_2_2_keeps_the_tool_turn_when_asked(backend, keys):
    chat = Chat(backend, keys, 2.2, keepToolCallsInMemory=True)
    chat.say("What is 19 * 23?")
    assert ids_named(chat.stored()) == ids_named(memory_after("agent-3.1-lastNode", 0))


def test_agent_3_1_keeps_the_text_only_when_told_not_to_keep_tool_calls(backend, keys):
    chat = Chat(backend, keys, 3.1, keepToolCallsInMemory=False)
    chat.say("What is 19 * 23?")
    assert chat.stored() == memory_after("agent-2.2-lastNode", 0)


def test_the_next_turn_sends_the_tool_turn_back_as_n8n_does(backend, keys):
    chat = Chat(backend, keys)
    chat.say("What is 19 * 23?")
    run = chat.say("my name is Ada")
    assert chat.sent(run)[1:] == [
        ("human", "What is 19 * 23?"),
        ("ai", []),
        ("tool", '[{"response":"437"}]'),
        ("ai", ANSWER_437),
        ("human", "my name is Ada"),
    ]
    ai_call, result = (m["data"] for m in chat.request(run)[2:4])
    assert ai_call["tool_calls"] == [
        {
            "id": "call_mock_1",
            "name": "Calculator",
            "args": {"input": "19 * 23", "id": "call_mock_1"},
            "type": "tool_call",
        }
    ]
    assert result["tool_call_id"] == "call_mock_1" and result["name"] == "Calculator"


@pytest.mark.parametrize(
    ("version", "sent"),
    [
        (2.2, [("ai", ""), ("tool", "437")]),  # LangChain's AgentExecutor: the model's message
        (3.1, [("ai", []), ("tool", '[{"response":"437"}]')]),  # n8n's engine: its own pair
    ],
)
def test_within_the_turn_the_tool_result_goes_back_as_n8n_sends_it(keys, version, sent):
    chat = Chat("simple", keys, version)
    run = chat.say("What is 19 * 23?")
    assert chat.sent(run, 1)[-2:] == sent
    assert "name" not in chat.request(run, 1)[-1]["data"]


def test_a_window_that_cuts_a_tool_turn_sends_no_orphaned_tool_result(backend, keys):
    """n8n counts the window in messages (k turns = 2k messages) and then drops the orphans: a
    window of one turn holds [tool, answer] here, and the tool result goes."""
    chat = Chat(backend, keys)
    node(chat.raw, chat.memory_node)["parameters"]["contextWindowLength"] = 1
    chat.workflow = load_workflow(chat.raw)
    chat.say("What is 19 * 23?")
    run = chat.say("my name is Ada")
    assert chat.sent(run)[1:] == [("ai", ANSWER_437), ("human", "my name is Ada")]


def test_the_previous_session_shows_only_the_user_s_messages_and_the_ai_s_text(backend, keys):
    chat = Chat(backend, keys)
    chat.say("What is 19 * 23?")
    trigger = chat.workflow.nodes["When chat message received"]
    body = {"action": "loadPreviousSession", "sessionId": chat.session}
    shown = previous_session(chat.workflow, trigger, body, chat.services)
    assert [(m["id"][-1], m["kwargs"]["content"]) for m in shown] == [
        ("HumanMessage", "What is 19 * 23?"),
        ("AIMessage", ANSWER_437),
    ]


def test_tool_steps_stream_as_start_and_end_lines_between_begin_and_end(keys):
    chat = Chat("simple", keys, streamToolCalls=True)
    chat.say("What is 19 * 23?")
    kinds = [c["type"] for c in chat.chunks]
    assert kinds[:3] == ["begin", "tool-call-start", "tool-call-end"]
    # From Agent 3, the model call after the tool call is a run of its own (n8n's V3): end, begin
    assert kinds[-1] == "end" and [k for k in kinds[3:-1] if k != "item"] in ([], ["end", "begin"])
    assert "item" in kinds[3:-1]
    start, end = (c["metadata"] for c in chat.chunks[1:3])
    assert {
        k: start[k] for k in ("nodeName", "toolName", "toolCallId", "toolNode", "toolInput")
    } == {
        "nodeName": "AI Agent",
        "toolName": "Calculator",
        "toolCallId": "call_mock_1",
        "toolNode": "Calculator",
        "toolInput": '{"input":"19 * 23"}',
    }
    assert end["toolOutput"] == "437" and "toolError" not in end
    assert isinstance(end["durationMs"], int) and end["durationMs"] >= 0
    assert "content" not in chat.chunks[1] and "content" not in chat.chunks[2]
    assert "".join(c.get("content", "") for c in chat.chunks if c["type"] == "item") == ANSWER_437


def test_without_the_option_no_tool_step_line_is_sent(keys):
    chat = Chat("simple", keys)
    chat.say("What is 19 * 23?")
    assert {c["type"] for c in chat.chunks} == {"begin", "item", "end"}
