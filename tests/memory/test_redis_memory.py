"""RedisMemory keeps n8n's layout: a LIST of LangChain message JSON, newest first, with a TTL."""

from __future__ import annotations

import json

import pytest
import redis

from memory.messages import ToolCall, ai, human, tool
from memory.redis import RedisMemory

N8N_HUMAN = '{"type":"human","data":{"content":"Hi","additional_kwargs":{},"response_metadata":{}}}'
N8N_AI = (  # as n8n 2.41.1 stored it (redis-cli LRANGE on its Redis Chat Memory)
    '{"type":"ai","data":{"content":"hi","tool_calls":[],"invalid_tool_calls":[],'
    '"additional_kwargs":{},"response_metadata":{}}}'
)


class Recorder:
    """Wraps a real client and records the commands sent through it (and its pipelines)."""

    def __init__(self, client, calls=None, name=""):
        self._client = client
        self._name = name
        self.calls = [] if calls is None else calls

    def __getattr__(self, attr):
        target = getattr(self._client, attr)

        def call(*args, **kwargs):
            self.calls.append((self._name + attr, args, kwargs))
            result = target(*args, **kwargs)
            if attr == "pipeline":
                return Recorder(result, self.calls, name="pipeline.")
            return result

        return call


@pytest.fixture
def memory(redis_client, keys):
    return RedisMemory(redis_client, keys)


def test_the_list_holds_langchain_json_newest_first(memory, redis_client, keys):
    memory.add_turn("s1", [human("Hi"), ai("hi")])
    memory.add_turn("s1", [human("Bye"), ai("bye")])

    key = keys.chat("s1")
    assert redis_client.type(key) == "list"
    stored = redis_client.lrange(key, 0, -1)
    assert stored[2:] == [N8N_AI, N8N_HUMAN]
    assert [json.loads(e)["data"]["content"] for e in stored] == ["bye", "Bye", "hi", "Hi"]
    assert json.loads(stored[1]) == {
        "type": "human",
        "data": {"content": "Bye", "additional_kwargs": {}, "response_metadata": {}},
    }


def test_stored_json_is_compact_and_keeps_non_ascii_text(memory, redis_client, keys):
    memory.add_turn("s1", [human("héllo 👋"), ai("ok")])

    oldest = redis_client.lrange(keys.chat("s1"), -1, -1)[0]
    assert oldest == (
        '{"type":"human","data":{"content":"héllo 👋","additional_kwargs":{},"response_metadata":{}}}'
    )


def test_tool_messages_are_stored_in_langchain_form(memory, redis_client, keys):
    call = ToolCall(name="calculator", args={"input": "1+1"}, id="c1")
    memory.add_turn("s1", [human("1+1?"), ai("", [call]), tool("2", "c1", "calculator"), ai("2")])

    stored = [json.loads(e) for e in redis_client.lrange(keys.chat("s1"), 0, -1)]
    assert stored[2]["data"]["tool_calls"] == [
        {"name": "calculator", "args": {"input": "1+1"}, "id": "c1", "type": "tool_call"}
    ]
    assert stored[1] == {
        "type": "tool",
        "data": {
            "content": "2",
            "additional_kwargs": {},
            "response_metadata": {},
            "tool_call_id": "c1",
            "name": "calculator",
        },
    }


def test_a_ttl_is_set_when_ttl_seconds_is_positive(redis_client, keys):
    RedisMemory(redis_client, keys, ttl_seconds=60).add_turn("s1", [human("Hi"), ai("hi")])

    assert 0 < redis_client.ttl(keys.chat("s1")) <= 60


def test_no_ttl_is_set_when_ttl_seconds_is_zero(memory, redis_client, keys):
    memory.add_turn("s1", [human("Hi"), ai("hi")])

    assert redis_client.ttl(keys.chat("s1")) == -1  # exists, never expires


def test_the_ttl_slides_on_writes_but_not_on_reads(redis_client, keys):
    memory = RedisMemory(redis_client, keys, ttl_seconds=600)
    key = keys.chat("s1")
    memory.add_turn("s1", [human("Hi"), ai("hi")])

    redis_client.expire(key, 5)
    memory.messages("s1")
    memory.load("s1", 1)
    assert redis_client.ttl(key) <= 5

    memory.add_turn("s1", [human("Again"), ai("again")])
    assert 5 < redis_client.ttl(key) <= 600


