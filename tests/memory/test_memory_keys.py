"""Where chat memory lives in Redis: public chats under the memory prefix ("chat:" by default,
"" for n8n's bare session keys), protected chats in their workflow's own namespace, and never a
session key that names one of our other keys."""

from __future__ import annotations

import pytest

from core.keys import Keys, ReservedKeyError
from core.settings import Settings
from memory.messages import ai, human
from memory.redis import RedisMemory, protected_sessions
from tests.memory.conformance import MemoryConformance

# A turn as n8n's Redis Chat Memory stores it (LangChain's toDict, then JSON.stringify).
N8N_HUMAN = (
    '{"type":"human","data":{"content":"my name is Ada",'
    '"additional_kwargs":{},"response_metadata":{}}}'
)
N8N_AI = (  # as n8n 2.41.1 stored it (redis-cli LRANGE on its Redis Chat Memory)
    '{"type":"ai","data":{"content":"Nice to meet you, Ada!","tool_calls":[],'
    '"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{}}}'
)

# With an empty memory prefix a session key is a key name; these name ours (or the broker's).
OUR_KEYS = [
    "workflow:wf1",
    "workflows",
    "webhooks",
    "execution:e1",
    "execution:e1:turn",
    "executions:running",
    "executions:workflow:wf1",
    "session:wf1:a-14062",
    "push:tab1",
    "memory:wf1:a-14062",
    "mini-n8n",  # the Celery queue (MINI_N8N_TASK_QUEUE) when the broker shares the database
    "mini-n8n\x06\x163",  # one of its priority lists
    "_kombu.binding.mini-n8n",
    "unacked",
    "unacked_index",
    "",
]
# Session keys that look close to ours but are not.
ORDINARY = ["a-14062", "chat:a-14062", "workflowsx", "memory", "memoryless:1", "mini-n8n-2", "💬"]


def bare(prefix: str = "p:") -> Keys:
    return Keys(prefix, memory_prefix="", task_queue="mini-n8n")


# --- key strings ---------------------------------------------------------------------------
def test_a_public_chats_memory_is_chat_colon_session_under_the_global_prefix():
    assert Keys("p:").chat("a-14062") == "p:chat:a-14062"
    assert Keys().chat("a-14062") == "chat:a-14062"


def test_an_empty_memory_prefix_gives_n8ns_bare_session_key():
    assert bare().chat("a-14062") == "p:a-14062"
    assert bare("").chat("a-14062") == "a-14062"


def test_a_protected_chats_memory_is_memory_colon_workflow_colon_session():
    assert Keys("p:").chat("a-14062", "wf1") == "p:memory:wf1:a-14062"
    assert bare().chat("a-14062", "wf1") == "p:memory:wf1:a-14062"  # whatever the memory prefix
    assert Keys().chat("webhooks", "wf1") == "memory:wf1:webhooks"  # any key is fine in there


@pytest.mark.parametrize("session", OUR_KEYS)
def test_with_an_empty_memory_prefix_a_session_key_naming_our_keys_is_refused(session):
    with pytest.raises(ReservedKeyError) as refused:
        bare("").chat(session)
    assert f'The session key "{session}" cannot be used' in str(refused.value)


@pytest.mark.parametrize("session", ORDINARY)
def test_with_an_empty_memory_prefix_other_session_keys_are_their_own_key(session):
    assert bare("").chat(session) == session


@pytest.mark.parametrize("keys", [Keys("p:"), Keys(""), bare("p:"), bare("")], ids=repr)
def test_no_public_session_key_can_produce_a_protected_key(keys):
    protected = keys.prefix + "memory:"
    for session in OUR_KEYS + ORDINARY + ["memory:", "memory:wf1:", "wf1:a-14062"]:
        try:
            key = keys.chat(session)
        except ReservedKeyError:
            continue
        assert not key.startswith(protected), session


def test_workflow_ids_are_escaped_so_two_protected_keys_never_coincide():
    keys = Keys("p:")
    assert keys.chat("c", "a:b") == "p:memory:a%3Ab:c"
    assert keys.chat("b:c", "a") == "p:memory:a:b:c"
    assert keys.chat("c", "a%3Ab") == "p:memory:a%253Ab:c"
    for workflow_id in ("a:b", "a%3Ab", "plain", "%", ":"):
        key = keys.chat("s:1", workflow_id)
        assert keys.protected_session_from_key(key) == (workflow_id, "s:1")


@pytest.mark.parametrize("prefix", ["memory:", "workflow:", "execution:x", "push:"])
def test_a_memory_prefix_inside_our_namespaces_is_refused_at_start(prefix):
    with pytest.raises(ValueError, match="MINI_N8N_MEMORY_KEY_PREFIX"):
        Keys(memory_prefix=prefix)


