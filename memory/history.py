"""The history an Agent sends its model, cut as n8n 2.41.1 cuts it (utils/agent-execution/
memoryManagement.js `loadMemory`): the memory's window, then orphaned tool messages dropped, then,
with `maxTokensFromMemory`, LangChain JS's `trimMessages` (strategy "last", startOn "human",
includeSystem, allowPartial) and the orphans dropped again.

Pure functions over messages; how tokens are counted is given (engine/tokenizer.py): LangChain
counts each message's content alone (`getNumTokens(content)`), so a tool call's arguments and a
message's role cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from memory.messages import ChatMessage

Count = Callable[[str], int]  # tokens of one message's content


def drop_orphans(history: list[ChatMessage]) -> list[ChatMessage]:
    """n8n's cleanupOrphanedMessages: at the start, tool messages and an AI message whose tool
    calls are not followed by their results; at the end, tool messages not preceded by an AI
    message with tool calls, and an AI message still waiting for its tool results."""
    result = list(history)
    changed = True
    while changed and result:
        changed = False
        while result and result[0].role == "tool":
            result.pop(0)
            changed = True
        if (
            result
            and _calls_tools(result[0])
            and not (len(result) > 1 and result[1].role == "tool")
        ):
            result.pop(0)
            changed = True
    changed = True
    while changed and result:
        changed = False
        last = result[-1]
        if last.role == "tool":
            before = len(result) - 2
            while before >= 0 and result[before].role == "tool":
                before -= 1
            if before < 0 or not _calls_tools(result[before]):
                result.pop()
                changed = True
        elif _calls_tools(last):
            result.pop()
            changed = True
    return result


def load_for_model(history: list[ChatMessage], max_tokens: int, count: Count) -> list[ChatMessage]:
    """What n8n's loadMemory makes of the window: orphans dropped, then, when `max_tokens` is
    set (> 0), the newest messages that fit, starting on a human one, orphans dropped again."""
    history = drop_orphans(history)
    if max_tokens > 0:
        history = drop_orphans(trim_last(history, max_tokens, count))
    return history


def trim_last(messages: list[ChatMessage], max_tokens: int, count: Count) -> list[ChatMessage]:
    """LangChain JS `trimMessages(messages, {strategy: "last", startOn: "human",
    includeSystem: true, allowPartial: true, maxTokens})` (@langchain/core 1.2.8)."""
    copies = [_copy(m) for m in messages]
    keep_system = bool(copies) and copies[0].role == "system"
    newest_first = copies[:1] + copies[:0:-1] if keep_system else copies[::-1]
    kept = _first_max_tokens(newest_first, max_tokens, count)
    if not kept:
        return []
    if keep_system:
        return kept[:1] + kept[:0:-1]
    return kept[::-1]


def _first_max_tokens(messages: list[ChatMessage], max_tokens: int, count: Count):
    """LangChain's `_firstMaxTokens` with partialStrategy "last" and endOn "human", on a list
    the caller reversed (newest first)."""

    def total(ms: list[ChatMessage]) -> int:
        return sum(count(m.content) for m in ms)

    idx = 0
    for cut in range(len(messages)):
        if total(messages[: len(messages) - cut]) <= max_tokens:
            idx = len(messages) - cut
            break
    if idx < len(messages):
        kept = _partial(messages, idx, max_tokens, total)
        if kept is not None:
            messages, idx = kept, idx + 1
    while idx > 0 and messages[idx - 1].role != "human":  # endOn: the oldest kept is human
        idx -= 1
    return messages[:idx]


def _partial(messages: list[ChatMessage], idx: int, max_tokens: int, total):
    """allowPartial: the first message that did not fit, cut to its last lines (split on "\\n"
    as LangChain's default splitter does) while they fit; None when no cut fits."""
    excluded = messages[idx]
    if not excluded.content:
        return None
    lines = excluded.content.split("\n")
    pieces = [f"{line}\n" for line in lines[:-1]] + [lines[-1]]
    pieces.reverse()  # "last": drop from the start of the text
    for _ in range(len(pieces) - 1):
        pieces.pop()
        # LangChain counts the pieces in this (reversed) order, then keeps them in text order.
        candidate = _copy(excluded, "".join(pieces))
        if total([*messages[:idx], candidate]) <= max_tokens:
            return [*messages[:idx], _copy(excluded, "".join(reversed(pieces)))]
    return None


def _calls_tools(message: ChatMessage) -> bool:
    return message.role == "ai" and bool(message.tool_calls)


def _copy(message: ChatMessage, content: str | None = None) -> ChatMessage:
    """A copy; with `content`, one of that text (a cut message keeps no content blocks)."""
    return ChatMessage(
        message.role,
        message.content if content is None else content,
        tool_calls=list(message.tool_calls),
        tool_call_id=message.tool_call_id,
        name=message.name,
        blocks=message.blocks if content is None else None,
    )