def test_a_list_written_by_n8n_is_read(memory, redis_client, keys):
    # n8n's agent saves the user message, then the answer: two LPUSHes.
    n8n_ai_with_extras = json.dumps(
        {
            "type": "ai",
            "data": {
                "content": "How can I help?",
                "additional_kwargs": {},
                "response_metadata": {"finish_reason": "stop"},
                "tool_calls": [],
                "invalid_tool_calls": [],
                "usage_metadata": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
                "id": "run-123",
            },
        }
    )
    key = keys.chat("s1")
    for element in (N8N_HUMAN, N8N_AI, N8N_HUMAN, n8n_ai_with_extras):
        redis_client.lpush(key, element)

    assert memory.messages("s1") == [human("Hi"), ai("hi"), human("Hi"), ai("How can I help?")]
    assert memory.load("s1", 1) == [human("Hi"), ai("How can I help?")]


def test_content_blocks_are_read_as_text_and_kept_as_blocks(memory, redis_client, keys):
    blocks = [{"type": "text", "text": "Hi"}]
    redis_client.lpush(keys.chat("s1"), json.dumps({"type": "human", "data": {"content": blocks}}))

    [message] = memory.messages("s1")
    assert (message.role, message.content, message.blocks) == ("human", "Hi", blocks)
    assert message.to_stored()["data"]["content"] == blocks  # written back as n8n wrote it


def test_unreadable_elements_are_skipped(memory, redis_client, keys):
    garbage = [
        "not json",
        "null",
        "[1, 2]",
        '{"type": "function", "data": {"content": "x", "name": "f"}}',
        '{"type": "human", "data": "a string"}',
        '{"type": "ai", "data": {"content": "x", "tool_calls": [{"args": {}}]}}',
    ]
    key = keys.chat("s1")
    redis_client.lpush(key, N8N_HUMAN, *garbage, N8N_AI)

    assert memory.messages("s1") == [human("Hi"), ai("hi")]


def test_invalid_utf8_is_skipped_with_a_bytes_client(redis_url, keys):
    raw = redis.Redis.from_url(redis_url)
    try:
        raw.lpush(keys.chat("s1"), N8N_HUMAN, b"\xff\xfe{", N8N_AI)

        assert RedisMemory(raw, keys).messages("s1") == [human("Hi"), ai("hi")]
        assert RedisMemory(raw, keys).sessions() == ["s1"]
    finally:
        raw.close()


def test_load_reads_only_the_window(redis_client, keys):
    recorder = Recorder(redis_client)
    memory = RedisMemory(recorder, keys)
    key = keys.chat("s1")

    memory.load("s1", 2)
    memory.load("s1", None)
    memory.load("s1", 0)

    assert recorder.calls == [
        ("execute_command", ("LRANGE", key, 0, 3), {}),
        ("execute_command", ("LRANGE", key, 0, -1), {}),
    ]


def test_add_turn_is_one_transaction(redis_client, keys):
    recorder = Recorder(redis_client)
    RedisMemory(recorder, keys, ttl_seconds=60).add_turn("s1", [human("Hi"), ai("hi")])

    key = keys.chat("s1")
    assert recorder.calls == [
        ("pipeline", (), {"transaction": True}),
        ("pipeline.lpush", (key, N8N_HUMAN, N8N_AI), {}),
        ("pipeline.expire", (key, 60), {}),
        ("pipeline.execute", (), {}),
    ]
    assert redis_client.lrange(key, 0, -1) == [N8N_AI, N8N_HUMAN]


def test_sessions_only_lists_keys_under_this_prefix(memory, redis_client, keys):
    memory.add_turn("mine", [human("Hi"), ai("hi")])
    redis_client.lpush("other-prefix:chat:theirs", N8N_HUMAN)
    try:
        assert memory.sessions() == ["mine"]
    finally:
        redis_client.delete("other-prefix:chat:theirs")