def test_the_setting_defaults_to_chat_colon_and_may_be_empty(monkeypatch):
    monkeypatch.delenv("MINI_N8N_MEMORY_KEY_PREFIX", raising=False)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", "p:")
    assert Keys.from_settings(Settings.from_env()).chat("s") == "p:chat:s"
    monkeypatch.setenv("MINI_N8N_MEMORY_KEY_PREFIX", "")
    settings = Settings.from_env()
    assert settings.memory_key_prefix == ""
    assert Keys.from_settings(settings).chat("s") == "p:s"
    with pytest.raises(ReservedKeyError):
        Keys.from_settings(settings).chat(settings.task_queue)


# --- on a real server ----------------------------------------------------------------------
def test_with_an_empty_prefix_a_turn_is_the_list_at_the_bare_session_key(redis_client, keys):
    memory = RedisMemory(redis_client, bare(keys.prefix))
    memory.add_turn("a-14062", [human("my name is Ada"), ai("Nice to meet you, Ada!")])
    assert redis_client.lrange(f"{keys.prefix}a-14062", 0, -1) == [N8N_AI, N8N_HUMAN]


def test_with_an_empty_prefix_a_list_n8n_wrote_is_read_as_the_conversation(redis_client, keys):
    redis_client.lpush(f"{keys.prefix}a-14062", N8N_HUMAN, N8N_AI)  # as n8n writes a turn
    memory = RedisMemory(redis_client, bare(keys.prefix))
    assert memory.messages("a-14062") == [human("my name is Ada"), ai("Nice to meet you, Ada!")]


def test_with_an_empty_prefix_sessions_are_the_lists_outside_our_namespaces(redis_client, keys):
    p = keys.prefix
    redis_client.set(f"{p}workflow:wf1", "{}")
    redis_client.hset(f"{p}webhooks", "POST x/chat", "wf1")
    redis_client.sadd(f"{p}workflows", "wf1")
    for ours in ("session:wf1:a-14062", "execution:e1:turn", "memory:wf1:secret", "mini-n8n"):
        redis_client.lpush(p + ours, "x")
    redis_client.set(f"{p}a-string", "not a session")
    redis_client.lpush(f"{p}a-14062", N8N_HUMAN)
    redis_client.lpush(f"{p}chat:b", N8N_HUMAN)
    assert RedisMemory(redis_client, bare(p)).sessions() == ["a-14062", "chat:b"]


def test_a_refused_session_key_reads_writes_and_deletes_nothing(redis_client, keys):
    memory = RedisMemory(redis_client, bare(keys.prefix))
    redis_client.hset(f"{keys.prefix}webhooks", "POST x/chat", "wf1")
    redis_client.lpush(f"{keys.prefix}mini-n8n", "a queued task")
    for call in (
        lambda: memory.clear("webhooks"),
        lambda: memory.messages("mini-n8n"),
        lambda: memory.add_turn("mini-n8n", [human("hi"), ai("hi")]),
        lambda: memory.load("webhooks", 5),
    ):
        with pytest.raises(ReservedKeyError):
            call()
    assert redis_client.hgetall(f"{keys.prefix}webhooks") == {"POST x/chat": "wf1"}
    assert redis_client.lrange(f"{keys.prefix}mini-n8n", 0, -1) == ["a queued task"]


def test_public_and_protected_sessions_with_one_id_are_separate_lists(redis_client, keys):
    public = RedisMemory(redis_client, keys)
    mine = RedisMemory(redis_client, keys, workflow_id="wf1")
    theirs = RedisMemory(redis_client, keys, workflow_id="wf2")
    mine.add_turn("a-14062", [human("secret"), ai("kept")])
    public.add_turn("a-14062", [human("hello"), ai("hi")])
    assert mine.messages("a-14062") == [human("secret"), ai("kept")]
    assert public.messages("a-14062") == [human("hello"), ai("hi")]
    assert theirs.messages("a-14062") == []
    assert public.sessions() == ["a-14062"]
    assert mine.sessions() == ["a-14062"] and theirs.sessions() == []
    assert redis_client.llen(f"{keys.prefix}memory:wf1:a-14062") == 2
    assert protected_sessions(redis_client, keys) == [("wf1", "a-14062")]


# --- every namespace is a conforming memory ------------------------------------------------
class TestBareKeyRedisMemory(MemoryConformance):
    @pytest.fixture
    def memory(self, redis_client, keys):
        return RedisMemory(redis_client, bare(keys.prefix))


class TestProtectedRedisMemory(MemoryConformance):
    @pytest.fixture
    def memory(self, redis_client, keys):
        return RedisMemory(redis_client, keys, workflow_id="wf:1")
