"""How many tokens a message's content costs, for the Agent's `maxTokensFromMemory`.

LangChain JS (what n8n trims with) counts with the model's tiktoken encoding: it maps the model
name as `getModelNameForTiktoken` and js-tiktoken's `getEncodingNameForModel` do, and falls back
to `ceil(length / 4)` (length in UTF-16 code units, JavaScript's) when the model is not an
OpenAI one or the encoding cannot be had. We do the same, with the `bpe-openai` package: GitHub's
BPE tokenizer with OpenAI's cl100k_base and o200k_base ranks shipped inside the wheel, so counting
works offline (tiktoken itself downloads its ranks at first use; so does n8n's js-tiktoken, which
is why an n8n without internet access counts with the estimate). The package (a large native
library) is imported on first use only: a worker that never trims never loads it.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Count = Callable[[str], int]

# js-tiktoken 1.0.21 getEncodingNameForModel, for the two encodings we ship.
_CL100K = frozenset(
    [
        "gpt-3.5-turbo-instruct-0914",
        "gpt-3.5-turbo-instruct",
        "gpt-3.5-turbo-16k-0613",
        "gpt-3.5-turbo-16k",
        "gpt-3.5-turbo-0613",
        "gpt-3.5-turbo-0301",
        "gpt-3.5-turbo",
        "gpt-4-32k-0613",
        "gpt-4-32k-0314",
        "gpt-4-32k",
        "gpt-4-0613",
        "gpt-4-0314",
        "gpt-4",
        "gpt-3.5-turbo-1106",
        "gpt-35-turbo",
        "gpt-4-1106-preview",
        "gpt-4-vision-preview",
        "gpt-3.5-turbo-0125",
        "gpt-4-turbo",
        "gpt-4-turbo-2024-04-09",
        "gpt-4-turbo-preview",
        "gpt-4-0125-preview",
        "text-embedding-ada-002",
        "text-embedding-3-small",
        "text-embedding-3-large",
    ]
)
_O200K = frozenset(
    [
        "gpt-4o",
        "gpt-4o-2024-05-13",
        "gpt-4o-2024-08-06",
        "gpt-4o-2024-11-20",
        "gpt-4o-mini-2024-07-18",
        "gpt-4o-mini",
        "gpt-4o-search-preview",
        "gpt-4o-search-preview-2025-03-11",
        "gpt-4o-mini-search-preview",
        "gpt-4o-mini-search-preview-2025-03-11",
        "gpt-4o-audio-preview",
        "gpt-4o-audio-preview-2024-12-17",
        "gpt-4o-audio-preview-2024-10-01",
        "gpt-4o-mini-audio-preview",
        "gpt-4o-mini-audio-preview-2024-12-17",
        "o1",
        "o1-2024-12-17",
        "o1-mini",
        "o1-mini-2024-09-12",
        "o1-preview",
        "o1-preview-2024-09-12",
        "o1-pro",
        "o1-pro-2025-03-19",
        "o3",
        "o3-2025-04-16",
        "o3-mini",
        "o3-mini-2025-01-31",
        "o4-mini",
        "o4-mini-2025-04-16",
        "chatgpt-4o-latest",
        "gpt-4o-realtime",
        "gpt-4o-realtime-preview-2024-10-01",
        "gpt-4o-realtime-preview-2024-12-17",
        "gpt-4o-mini-realtime-preview",
        "gpt-4o-mini-realtime-preview-2024-12-17",
        "gpt-4.1",
        "gpt-4.1-2025-04-14",
        "gpt-4.1-mini",
        "gpt-4.1-mini-2025-04-14",
        "gpt-4.1-nano",
        "gpt-4.1-nano-2025-04-14",
        "gpt-4.5-preview",
        "gpt-4.5-preview-2025-02-27",
        "gpt-5",
        "gpt-5-2025-08-07",
        "gpt-5-nano",
        "gpt-5-nano-2025-08-07",
        "gpt-5-mini",
        "gpt-5-mini-2025-08-07",
        "gpt-5-chat-latest",
    ]
)


def estimate(text: str) -> int:
    """LangChain's fallback: ceil(text.length / 4), the length counted as JavaScript does."""
    return math.ceil(len(text.encode("utf-16-le")) // 2 / 4)


def encoding_name(model: str | None) -> str | None:
    """The encoding LangChain JS would count `model` with; None where we estimate (a model
    that is not OpenAI's, an encoding we do not ship, or no model name: LangChain then asks
    for "gpt2", whose ranks are not shipped)."""
    if not model:
        return None
    name = _tiktoken_model_name(model)
    if name in _CL100K:
        return "cl100k_base"
    if name in _O200K:
        return "o200k_base"
    return None


def counter(model: str | None) -> Count:
    """Tokens of one message's content for `model`, as LangChain JS's getNumTokens counts."""
    name = encoding_name(model)
    encoding = _encoding(name) if name else None
    if encoding is None:
        return estimate

    def count(text: str) -> int:
        try:
            return len(encoding.encode(text))
        except Exception:  # js-tiktoken refuses special tokens; LangChain then estimates
            return estimate(text)

    return count


def _tiktoken_model_name(model: str) -> str:
    """@langchain/core's getModelNameForTiktoken."""
    for prefix, name in (
        ("gpt-5", "gpt-5"),
        ("gpt-3.5-turbo-16k", "gpt-3.5-turbo-16k"),
        ("gpt-3.5-turbo-", "gpt-3.5-turbo"),
        ("gpt-4-32k", "gpt-4-32k"),
        ("gpt-4-", "gpt-4"),
        ("gpt-4o", "gpt-4o"),
    ):
        if model.startswith(prefix):
            return name
    return model


@functools.cache
def _encoding(name: str) -> Any:
    try:
        # A large native library: loaded when a count first needs it.
        import bpe_openai  # type: ignore[import-untyped]

        return bpe_openai.get_encoding(name)
    except Exception:  # not installed, or a build without this encoding: estimate
        log.warning("no %s tokenizer available; counting tokens as length / 4", name)
        return None
