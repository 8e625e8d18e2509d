"""What n8n 2.41.1 stored in Redis and sent its model for an Agent's tool turn, recorded by
tests/fixtures/n8n_memory/record.py: one fixture per variant, each with the workflow it ran and,
after each of its turns, the memory list (raw elements, newest first, as LRANGE gives them)
and the bodies of that turn's model requests."""

from __future__ import annotations

import json
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "n8n_memory"
VARIANTS = (
    "agent-2.2-streaming",
    "agent-2.2-lastNode",
    "agent-3.1-streaming",
    "agent-3.1-lastNode",
)
ANSWER_437 = "Based on the tools: Calculator returned 437."
_CALL_ID = re.compile(r'"(call_[A-Za-z0-9_]+)"')


def fixture(variant: str) -> dict:
    return json.loads((FIXTURES / f"{variant}.json").read_text())


def turns(variant: str) -> list[str]:
    return [turn["message"] for turn in fixture(variant)["turns"]]


def memory_after(variant: str, turn: int) -> list[str]:
    """n8n's memory after turn `turn` (from 0), oldest first, each element as n8n wrote it."""
    return list(reversed(fixture(variant)["turns"][turn]["memory"]))


def requests_of(variant: str, turn: int) -> list[dict]:
    return fixture(variant)["turns"][turn]["requests"]


def ids_named(texts: list[str]) -> list[str]:
    """The texts with each tool call id (a model's, generated) replaced by `call_<n>`, n in the
    order the ids first appear: two conversations compare equal when only their ids differ."""
    names: dict[str, str] = {}
    for text in texts:
        for found in _CALL_ID.findall(text):
            names.setdefault(found, f"call_{len(names)}")
    pattern = re.compile("|".join(re.escape(i) for i in names)) if names else None
    return [pattern.sub(lambda m: names[m.group(0)], t) if pattern else t for t in texts]
