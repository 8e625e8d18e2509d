"""What the hub writes into a workflow's memory before a run: the branch shown, as turns, with
failed, stopped and waiting answers left out (api/hub/branch_memory.py)."""

from __future__ import annotations

from api.hub.branch_memory import targets, turns
from core.hub_records import AI, HUMAN, HubMessage, MessageStatus
from core.keys import Keys
from engine.workflow import load_workflow
from tests.workflows import REDIS_CHAT, example, node


def _m(mid: str, kind: str, text: str, status: str = MessageStatus.SUCCESS) -> HubMessage:
    return HubMessage(mid, "s", kind, "x", text, status, 0, 0)


def test_turns_are_questions_with_their_answers_and_failed_answers_are_left_out():
    branch = [
        _m("h1", HUMAN, "My name is Ada"), _m("t1", AI, ""), _m("a1", AI, "Nice to meet you, Ada!"),
        _m("h2", HUMAN, "What broke?"), _m("a2", AI, "The workflow could not answer.", "error"),
        _m("h3", HUMAN, "Stop that"), _m("a3", AI, "Half an ans", "cancelled"),
        _m("h4", HUMAN, "Go on"), _m("a4", AI, "What is your name?", "waiting"),
    ]  # fmt: skip
    assert [(m.role, m.content) for m in turns(branch)] == [
        ("human", "My name is Ada"), ("ai", "Nice to meet you, Ada!"),
    ]  # fmt: skip


def test_the_memory_rewritten_is_the_one_the_workflows_memory_node_reads():
    raw = example(REDIS_CHAT)
    keys = Keys(prefix="p:")
    assert targets(load_workflow(raw), keys, "s1") == [("p:chat:s1", 604800)]
    node(raw, "When chat message received")["parameters"]["public"] = False
    assert targets(load_workflow(raw), keys, "s1") == [("p:memory:calcChatRedis01:s1", 604800)]
    memory = node(raw, "Redis Chat Memory")["parameters"]
    memory.update(sessionIdType="customKey", sessionKey="={{ $json.user }}")
    assert targets(load_workflow(raw), keys, "s1") == []  # a key of its own: not the hub's
