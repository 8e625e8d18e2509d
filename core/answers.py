"""The text a chat shows for an execution's final output: what n8n's chat widget reads from a
lastNode answer (`output`, else `text`, else `message`), else the output as JSON; and what a
chat is told of an execution that is over."""

from __future__ import annotations

from typing import Any

from core.jsontext import dumps

ANSWER_KEYS = ("output", "text", "message")


def output_text(output: Any) -> str:
    if isinstance(output, dict):
        for key in ANSWER_KEYS:
            if isinstance(output.get(key), str):
                return output[key]
    if output is None:
        return ""
    return output if isinstance(output, str) else dumps(output)


def finished_text(status: str) -> str:
    """What a chat socket says of an execution that finished (the chat client knows it)."""
    return f"This execution has already finished ({status}); it takes no more replies."
