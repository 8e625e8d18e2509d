"""What the AI Agent keeps in memory and sends its model: n8n's text-only turns by default,
with `keepToolCallsInMemory` the format of n8n's buildMessagesFromSteps (checked field by field
against the JSON @langchain/core 1.2.8 writes for the same messages), read back by the next turn
with n8n's window and orphan rules, in Simple Memory and Redis Chat Memory alike; and the
tool-step chunks of `streamToolCalls`."""

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
from tests.workflows import REDIS_CHAT, SIMPLE_CHAT, example, node

ANSWER_437 = "Based on the tools: Calculator returned 437."
# `mapChatMessagesToStoredMessages([HumanMessage, AIMessage({content: "", tool_calls}),
# ToolMessage({content, tool_call_id, name}), AIMessage(answer)])` in @langchain/core 1.2.8,
# with the id and arguments the mock model gives its call.
LANGCHAIN_TURN = [
    '{"type":"human","data":{"content":"What is 19 * 23?","additional_kwargs":{},'
    '"response_metadata":{}}}',
    '{"type":"ai","data":{"content":"","tool_calls":[{"id":"call_mock_1","name":"calculator",'
    '"args":{"input":"19 * 23"},"type":"tool_call"}],"invalid_tool_calls":[],'
    '"additional_kwargs":{},"response_metadata":{}}}',
    '{"type":"tool","data":{"content":"437","tool_call_id":"call_mock_1","name":"calculator",'
    '"additional_kwargs":{},"response_metadata":{}}}',
    '{"type":"ai","data":{"content":"Based on the tools: Calculator returned 437.",'
    '"tool_calls":[],"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}',
]


class Chat:
    """One workflow, one session, on Simple Memory or Redis Chat Memory."""

    def __init__(self, backend: str, keys, **agent_options):
        example_name = REDIS_CHAT if backend == "redis" else SIMPLE_CHAT
        self.raw = example(example_name)
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
        task = run.run_data["Mock Chat Model"][call]
        messages = task["inputOverride"]["ai_languageModel"][0][0]["json"]["messages"]
        return [(m["type"], m["data"]["content"]) for m in messages]


@pytest.fixture(params=["simple", "redis"])
def backend(request):
    return request.param


def test_by_default_a_tool_turn_is_stored_as_the_question_and_the_answer(backend, keys):
    chat = Chat(backend, keys)
    chat.say("What is 19 * 23?")
    assert chat.stored() == [LANGCHAIN_TURN[0], LANGCHAIN_TURN[3]]


def test_kept_tool_calls_are_stored_as_langchain_js_writes_them(backend, keys):
    chat = Chat(backend, keys, keepToolCallsInMemory=True)
    chat.say("What is 19 * 23?")
    stored = chat.stored()
    assert [json.loads(s) for s in stored] == [json.loads(s) for s in LANGCHAIN_TURN]
    assert stored == LANGCHAIN_TURN  # byte for byte, field order included
    ai_call, result = (json.loads(s)["data"] for s in stored[1:3])
    assert ai_call["tool_calls"][0]["id"] == result["tool_call_id"]  # the pair matches


def test_the_next_turn_reads_the_tool_call_back_and_sends_it_to_the_model(backend, keys):
    chat = Chat(backend, keys, keepToolCallsInMemory=True)
    chat.say("What is 19 * 23?")
    run = chat.say("my name is Ada")
    assert chat.sent(run)[1:] == [
        ("human", "What is 19 * 23?"),
        ("ai", ""),
        ("tool", "437"),
        ("ai", ANSWER_437),
        ("human", "my name is Ada"),
    ]
    sent = run.run_data["Mock Chat Model"][0]["inputOverride"]["ai_languageModel"][0][0]
    ai_call = sent["json"]["messages"][2]["data"]
    assert ai_call["tool_calls"] == [
        {
            "id": "call_mock_1",
            "name": "calculator",
            "args": {"input": "19 * 23"},
            "type": "tool_call",
        }
    ]


def test_a_window_that_cuts_a_tool_turn_sends_no_orphaned_tool_result(backend, keys):
    """n8n counts the window in messages (k turns = 2k messages) and then drops the orphans: a
    window of one turn holds [tool, answer] here, and the tool result goes."""
    chat = Chat(backend, keys, keepToolCallsInMemory=True)
    node(chat.raw, chat.memory_node)["parameters"]["contextWindowLength"] = 1
    chat.workflow = load_workflow(chat.raw)
    chat.say("What is 19 * 23?")
    run = chat.say("my name is Ada")
    assert chat.sent(run)[1:] == [("ai", ANSWER_437), ("human", "my name is Ada")]


def test_the_previous_session_shows_only_the_user_s_messages_and_the_ai_s_text(backend, keys):
    chat = Chat(backend, keys, keepToolCallsInMemory=True)
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
    assert kinds[-1] == "end" and set(kinds[3:-1]) == {"item"}
    start, end = (c["metadata"] for c in chat.chunks[1:3])
    assert {
        k: start[k] for k in ("nodeName", "toolName", "toolCallId", "toolNode", "toolInput")
    } == {
        "nodeName": "AI Agent",
        "toolName": "calculator",
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
