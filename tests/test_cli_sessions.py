"""`mini-n8n sessions`: public chats' sessions one a line, protected ones with their workflow id
in a second column, `--workflow ID` to show or clear those, and the memory key prefix followed.
It says which Redis it reads (REDIS_URL, else the local deployment's state file) and fails, one
line and exit 1, on a Redis without mini-n8n data or an unknown session."""

from __future__ import annotations

import json

import pytest

from core.keys import Keys
from memory.messages import ai, human
from memory.redis import RedisMemory
from mini_n8n.cli import main


@pytest.fixture
def deployed(redis_client, keys):
    """Mark the test's prefix as holding mini-n8n data, as any imported workflow does."""
    redis_client.sadd(keys.workflows(), "wf1")


@pytest.fixture
def sessions(monkeypatch, capsys):
    monkeypatch.delenv("MINI_N8N_MEMORY_KEY_PREFIX", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["sessions", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli(redis_url, keys, monkeypatch, sessions, deployed):
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", keys.prefix)
    said = f"Redis: {redis_url} (REDIS_URL)\n"

    def run(*args: str) -> tuple[int, str, str]:
        code, out, err = sessions(*args)
        assert err.startswith(said)  # which Redis it reads, first
        return code, out, err[len(said) :]

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


def test_an_unknown_session_is_an_error_naming_the_redis(cli, redis_url):
    code, out, err = cli("show", "nope")
    assert (code, out) == (1, "")
    assert err.startswith(f"mini-n8n: no session nope in {redis_url}")
    assert err.count("\n") == 1
    code, out, err = cli("show", "nope", "--workflow", "wf1")
    assert (code, err) == (1, f"mini-n8n: no session nope of workflow wf1 in {redis_url}\n")
    assert cli("clear", "nope")[0] == 1


def test_a_redis_without_mini_n8n_data_is_an_error_not_an_empty_list(
    sessions, redis_url, redis_client, monkeypatch
):
    empty = Keys(prefix="t-empty-nothing-here:")
    RedisMemory(redis_client, empty).add_turn("stray", [human("hi"), ai("hello")])
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", empty.prefix)
    code, out, err = sessions()
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"Redis: {redis_url} (REDIS_URL)"
    assert lines[1].startswith(f"mini-n8n: no mini-n8n data in {redis_url}")
    assert len(lines) == 2
    redis_client.delete(empty.chat("stray"))


def test_without_redis_url_it_reads_the_local_deployment_from_the_state_file(
    sessions, redis_url, redis_client, keys, deployed, monkeypatch, tmp_path
):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("MINI_N8N_KEY_PREFIX", raising=False)
    monkeypatch.chdir(tmp_path)
    assert sessions()[0] == 1  # no state file, no REDIS_URL: no Redis at all, and it says so
    state = {"version": 1, "redis_url": redis_url, "embedded_redis_port": None, "api_key": "k",
             "key_prefix": keys.prefix, "memory_key_prefix": "chat:"}  # fmt: skip
    (tmp_path / ".mini-n8n").mkdir()
    (tmp_path / ".mini-n8n" / "state.json").write_text(json.dumps(state))
    RedisMemory(redis_client, keys).add_turn("local", [human("hi"), ai("hello")])
    said = f"Redis: {redis_url} (the local deployment's, from .mini-n8n/state.json)\n"
    assert sessions() == (0, "local\n", said)
    assert sessions("show", "local") == (0, "human: hi\nai: hello\n", said)


def test_without_redis_url_or_state_file_it_says_how_to_name_one(sessions, monkeypatch, tmp_path):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, err = sessions()
    assert (code, out) == (1, "")
    assert err.startswith("mini-n8n: no Redis to use: REDIS_URL is not set")
    assert err.count("\n") == 1
