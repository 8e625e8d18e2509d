"""Executions at each step of an execution's life, brought there through a `Checker` for a fault
to hit: an answer streaming, a message waiting for its session's turn behind it, a Chat node
waiting for a reply, and a conversation resuming after its reply. `Scene.stage()` puts one at
every step at once, so one fault hits them all.

The two chats: the bundled calculator chat (streaming, Redis memory) with a slow model, and a
Chat-node conversation (responseNodes) that asks, waits, and answers the reply with an agent of
its own (the same slow model, Redis memory), so that a resumed execution runs for a while and
leaves a turn in memory."""

from __future__ import annotations

import copy
import uuid

from tests.chat.conversation import ask_name_workflow
from tests.e2e.checker import Checker, Conversation, Told, name
from tests.e2e.deployment import fresh_ids
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, node, with_model_delay

# Each answer is four tokens: about 1 s of streaming, long enough to stage the steps after it;
# a resumed conversation's agent, staged first, takes 1.6 s.
TOKEN_DELAY_MS = 250
RESUMED_TOKEN_DELAY_MS = 400
QUESTION = "Hi! What is your name?"
STREAMING, TURN, WAIT, RESUME = (
    "streaming", "waiting for its turn", "a Chat node's wait", "resuming after a reply"
)  # fmt: skip


def streaming_chat(token_delay_ms: float = TOKEN_DELAY_MS) -> dict:
    return fresh_ids(with_model_delay(example(REDIS_CHAT), token_delay_ms))


def ask_then_answer(token_delay_ms: float = RESUMED_TOKEN_DELAY_MS) -> dict:
    """Chat Trigger (responseNodes) -> Ask name (waits) -> AI Agent (slow mock model, Redis
    memory) -> Answer (a Chat node that sends the agent's output and waits for nothing)."""
    workflow = ask_name_workflow()
    calculator = streaming_chat(token_delay_ms)
    agent, model, memory = (copy.deepcopy(node(calculator, n)) for n in
                            ("AI Agent", "Mock Chat Model", "Redis Chat Memory"))  # fmt: skip
    for sub in (agent, model, memory):
        sub["id"] = str(uuid.uuid4())
    answer = node(workflow, "Greet")
    answer["name"], answer["parameters"]["message"] = "Answer", "={{ $json.output }}"
    workflow["nodes"] += [agent, model, memory]
    workflow["connections"] = {
        "When chat message received": _main("Ask name"),
        "Ask name": _main("AI Agent"),
        "AI Agent": _main("Answer"),
        "Mock Chat Model": {"ai_languageModel": [[_to("AI Agent", "ai_languageModel")]]},
        "Redis Chat Memory": {"ai_memory": [[_to("AI Agent", "ai_memory")]]},
    }
    return workflow


def _to(target: str, kind: str) -> dict:
    return {"node": target, "type": kind, "index": 0}


def _main(target: str) -> dict:
    return {"main": [[_to(target, "main")]]}


def session(step: str) -> str:
    return f"{step.split()[0]}-{uuid.uuid4().hex[:8]}"


class Scene:
    def __init__(self, checker: Checker, chat: dict, ask: dict):
        self.checker, self.chat, self.ask = checker, chat, ask
        self.waiting: Conversation | None = None
        self.resuming: Conversation | None = None
        self.streamed: Told | None = None

    def stage(self) -> None:
        """One execution at every step, at once (a fault should come right after): the
        resumed one, whose agent is slower, first; the streaming one last but for the message
        queued behind it."""
        self.waiting = self.chat_node_waits()
        self.resume(self.chat_node_waits(RESUME))
        line = session(STREAMING)
        self.streaming(line)
        self.queued(line)
        for told in self.checker.told:
            told.at_fault = self._status(told)

    def streaming(self, line: str | None = None) -> Told:
        """An answer that has begun streaming."""
        told = self.checker.stream(self.chat, line or session(STREAMING),
                                   f"my name is {name()}", STREAMING)  # fmt: skip
        self._wait(lambda: told.items or told.outcome, "its first item")
        self.streamed = told
        return told

    def queued(self, line: str) -> Told:
        """A second message of the session `line`: new, waiting for its turn."""
        told = self.checker.stream(self.chat, line, f"my name is {name()}", TURN, wait=False)
        key = self.checker.deploy.keys.session_queue(self.chat["id"], line)
        ahead = {t.execution_id for t in self.checker.told if t.session == line}
        behind = self._wait(lambda: [i for i in self.checker.deploy.redis.lrange(key, 0, -1)
                                     if i not in ahead], "its place in the line")  # fmt: skip
        told.execution_id = behind[0]
        return told

    def chat_node_waits(self, step: str = WAIT) -> Conversation:
        """A conversation at its question: its execution waits for the reply."""
        conversation = self.checker.conversation(self.ask, session(step), step).ask(QUESTION)
        self._wait(lambda: self._status(conversation.told) == "waiting", "the wait")
        return conversation

    def resume(self, conversation: Conversation) -> None:
        """Its reply sent and taken: the execution runs again (its agent answers)."""
        self.resuming = conversation
        conversation.reply(f"my name is {name()}")
        self._wait(lambda: self._status(conversation.told) == "running", "the resume")

    def reply_to_the_waiting(self) -> None:
        """After the fault: the waiting conversation's user answers, once the clients of the
        other steps were told how theirs ended (by then the fault has reached every socket)."""
        if self.waiting is None:
            return
        for told in self.checker.told:
            if told is not self.waiting.told:
                told.wait(self.checker.bound)
        self.waiting.reply(f"my name is {name()}")

    def _record(self, told: Told) -> dict | None:
        return told.execution_id and self.checker.deploy.execution(told.execution_id) or None

    def _status(self, told: Told) -> str | None:
        record = self._record(told)
        return record and record["status"]

    def _wait(self, probe, what: str):
        return wait_until(probe, self.checker.bound, what)
