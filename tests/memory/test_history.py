"""The history an Agent sends its model (memory/history.py), against what n8n 2.41.1's
loadMemory and LangChain JS produce: orphaned tool messages dropped at either end, and
`trimMessages` (strategy last, startOn human, includeSystem, allowPartial) case by case as
@langchain/core 1.2.8 returned it for the same messages and token counts (a script ran
trimMessages on them with a counter of ceil(length / 4) per message)."""

from __future__ import annotations

import math

import pytest

from memory.history import drop_orphans, load_for_model, trim_last
from memory.messages import ToolCall, ai, human, system, tool

CALL = ToolCall("calculator", {"input": "19 * 23"}, id="call_1")
CONVERSATION = [
    human("my name is Ada"),
    ai("Nice to meet you, Ada!"),
    human("What is 19 * 23?"),
    ai("", [CALL]),
    tool("437", "call_1", "calculator"),
    ai("Based on the tools: Calculator returned 437."),
    human("line one\nline two\nline three\nline four"),
    ai("You said: four lines"),
]


def quarter(text: str) -> int:
    return math.ceil(len(text) / 4)


def shown(messages) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


@pytest.mark.parametrize(
    ("with_system", "max_tokens", "kept"),
    [
        (False, 0, []),
        (False, 3, []),
        (False, 5, []),
        (False, 8, [("human", "line four"), ("ai", "You said: four lines")]),
        (False, 10, [("human", "line three\nline four"), ("ai", "You said: four lines")]),
        (False, 12, [("human", "line three\nline four"), ("ai", "You said: four lines")]),
        (
            False,
            15,
            [
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            20,
            [
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            26,
            [
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            30,
            [
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            40,
            [
                ("human", "What is 19 * 23?"),
                ("ai", ""),
                ("tool", "437"),
                ("ai", "Based on the tools: Calculator returned 437."),
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            60,
            [
                ("human", "my name is Ada"),
                ("ai", "Nice to meet you, Ada!"),
                ("human", "What is 19 * 23?"),
                ("ai", ""),
                ("tool", "437"),
                ("ai", "Based on the tools: Calculator returned 437."),
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            False,
            100,
            [
                ("human", "my name is Ada"),
                ("ai", "Nice to meet you, Ada!"),
                ("human", "What is 19 * 23?"),
                ("ai", ""),
                ("tool", "437"),
                ("ai", "Based on the tools: Calculator returned 437."),
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (True, 4, []),
        (True, 10, []),
        (
            True,
            20,
            [
                ("system", "You are terse."),
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
        (
            True,
            40,
            [
                ("system", "You are terse."),
                ("human", "What is 19 * 23?"),
                ("ai", ""),
                ("tool", "437"),
                ("ai", "Based on the tools: Calculator returned 437."),
                ("human", "line one\nline two\nline three\nline four"),
                ("ai", "You said: four lines"),
            ],
        ),
    ],
)
def test_trimming_keeps_what_langchain_js_keeps(with_system, max_tokens, kept):
    history = [system("You are terse."), *CONVERSATION] if with_system else CONVERSATION
    assert shown(trim_last(history, max_tokens, quarter)) == kept


def test_trimming_leaves_the_messages_it_was_given_unchanged():
    before = shown(CONVERSATION)
    trim_last(CONVERSATION, 10, quarter)  # cuts the four-line message to its last lines
    assert shown(CONVERSATION) == before


def test_orphaned_tool_messages_are_dropped_at_the_start_as_n8n_does():
    window = CONVERSATION[4:]  # a window that begins inside a tool turn
    assert shown(drop_orphans(window)) == shown(CONVERSATION[5:])
    assert shown(drop_orphans(CONVERSATION[3:])) == shown(CONVERSATION[3:])  # paired: kept


def test_an_ai_message_whose_tool_results_are_gone_is_dropped_at_either_end():
    assert shown(drop_orphans(CONVERSATION[:4])) == shown(CONVERSATION[:3])
    alone = [ai("", [CALL]), human("hi"), ai("hello")]
    assert shown(drop_orphans(alone)) == shown(alone[1:])


def test_a_tool_message_at_the_end_stays_with_the_call_it_answers():
    assert shown(drop_orphans(CONVERSATION[:5])) == shown(CONVERSATION[:5])
    unpaired_end = [human("hi"), ai("hello"), tool("437", "call_1")]
    assert shown(drop_orphans(unpaired_end)) == shown(unpaired_end[:2])


def test_loading_for_the_model_trims_then_drops_what_trimming_orphaned():
    """A budget that ends inside the tool turn: trimming keeps the tool result and the final
    answer without the call (startOn human drops them too), never a result without its call."""
    assert shown(load_for_model(CONVERSATION, 0, quarter)) == shown(CONVERSATION)
    assert shown(load_for_model(CONVERSATION, 40, quarter)) == shown(CONVERSATION[2:])
    assert shown(load_for_model(CONVERSATION, 20, quarter)) == [
        ("human", "line one\nline two\nline three\nline four"),
        ("ai", "You said: four lines"),
    ]
