"""A conversation turn with tool calls, as n8n 2.41.1's AI Agent 3.x sends it back to its model
and saves it in memory (utils/agent-execution/buildSteps.js and memoryManagement.js
`buildMessagesFromSteps`, checked against what n8n stores: tests/fixtures/n8n_memory/).

Each tool call becomes its own pair, even when the model asked for several at once:
- an AI message with `"content": []` and that one call, whose `args` carry the call's `id`
  beside the model's arguments (n8n's engine hands the id to the tool with its input);
- a tool message whose content is the tool node's output items as JSON, `[{"response":"437"}]`
  (n8n's buildObservation), with the call's id and, in memory, the tool's name.
The saved turn is the user's message, those pairs in order, then the answer.
"""

from __future__ import annotations

from core.jsontext import dumps
from memory.messages import ChatMessage, ToolCall, ai, human, tool


def observation(output: str) -> str:
    """What a tool's output becomes in the conversation: its node's output items as JSON text,
    as JavaScript's JSON.stringify writes them."""
    return dumps([{"response": output}])


def call_messages(call: ToolCall, told: str, named: bool) -> list[ChatMessage]:
    """One call and what the model is told of its result (`observation`, or the tool's own).
    `named`: the tool message carries the tool's name (what memory keeps; n8n's request within
    the turn leaves it out)."""
    asked = ToolCall(call.name, {**call.args, "id": call.id}, call.id)
    return [
        ai("", [asked], blocks=[]),
        tool(told, call.id, call.name if named else None),
    ]


def saved_turn(text: str, calls: list[tuple[ToolCall, str]], answer: str) -> list[ChatMessage]:
    """The messages memory keeps for a turn: the user's, each call with what the model was told
    of its result, the answer."""
    steps = [message for call, told in calls for message in call_messages(call, told, True)]
    return [human(text), *steps, ai(answer)]
