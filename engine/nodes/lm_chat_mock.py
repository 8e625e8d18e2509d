"""Mock Chat Model (`mini-n8n.lmChatMock`): a deterministic model, so tests and demos need no
network (DESIGN section 7). It answers from the conversation:

1. last message is a tool result        -> "Based on the tools: Calculator returned <result>."
                                            (another tool than a calculator: its name;
                                            n8n's `[{"response":"437"}]` read as 437)
2. calculator connected + arithmetic     -> a tool call {"input": "19 * 23"}
3. another tool connected and named      -> a tool call to it, its arguments the message's
   in the message ("ask HTTP_Request        `key=value` words ({"city": "Paris"})
   city=Paris")
4. "what is my name"                     -> "Your name is <X>." / "I don't know your name yet."
5. "my name is <X>"                      -> "Nice to meet you, <X>!"
6. anything else                         -> "You said: <message>"

Tokens are words with their trailing space; `delayPerTokenMs` waits between tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from engine.description import NodeDescription, Property
from engine.errors import ExecutionCanceled
from engine.llm import Cancellation, TokenCallback, Tool
from engine.node import NodeType, SupplyDataFunctions
from engine.registry import register
from memory.messages import ChatMessage, ToolCall, ai

# Linear on any text (possessive runs; a match never starts inside a run of digits): a chat
# message is user input, and a backtracking pattern is quadratic on a long run of digits.
ARITHMETIC = re.compile(
    r"(?<![\d.])\(?-?\d++(?:\.\d++)?+\)?(?:\s*+[-+*/^%]\s*+\(?-?\d++(?:\.\d++)?+\)?)+"
)
NAME_IS = re.compile(r"\bmy name is\s+([^\s.,!?;:]+(?:\s+[A-Z][^\s.,!?;:]*)*)", re.IGNORECASE)
ASKS_NAME = re.compile(r"\bwhat(?:'s| is) my name\b", re.IGNORECASE)
KEY_VALUE = re.compile(r"\b([A-Za-z_][\w-]{0,63})=(\S+)")


def _names(text: str, name: str) -> bool:
    """Whether `text` names the tool `name` as a word of its own, in any case."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def tokenize(text: str) -> list[str]:
    """Words with their trailing whitespace: the pieces concatenate back to `text` exactly."""
    return re.findall(r"\S+\s*|\s+", text)


def tool_result(content: str) -> str:
    """A tool's output in the conversation: as it is, or (Agent 3.x) the `response` of the
    tool node's output items, `[{"response":"437"}]`, as the model beside n8n reads it."""
    try:
        items = json.loads(content)
    except ValueError:
        return content
    if not isinstance(items, list) or not items:
        return content
    if all(isinstance(i, dict) and set(i) == {"response"} for i in items):
        return ", ".join(str(i["response"]) for i in items)
    return content


def _called(messages: list[ChatMessage], call_id: str | None) -> str | None:
    """The tool a result answers, from the call that asked for it (n8n's Agent before 3 sends
    tool results without their tool's name)."""
    for message in reversed(messages):
        for call in message.tool_calls or ():
            if call.id == call_id:
                return call.name
    return None


def answer(messages: list[ChatMessage], tools: list[Tool]) -> ChatMessage:
    last = messages[-1] if messages else ChatMessage("human", "")
    if last.role == "tool":
        name = last.name or _called(messages, last.tool_call_id)
        other = name if name and "calculator" not in name.lower() else None
        result = tool_result(last.content)
        return ai(f"Based on the tools: {other or 'Calculator'} returned {result}.")
    users = [m.content for m in messages if m.role == "human"]
    text = users[-1] if users else ""
    calculator = next((t for t in tools if "calculator" in t.name.lower()), None)
    match = ARITHMETIC.search(text)
    if calculator and match:
        call = ToolCall(calculator.name, {"input": match.group(0).strip()}, id="call_mock_1")
        return ai("", [call])
    named_tool = next((t for t in tools if t is not calculator and _names(text, t.name)), None)
    if named_tool:
        args = dict(KEY_VALUE.findall(text))
        return ai("", [ToolCall(named_tool.name, args, id="call_mock_1")])
    if ASKS_NAME.search(text):
        for earlier in reversed(users[:-1]):
            named = NAME_IS.search(earlier)
            if named:
                return ai(f"Your name is {named.group(1)}.")
        return ai("I don't know your name yet.")
    named = NAME_IS.search(text)
    if named:
        return ai(f"Nice to meet you, {named.group(1)}!")
    return ai(f"You said: {text}")


@dataclass
class MockChatModel:
    delay_per_token: float = 0.0  # seconds
    model_name: str | None = None  # no tokenizer: maxTokensFromMemory estimates (length / 4)
    sleep: Callable[[float], None] | None = None

    def invoke(
        self,
        messages: list[ChatMessage],
        tools: list[Tool],
        on_token: TokenCallback | None = None,
        cancel: Cancellation | None = None,
    ) -> ChatMessage:
        reply = answer(messages, tools)
        for index, token in enumerate(tokenize(reply.content)):
            if cancel is not None and cancel.is_set():
                raise ExecutionCanceled()
            if index and self.delay_per_token and self.sleep:
                self.sleep(self.delay_per_token)
            if on_token is not None:
                on_token(token)
        return reply


@register
class LmChatMock(NodeType):
    type = "mini-n8n.lmChatMock"
    description = NodeDescription(
        display_name="Mock Chat Model",
        group="model",
        description="A deterministic chat model for tests and demos: no network, no key.",
        subtitle="model llm mock",
        inputs=(),
        outputs=("ai_languageModel",),
        properties=(
            Property(
                "delayPerTokenMs",
                "Delay per Token (ms)",
                "number",
                0,
                description="Wait between streamed tokens, to watch the answer arrive.",
                type_options={"minValue": 0},
            ),
        ),
    )

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> MockChatModel:
        delay_ms = float(ctx.get_parameter("delayPerTokenMs", 0) or 0)
        return MockChatModel(delay_per_token=max(delay_ms, 0) / 1000, sleep=ctx.services.sleep)
