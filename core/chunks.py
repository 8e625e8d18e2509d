"""The NDJSON chunk line a streaming client reads (DESIGN section 4): one encoder for every
writer — the worker's outbox, the api's closing lines and keepalives, `mini-n8n run`.

n8n's chunk JSON: `{"type": "begin"|"item"|"end"|"error", "content"?, "metadata": {...}}`, one
object per line.
"""

from __future__ import annotations

from typing import Any

from core.jsontext import dumps

KEEPALIVE = '{"type":"keepalive"}\n'


def line(chunk: dict[str, Any]) -> str:
    """One chunk as the line a client reads."""
    return dumps(chunk) + "\n"


def error_line(message: str, execution_id: str) -> str:
    return line({"type": "error", "content": message, "metadata": {"executionId": execution_id}})


def whole_answer(text: str) -> str:
    """An answer that streamed nothing (no Agent, or streaming off), as one begin, item, end."""
    meta = {"nodeName": None, "itemIndex": 0, "runIndex": 0}
    return (
        line({"type": "begin", "metadata": meta})
        + line({"type": "item", "content": text, "metadata": meta})
        + line({"type": "end", "metadata": meta})
    )
