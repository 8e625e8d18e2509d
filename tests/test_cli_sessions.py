"""`mini-n8n sessions`: public chats' sessions one a line, protected ones with their workflow id
in a second column, `--workflow ID` to show or clear those, and the memory key prefix followed."""

from __future__ import annotations

import pytest

from core.keys import Keys
from memory.messages import ai, human
from memory.redis import RedisMemory
from mini_n8n.cli import main


@pytest.fixture
def cli(redis_url, keys, monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", keys.prefix)
    monkeypatch.delenv("MINI_N8N_MEMORY_KEY_PREFIX", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["sessions", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_sessions_lists_public_ones_then_protected_ones_with_their_workflow(
    cli, redis_client, keys
):
    RedisMemory(redis_client, keys).add_turn("a-1", [human("hi"), ai("hello")])
    RedisMemory(redis_client, keys, workflow_id="wf:2").add_turn("a-1", [human("pw"), ai("ok")])
    assert cli() == (0, "a-1\na-1\twf:2\n", "")
    assert cli("--workflow", "wf:2") == (0, "a-1\twf:2\n", "")
    assert cli("show", "a-1") == (0, "human: hi\nai: hello\n", "")
    assert cli("show", "a-1", "--workflow", "wf:2") == (0, "human: pw\nai: ok\n", "")
    assert cli("clear", "a-1", "--workflow", "wf:2") == (0, "cleared a-1\n", "")
    assert cli() == (0, "a-1\n", "")


def test_with_an_empty_memory_prefix_sessions_are_bare_keys_and_ours_are_refused(
    cli, redis_client, keys, monkeypatch
):
    monkeypatch.setenv("MINI_N8N_MEMORY_KEY_PREFIX", "")
    bare = Keys(keys.prefix, memory_prefix="")
    RedisMemory(redis_client, bare).add_turn("a-14062", [human("hi"), ai("hello")])
    redis_client.hset(bare.webhooks(), "POST x/chat", "wf1")
    redis_client.rpush(bare.session_queue("wf1", "a-14062"), "e1")
    assert cli() == (0, "a-14062\n", "")
    code, out, err = cli("clear", "webhooks")
    assert (code, out) == (2, "")
    assert err.startswith('The session key "webhooks" cannot be used')
    assert redis_client.hgetall(bare.webhooks()) == {"POST x/chat": "wf1"}
