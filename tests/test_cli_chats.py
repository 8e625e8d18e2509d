"""`mini-n8n chats`: every user's Chat Hub conversations (the command line reads Redis as the
operator), one user's with --user, and one conversation's messages with their tree."""

from __future__ import annotations

import pytest

from core.hub_records import AI, HUMAN, HubMessage, HubSession, MessageStatus
from core.hub_settings import HubSettings
from core.hub_store import ConversationStore
from mini_n8n.cli import main

DAY = 86_400_000


@pytest.fixture
def chats(redis_url, redis_client, keys, monkeypatch, capsys):
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MINI_N8N_KEY_PREFIX", keys.prefix)
    redis_client.sadd(keys.workflows(), "wf1")  # a deployment's Redis
    store = ConversationStore(redis_client, keys, HubSettings())
    for sid, user, at, title in (("s-ada", "ada", DAY, "Sums"), ("s-bob", "bob", 2 * DAY, "Hi")):
        session = HubSession(sid, user, title, at, at, at, agent_name="Support bot")
        store.create(session)
        store.add(session, HubMessage("h1", sid, HUMAN, "Ada", "What is 19 * 23?",
                                      MessageStatus.SUCCESS, at, at))  # fmt: skip
        store.add(session, HubMessage("a1", sid, AI, "AI", "437", MessageStatus.SUCCESS, at + 1,
                                      at + 1, previous_message_id="h1"))  # fmt: skip

    def run(*args: str) -> tuple[int, str]:
        code = main(["chats", *args])
        return code, capsys.readouterr().out

    return run


def test_chats_lists_every_users_conversations_newest_first_or_one_users(chats):
    code, out = chats()
    assert code == 0
    assert out.splitlines() == [
        "s-bob\tbob\t1970-01-03T00:00:00+00:00\tSupport bot\tHi",
        "s-ada\tada\t1970-01-02T00:00:00+00:00\tSupport bot\tSums",
    ]
    assert chats("--user", "ada")[1].splitlines()[0].startswith("s-ada\tada\t")


def test_chats_show_prints_a_conversations_messages_with_their_tree(chats):
    code, out = chats("show", "s-ada")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Sums (ada, Support bot)"
    assert lines[1].endswith("\th1\thuman\tsuccess\tWhat is 19 * 23?")
    assert lines[2].endswith("\ta1 <- h1\tai\tsuccess\t437")
    assert main(["chats", "show", "nope"]) == 1
