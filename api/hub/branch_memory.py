"""A conversation's memory follows the branch shown: before a run, the Redis Chat Memory the
workflow will read for this conversation is written anew from the message tree, so after an
edit or a regenerate the model sees the branch the user sees (n8n leaves a workflow agent's
memory as it was: after editing "My name is Ada" into "My name is Bob" its model saw both).

Which lists: every Redis Chat Memory of the workflow on the deployment's own Redis (no `redis`
credential of its own) whose session is the Chat Trigger's `sessionId` (the default), in the
namespace the memory node itself would use (`Keys.chat(session, memory_scope(workflow))`).
Simple Memory lives in a worker's process and cannot be written from here.

What goes in: each human message of the branch with the answer it got, as one turn (human, ai);
a turn whose answer failed, was stopped or is still waiting is left out, so error texts never
reach the model as history. The newest MAX_TURNS turns only: no node reads more than its window.
"""

from __future__ import annotations

import logging
from typing import Any

from core.hub_records import AI, HUMAN, HubMessage, MessageStatus
from core.hub_store import MemoryWrite
from core.keys import ReservedKeyError
from engine.nodes.chat_trigger import memory_scope
from engine.nodes.memory_redis_chat import MemoryRedisChat
from engine.workflow import Workflow
from memory.messages import ChatMessage, ai, human
from memory.redis import encode

log = logging.getLogger("mini_n8n.hub")

MAX_TURNS = 200
SESSION_FROM_TRIGGER = ("", "={{ $json.sessionId }}", "={{$json.sessionId}}")


def targets(workflow: Workflow, keys, session_id: str) -> list[tuple[str, int]]:
    """(memory list, its TTL in seconds) of each memory the workflow reads this session from."""
    found = []
    for node in workflow.nodes.values():
        if node.type != MemoryRedisChat.type or node.disabled or node.credentials.get("redis"):
            continue
        params = node.parameters
        if params.get("sessionIdType") == "customKey" and str(params.get("sessionKey", "")).replace(
            " ", ""
        ) not in {s.replace(" ", "") for s in SESSION_FROM_TRIGGER}:
            continue  # a key of its own: not this conversation's to rewrite
        try:
            key = keys.chat(session_id, memory_scope(workflow))
        except ReservedKeyError:
            continue
        found.append((key, _int(params.get("sessionTTL"))))
    return found


def turns(branch: list[HubMessage]) -> list[ChatMessage]:
    """The branch's answered turns, oldest first: (human, ai) pairs."""
    messages: list[ChatMessage] = []
    question: HubMessage | None = None
    answers: list[str] = []
    for message in [*branch, None]:
        if message is None or message.type == HUMAN:
            if question is not None and answers:
                messages += [human(question.content), ai("".join(answers))]
            question, answers = message, []
        elif message.type == AI and question is not None:
            if message.status != MessageStatus.SUCCESS:
                question, answers = None, []  # a failed, stopped or waiting answer: no turn
            elif message.content:
                answers.append(message.content)
    return messages[-2 * MAX_TURNS :]


def writes(workflow: Workflow, keys, session_id: str, shown: list[HubMessage]) -> list[MemoryWrite]:
    """What the workflow's memory for this conversation is to hold before its run: the turns
    of the branch shown (core/hub_store.py writes it with the reply's claim)."""
    elements = [encode(m) for m in turns(shown)]
    return [MemoryWrite(key, ttl, elements) for key, ttl in targets(workflow, keys, session_id)]


def _int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0
