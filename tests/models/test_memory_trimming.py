"""maxTokensFromMemory through the real queue (gunicorn+gevent api, Celery worker, Redis): the
request the fake OpenAI server receives holds only the newest history that fits, counted with
the model's own tokenizer (or by n8n's estimate, when asked), starting on a user message; and
with keepToolCallsInMemory the tool turn travels back to the model on later turns as n8n 2.41.1
sends it."""

from __future__ import annotations

import uuid

from memory.messages import ToolCall, ai, human, tool
from memory.redis import RedisMemory
from tests.e2e.client import stream_chat
from tests.e2e.deployment import chat_url
from tests.models.conftest import openai_chat
from tests.workflows import node

SYSTEM = "You are a helpful assistant. Use the calculator for any arithmetic."
FOUR_LINES = "Tell me three things:\nthe first thing\nthe second thing\nthe third thing"
# A history of 51 tokens in gpt-4.1-mini's o200k_base encoding, per message:
# 4, 7, 8, 0, 1, 10, 16, 5 (by length / 4 it would be 50).
HISTORY = [
    human("my name is Ada"),
    ai("Nice to meet you, Ada!"),
    human("What is 19 * 23?"),
    ai("", [ToolCall("calculator", {"input": "19 * 23"}, "call_19x23")]),
    tool("437", "call_19x23", "calculator"),
    ai("Based on the tools: Calculator returned 437."),
    human(FOUR_LINES),
    ai("You said: three things"),
]


def agent(workflow: dict, **options) -> dict:
    node(workflow, "AI Agent")["parameters"]["options"].update(options)
    node(workflow, "Redis Chat Memory")["parameters"]["contextWindowLength"] = 50
    return workflow


def sent_messages(fake) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in fake.requests[-1]["body"]["messages"]]


def test_a_long_history_is_trimmed_to_the_tokens_that_fit_starting_on_a_user_message(deploy, fake):
    workflow = deploy.activate(agent(openai_chat(), maxTokensFromMemory=50))
    session = f"trim-{uuid.uuid4().hex[:8]}"
    RedisMemory(deploy.redis, deploy.keys).add_turn(session, HISTORY)
    reply = stream_chat(chat_url(deploy.base, workflow), "hello", session)
    assert reply.text() == "You said: hello"
    # 51 > 50: the oldest message goes, then "Nice to meet you" (an answer cannot start it).
    assert sent_messages(fake) == [
        ("system", SYSTEM),
        ("user", "What is 19 * 23?"),
        ("assistant", ""),
        ("tool", "437"),
        ("assistant", "Based on the tools: Calculator returned 437."),
        ("user", FOUR_LINES),
        ("assistant", "You said: three things"),
        ("user", "hello"),
    ]
    call = fake.requests[-1]["body"]["messages"][2]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_19x23", "calculator")


def test_counted_by_n8n_s_estimate_the_same_budget_keeps_the_whole_history(deploy, fake):
    """Length / 4, what n8n counts when it cannot download the tokenizer: 50 tokens, which fit."""
    options = {"maxTokensFromMemory": 50, "tokenCount": "estimate"}
    workflow = deploy.activate(agent(openai_chat(), **options))
    session = f"trim-{uuid.uuid4().hex[:8]}"
    RedisMemory(deploy.redis, deploy.keys).add_turn(session, HISTORY)
    stream_chat(chat_url(deploy.base, workflow), "hello", session)
    assert len(sent_messages(fake)) == 1 + len(HISTORY) + 1


def test_a_budget_inside_a_message_keeps_its_last_lines(deploy, fake):
    workflow = deploy.activate(agent(openai_chat(), maxTokensFromMemory=12))
    session = f"trim-{uuid.uuid4().hex[:8]}"
    RedisMemory(deploy.redis, deploy.keys).add_turn(session, HISTORY)
    stream_chat(chat_url(deploy.base, workflow), "hello", session)
    assert sent_messages(fake) == [
        ("system", SYSTEM),
        ("user", "the second thing\nthe third thing"),  # allowPartial: the lines that fit
        ("assistant", "You said: three things"),
        ("user", "hello"),
    ]


def test_without_a_budget_the_whole_window_goes_to_the_model(deploy, fake):
    workflow = deploy.activate(agent(openai_chat()))
    session = f"trim-{uuid.uuid4().hex[:8]}"
    RedisMemory(deploy.redis, deploy.keys).add_turn(session, HISTORY)
    stream_chat(chat_url(deploy.base, workflow), "hello", session)
    assert len(sent_messages(fake)) == 1 + len(HISTORY) + 1


def test_a_kept_tool_turn_is_sent_back_to_the_model_on_the_next_turn(deploy, fake):
    workflow = deploy.activate(agent(openai_chat(), keepToolCallsInMemory=True))
    session = f"keep-{uuid.uuid4().hex[:8]}"
    url = chat_url(deploy.base, workflow)
    assert stream_chat(url, "What is 6 * 7?", session).text() == (
        "Based on the tools: Calculator returned 42."
    )
    call_id = fake.requests[-1]["body"]["messages"][2]["tool_calls"][0]["id"]
    stream_chat(url, "my name is Ada", session)
    history = fake.requests[-1]["body"]["messages"][1:]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "What is 6 * 7?"),
        ("assistant", []),
        ("tool", '[{"response":"42"}]'),
        ("assistant", "Based on the tools: Calculator returned 42."),
        ("user", "my name is Ada"),
    ]
    assert history[1]["tool_calls"][0]["id"] == history[2]["tool_call_id"] == call_id
